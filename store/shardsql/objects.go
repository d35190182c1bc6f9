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

// Row is an object as its table holds it, with the lengths of the lists
// it carries (model.CountKeys) when the read asked for them.
type Row struct {
	Local   uint64
	Doc     []byte
	Flags   model.Flags // the flags column: derived from Doc by the database
	Version int64
	Created time.Time
	Updated time.Time
	Counts  []int64
}

// Object is the row as the object of type typ on db.
func (r Row) Object(db DB, typ idcodec.Type) model.Object {
	return model.Object{ID: db.ID(typ, r.Local), Type: typ, Version: r.Version, CreatedAt: r.Created, UpdatedAt: r.Updated, Doc: r.Doc, Counts: r.Counts, Flags: r.Flags}
}

// maxCounted bounds len(model.CountKeys(t)) for every type: a batched
// read pads every part to this many count columns (UNION ALL needs one
// shape).
const maxCounted = 6

// countSelect is the sub-select of the count kept under key (a mapping,
// or model.SecretKey of one) of the object whose id is the SQL expression
// id.
func countSelect(id string, key uint8) string {
	return "COALESCE((SELECT c.n FROM {db}.mapping_counts c WHERE c.from_id = " + id + " AND c.mapping = " + strconv.Itoa(int(key)) + "), 0)"
}

// countColumns writes, for the object of type typ whose local id is the
// column local, the count columns a read returns: its model.CountKeys
// padded with 0 to pad columns, then extra's length (0 when extra is 0).
func countColumns(b *strings.Builder, typ idcodec.Type, local string, extra model.Mapping, pad int) {
	id := local + " + " + base(typ)
	keys := model.CountKeys(typ)
	for _, k := range keys {
		b.WriteString(", ")
		b.WriteString(countSelect(id, k))
	}
	for range pad - len(keys) {
		b.WriteString(", 0")
	}
	b.WriteString(", ")
	if extra == 0 {
		b.WriteByte('0')
	} else {
		b.WriteString(countSelect(id, uint8(extra)))
	}
}

// The statements of the object tables. A read with counts is declared
// for every type, every list whose length it may carry besides (extra, 0
// for none) and, read alone, every Lock.
var (
	insertObject   = perType("INSERT INTO {db}.{table} (doc, version, created_at, updated_at) VALUES (?, 1, ?, ?)")
	readObject     = perTypeLock("SELECT doc, flags, version, created_at, updated_at FROM {db}.{table} WHERE local_id = ?")
	updateObject   = perType("UPDATE {db}.{table} SET doc = ?, version = version + 1, updated_at = ? WHERE local_id = ?")
	readCounted    = perTypeExtra(func(typ idcodec.Type, extra model.Mapping) lockStmt { return perLock(countedSQL(typ, extra)) })
	readObjectsOf  = perTypeExtra(func(typ idcodec.Type, extra model.Mapping) stmt { return declare(objectsSQL(typ, extra)) })
	readBoardOwner = perLock("SELECT o.doc, o.flags, o.version, o.created_at, o.updated_at," +
		" COALESCE((SELECT c.n FROM {db}.mapping_counts c WHERE c.from_id = CAST(JSON_VALUE(o.doc, '$.owner_id') AS UNSIGNED) AND c.mapping = ?), 0)" +
		" FROM {db}." + objectTables[idcodec.TypeBoard] + " o WHERE o.local_id = ?")
)

// countedSQL is the read of one object of type typ with its counts and
// extra's (ReadObjectCounted), before its lock.
func countedSQL(typ idcodec.Type, extra model.Mapping) string {
	var b strings.Builder
	b.WriteString("SELECT o.doc, o.flags, o.version, o.created_at, o.updated_at")
	countColumns(&b, typ, "o.local_id", extra, len(model.CountKeys(typ)))
	b.WriteString(" FROM {db}." + objectTables[typ] + " o WHERE o.local_id = ?")
	return b.String()
}

// objectsSQL is the head of one part of ReadObjects (objects of type typ
// with extra's count), up to its IN list: its first placeholder is the
// part's index.
func objectsSQL(typ idcodec.Type, extra model.Mapping) string {
	var b strings.Builder
	b.WriteString("SELECT ?, o.local_id, o.doc, o.flags, o.version, o.created_at, o.updated_at")
	countColumns(&b, typ, "o.local_id", extra, maxCounted)
	b.WriteString(" FROM {db}." + objectTables[typ] + " o WHERE o.local_id IN (")
	return b.String()
}

// countDest returns the scan destinations of a read's count columns
// (counted, then the extra one into n) and a function that stores them
// into r.Counts.
func countDest(typ idcodec.Type, pad int, n *int64) ([]any, func(r *Row)) {
	vals := make([]int64, pad)
	dest := make([]any, pad+1)
	for i := range vals {
		dest[i] = &vals[i]
	}
	dest[pad] = n
	k := len(model.CountKeys(typ))
	return dest, func(r *Row) {
		if k > 0 {
			r.Counts = vals[:k:k]
		}
	}
}

