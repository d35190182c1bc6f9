package shardsql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// A new object's insert need not cost a round trip of its own either,
// though its AUTO_INCREMENT id is what the statements after it name (its
// lists' rows, its feed outbox row): InsertNew queues the insert and has
// the server keep the id it composes from the shard, the type and the
// local id in the session variable @new_id, which those statements name
// instead of a value (Ref). The transaction reads the id back with its
// COMMIT, in the same text (begin.go), or at once when a caller asks for
// it before (Tx.InsertedID): a create that reads its parent, inserts and
// commits is two round trips, not three. A transaction inserts at most
// one object so.
//
// A local id past the 36 bits an ID carries is refused by the server
// itself, in the statement after the insert (errNoIDsLeft), which fails
// the text and so the transaction, as the check of InsertObject does in
// this process.

// errNoIDsLeft is the MySQL error number a queued insert signals when the
// local id it got does not fit an ID: one MariaDB's own errors do not use.
const errNoIDsLeft = 64036

// newIDVar is the session variable a queued insert leaves its object's
// id in.
const newIDVar = "@new_id"

// insertNew is the queued insert of one object, its id's check and its
// id into newIDVar.
var insertNew = perType("INSERT INTO {db}.{table} (doc, version, created_at, updated_at) VALUES (?, 1, ?, ?);" +
	" IF LAST_INSERT_ID() > " + strconv.FormatUint(idcodec.MaxLocal, 10) +
	" THEN SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = " + strconv.Itoa(errNoIDsLeft) + ", MESSAGE_TEXT = 'no ids left in {table} on this shard'; END IF;" +
	" SET " + newIDVar + " = {base} + LAST_INSERT_ID()")

// inserted is the object a Tx's InsertNew queued: its id is 0 until the
// transaction reads it.
type inserted struct {
	db    DB
	typ   idcodec.Type
	id    uint64
	owner uint64 // the pin's owner, for the owner cache (CacheOwner); 0 for none
}

// InsertNew queues the insert of doc as a new object of type typ (version
// 1) on t, to go with t's next statement or its COMMIT. The object it
// returns is the new one but for its ID, which is 0: the transaction
// learns it when it commits (Inserted), or when asked before
// (InsertedID), and its statements name it meanwhile as NewObject. flags
// are the document's (model.FlagsOf), which the row's flags column
// derives by itself and the returned object carries. A local id past the
// 36 bits an ID can carry fails the transaction (EShardFull, by Classify).
func InsertNew(ctx context.Context, t *Tx, db DB, typ idcodec.Type, doc []byte, flags model.Flags, at time.Time) (model.Object, error) {
	if t.inserted != nil {
		return model.Object{}, errors.New("shardsql: a transaction inserts one new object")
	}
	if err := later(ctx, t, db.sql(insertNew.of(typ)), doc, at, at); err != nil {
		return model.Object{}, err
	}
	t.inserted = &inserted{db: db, typ: typ}
	return fresh(typ, doc, flags, at), nil
}

// Ref is how a statement names an object: by its id (RefTo), or as the
// object its transaction's InsertNew inserted (NewObject), whose id the
// server holds.
type Ref struct {
	id  uint64
	new bool
}

// RefTo names the object id.
func RefTo(id uint64) Ref { return Ref{id: id} }

// NewObject names the object its transaction's InsertNew inserted.
var NewObject = Ref{new: true}

// arg is r as a statement's argument, for the text of r's kind (pick).
func (r Ref) arg(args []any) []any {
	if r.new {
		return args
	}
	return append(args, r.id)
}

// pick is the statement of r's kind: byID names the object with a
// placeholder, byVar with newIDVar, which t must have set (InsertNew).
func (r Ref) pick(t *Tx, byID, byVar stmt) (stmt, error) {
	if !r.new {
		return byID, nil
	}
	return byVar, t.insertedNamed()
}

// insertedNamed is nil when t inserted an object (InsertNew), whose id a
// statement may name as newIDVar; otherwise the variable holds another
// transaction's id, or none.
func (t *Tx) insertedNamed() error {
	if t.inserted == nil {
		return errors.New("shardsql: a statement names the new object of a transaction that inserted none")
	}
	return nil
}

// InsertedID is the id of the object t's InsertNew inserted: read at
// once, with the statements queued (one round trip), when t has not
// learnt it yet. A caller that must name it in a value (a key's outcome,
// a save's rows) asks so; others name it as NewObject and leave it to the
// COMMIT.
func (t *Tx) InsertedID(ctx context.Context) (uint64, error) {
	n := t.inserted
	if n == nil {
		return 0, errors.New("shardsql: the transaction inserted no object")
	}
	if n.id == 0 {
		var id sql.NullInt64
		if err := t.QueryRowContext(ctx, "SELECT "+newIDVar).Scan(&id); err != nil {
			return 0, err
		}
		if err := n.learn(id); err != nil {
			return 0, err
		}
	}
	return n.id, nil
}

// Inserted is the id of the object t's InsertNew inserted, once t
// committed (or InsertedID read it); 0 before, or when it inserted none.
func (t *Tx) Inserted() uint64 {
	if t.inserted == nil {
		return 0
	}
	return t.inserted.id
}

// idDue reports whether t inserted an object whose id it has not read.
func (t *Tx) idDue() bool { return t.inserted != nil && t.inserted.id == 0 }

// learn takes id, as the session variable held it, for n's: it must be
// an id of n's type on n's database, or the variable was not the insert's.
func (n *inserted) learn(id sql.NullInt64) error {
	p, err := idcodec.Decode(uint64(id.Int64))
	if !id.Valid || err != nil || p.Shard != uint32(n.db.N) || p.Type != n.typ {
		return fmt.Errorf("shardsql: %s held %v, not an id of a new %s on %s", newIDVar, id, n.typ, n.db.Name)
	}
	n.id = uint64(id.Int64)
	return nil
}

// scanInserted reads the new object's id from the current result set of
// rows, the one the commit's text selects it with.
func (n *inserted) scanInserted(rows *sql.Rows) error {
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return errors.New("shardsql: the commit returned no new id")
	}
	var id sql.NullInt64
	if err := rows.Scan(&id); err != nil {
		return err
	}
	return n.learn(id)
}
