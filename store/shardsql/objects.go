package shardsql

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// Row is an object as its table holds it.
type Row struct {
	Local   uint64
	Doc     []byte
	Version int64
	Created time.Time
	Updated time.Time
}

// Object is the row as the object of type typ on db.
func (r Row) Object(db DB, typ idcodec.Type) model.Object {
	return model.Object{ID: db.ID(typ, r.Local), Type: typ, Version: r.Version, CreatedAt: r.Created, UpdatedAt: r.Updated, Doc: r.Doc}
}

// InsertObject inserts doc as a new object of type typ (version 1) and
// composes its ID from the shard and the AUTO_INCREMENT local id. A local
// id past the 36 bits an ID can carry is EShardFull; the caller's
// transaction then rolls the row back.
func InsertObject(ctx context.Context, x sqlx.ExecerContext, db DB, typ idcodec.Type, doc []byte, at time.Time) (model.Object, error) {
	res, err := x.ExecContext(ctx, "INSERT INTO "+db.table(objectTables[typ])+" (doc, version, created_at, updated_at) VALUES (?, 1, ?, ?)", doc, at, at)
	if err != nil {
		return model.Object{}, err
	}
	local, err := res.LastInsertId()
	if err != nil {
		return model.Object{}, err
	}
	id, err := idcodec.Encode(uint32(db.N), typ, uint64(local))
	if err != nil {
		return model.Object{}, model.Errorf(model.EShardFull, "shard %d has no %s ids left", db.N, typ)
	}
	return model.Object{ID: id, Type: typ, Version: 1, CreatedAt: at, UpdatedAt: at, Doc: doc}, nil
}

// ReadObject reads one object row, with the lock given (inside a
// transaction). A missing row is sql.ErrNoRows.
func ReadObject(ctx context.Context, q sqlx.QueryerContext, db DB, typ idcodec.Type, local uint64, lock Lock) (Row, error) {
	r := Row{Local: local}
	err := q.QueryRowxContext(ctx, "SELECT doc, version, created_at, updated_at FROM "+db.table(objectTables[typ])+" WHERE local_id = ?"+string(lock), local).
		Scan(&r.Doc, &r.Version, &r.Created, &r.Updated)
	return r, err
}

// ReadObjectCount reads one object row and the length of its list count,
// with one statement; a missing row is sql.ErrNoRows.
func ReadObjectCount(ctx context.Context, q sqlx.QueryerContext, db DB, typ idcodec.Type, local uint64, count model.Mapping) (Row, int64, error) {
	r := Row{Local: local}
	var n int64
	err := q.QueryRowxContext(ctx, "SELECT o.doc, o.version, o.created_at, o.updated_at, "+countColumn(db, db.ID(typ, local), count)+
		" FROM "+db.table(objectTables[typ])+" o WHERE o.local_id = ?", local).Scan(&r.Doc, &r.Version, &r.Created, &r.Updated, &n)
	return r, n, err
}

// UpdateObject replaces an object's document and raises its version by one.
func UpdateObject(ctx context.Context, x sqlx.ExecerContext, db DB, typ idcodec.Type, local uint64, doc []byte, at time.Time) error {
	_, err := x.ExecContext(ctx, "UPDATE "+db.table(objectTables[typ])+" SET doc = ?, version = version + 1, updated_at = ? WHERE local_id = ?", doc, at, local)
	return err
}

// ObjectSelect is one part of a read by id: the rows of Locals in DB's
// table of Type. With Count set (and exactly one local), the part also
// reads the length of that object's list Count.
type ObjectSelect struct {
	DB     DB
	Type   idcodec.Type
	Locals []uint64
	Count  model.Mapping
}

// ReadObjects reads the rows of every part, all on one host, with one
// statement: a SELECT … WHERE local_id IN (…) per part, joined by UNION
// ALL, each row tagged with its part. fn receives each row found, with its
// list length (0 for a part without Count). Missing rows are simply not
// passed; the order of rows is the server's.
func ReadObjects(ctx context.Context, q sqlx.QueryerContext, parts []ObjectSelect, fn func(part int, r Row, n int64)) error {
	var b strings.Builder
	var args []any
	for i, p := range parts {
		if i > 0 {
			b.WriteString(" UNION ALL ")
		}
		b.WriteString("SELECT ")
		b.WriteString(strconv.Itoa(i))
		b.WriteString(", o.local_id, o.doc, o.version, o.created_at, o.updated_at, ")
		if p.Count != 0 && len(p.Locals) == 1 {
			b.WriteString(countColumn(p.DB, p.DB.ID(p.Type, p.Locals[0]), p.Count))
		} else {
			b.WriteByte('0')
		}
		b.WriteString(" FROM ")
		b.WriteString(p.DB.table(objectTables[p.Type]))
		b.WriteString(" o WHERE o.local_id IN (")
		for j, l := range p.Locals {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('?')
			args = append(args, l)
		}
		b.WriteByte(')')
	}
	rows, err := q.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var part int
		var r Row
		var n int64
		if err := rows.Scan(&part, &r.Local, &r.Doc, &r.Version, &r.Created, &r.Updated, &n); err != nil {
			return err
		}
		fn(part, r, n)
	}
	return rows.Err()
}

// countColumn is the sub-select of the length of from's list m.
func countColumn(db DB, from uint64, m model.Mapping) string {
	return "COALESCE((SELECT c.n FROM " + db.table(countsTable) + " c WHERE c.from_id = " + strconv.FormatUint(from, 10) +
		" AND c.mapping = " + strconv.Itoa(int(m)) + "), 0)"
}