// InsertObject inserts doc as a new object of type typ (version 1) and
// composes its ID from the shard and the AUTO_INCREMENT local id; flags
// are the document's (model.FlagsOf), which the row's flags column
// derives by itself and the returned object carries. A local
// id past the 36 bits an ID can carry is EShardFull; the caller's
// transaction then rolls the row back.
func InsertObject(ctx context.Context, x sqlx.ExecerContext, db DB, typ idcodec.Type, doc []byte, flags model.Flags, at time.Time) (model.Object, error) {
	res, err := x.ExecContext(ctx, db.sql(insertObject.of(typ)), doc, at, at)
	if err != nil {
		return model.Object{}, err
	}
	local, err := res.LastInsertId()
	if err != nil {
		return model.Object{}, err
	}
	return newObject(db, typ, local, doc, flags, at)
}

// newObject is the object InsertObject made: local is its AUTO_INCREMENT
// id.
func newObject(db DB, typ idcodec.Type, local int64, doc []byte, flags model.Flags, at time.Time) (model.Object, error) {
	id, err := idcodec.Encode(uint32(db.N), typ, uint64(local))
	if err != nil {
		return model.Object{}, model.Errorf(model.EShardFull, "shard %d has no %s ids left", db.N, typ)
	}
	obj := fresh(typ, doc, flags, at)
	obj.ID = id
	return obj, nil
}

// fresh is a new object of type typ, but for its ID.
func fresh(typ idcodec.Type, doc []byte, flags model.Flags, at time.Time) model.Object {
	var counts []int64 // a new object's lists are empty
	if k := len(model.CountKeys(typ)); k > 0 {
		counts = make([]int64, k)
	}
	return model.Object{Type: typ, Version: 1, CreatedAt: at, UpdatedAt: at, Doc: doc, Counts: counts, Flags: flags}
}

// ReadObject reads one object row, with the lock given (inside a
// transaction). A missing row is sql.ErrNoRows.
func ReadObject(ctx context.Context, q sqlx.QueryerContext, db DB, typ idcodec.Type, local uint64, lock Lock) (Row, error) {
	r := Row{Local: local}
	err := q.QueryRowxContext(ctx, db.sql(readObject[typ][lock]), local).
		Scan(&r.Doc, &r.Flags, &r.Version, &r.Created, &r.Updated)
	return r, err
}

// ReadObjectCounted reads one object row with the lengths of the lists it
// carries (Row.Counts) and, when extra is set, of list extra too (n), with
// one statement and the lock given. A missing row is sql.ErrNoRows.
func ReadObjectCounted(ctx context.Context, q sqlx.QueryerContext, db DB, typ idcodec.Type, local uint64, extra model.Mapping, lock Lock) (r Row, n int64, err error) {
	pad := len(model.CountKeys(typ))
	r.Local = local
	counts, fill := countDest(typ, pad, &n)
	err = q.QueryRowxContext(ctx, db.sql(readCounted[typ][extra][lock]), local).Scan(append([]any{&r.Doc, &r.Flags, &r.Version, &r.Created, &r.Updated}, counts...)...)
	fill(&r)
	return r, n, err
}

// ReadBoardOwnerCounted is ReadObject of a board that also reads the
// length of its owner's list m (as Count does: no lock of its own), in the
// same statement: a pin's create learns its author's follower count with
// the read of its board. A missing row is sql.ErrNoRows.
func ReadBoardOwnerCounted(ctx context.Context, q sqlx.QueryerContext, db DB, local uint64, m model.Mapping, lock Lock) (r Row, n int64, err error) {
	r.Local = local
	err = q.QueryRowxContext(ctx, db.sql(readBoardOwner[lock]), uint8(m), local).Scan(&r.Doc, &r.Flags, &r.Version, &r.Created, &r.Updated, &n)
	return r, n, err
}

// UpdateObject replaces an object's document and raises its version by
// one; t records the object as changed.
func UpdateObject(ctx context.Context, t *Tx, db DB, typ idcodec.Type, local uint64, doc []byte, at time.Time) error {
	_, err := t.change(ctx, []uint64{db.ID(typ, local)}, db.sql(updateObject.of(typ)), doc, at, local)
	return err
}

// ObjectSelect is one part of a read by id: the rows of Locals in DB's
// table of Type, with the lengths of the lists they carry, and of list
// Count too when it is set.
type ObjectSelect struct {
	DB     DB
	Type   idcodec.Type
	Locals []uint64
	Count  model.Mapping
}

// ReadObjects reads the rows of every part, all on one host, with one
// statement: a SELECT … WHERE local_id IN (…) per part, joined by UNION
// ALL, each row tagged with its part. fn receives each row found (with its
// counts) and the length of the part's list Count (0 without one). Missing
// rows are simply not passed; the order of rows is the server's.
func ReadObjects(ctx context.Context, q sqlx.QueryerContext, parts []ObjectSelect, fn func(part int, r Row, n int64)) error {
	var b strings.Builder
	var args []any
	for i, p := range parts {
		if i > 0 {
			b.WriteString(" UNION ALL ")
		}
		b.WriteString(p.DB.sql(readObjectsOf[p.Type][p.Count]))
		args = append(args, i)
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
		var vals [maxCounted]int64
		dest := []any{&part, &r.Local, &r.Doc, &r.Flags, &r.Version, &r.Created, &r.Updated}
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		if err := rows.Scan(append(dest, &n)...); err != nil {
			return err
		}
		if part < 0 || part >= len(parts) {
			continue
		}
		if k := len(model.CountKeys(parts[part].Type)); k > 0 {
			r.Counts = append([]int64(nil), vals[:k]...)
		}
		fn(part, r, n)
	}
	return rows.Err()
}
