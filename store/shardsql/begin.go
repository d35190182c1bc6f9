package shardsql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// A transaction's START TRANSACTION and COMMIT are statements whose result
// nobody reads but for an error, so they need no round trip of their own
// either: Begin queues the START (after a SET TRANSACTION for another
// isolation level) to go with the transaction's first statement, and
// Commit sends the queued statements and the COMMIT as one text. A create
// that reads one row, inserts (InsertNew) and commits is two round trips,
// not five; a transaction of queued statements alone (a feed fan-out) is one.
//
// database/sql does not know of a transaction opened this way, so the Tx
// keeps its connection to itself until Rollback: a transaction that did
// not commit is rolled back there, and a connection whose ROLLBACK fails
// is closed instead of going back to the pool, so no open transaction
// ever reaches another caller.

// txState is where a Tx's transaction stands on the server.
type txState uint8

const (
	txQueued txState = iota // START TRANSACTION is queued, not sent
	txOpen                  // sent with a statement: the server may hold a transaction
	txDone                  // committed or rolled back: the Tx takes no more statements
)

// rollbackTimeout bounds the ROLLBACK of a transaction that did not commit,
// sent whatever became of the caller's context.
const rollbackTimeout = 5 * time.Second

// errTxDone is the error of a statement sent on a finished Tx.
var errTxDone = errors.New("shardsql: transaction has already been committed or rolled back")

// Begin starts a transaction on conn at isolation level iso
// (sql.LevelDefault: the server's), queued to go with its first
// statement. The Tx owns conn until Rollback, which must be deferred
// before anything else can fail; the caller closes conn after it.
func Begin(conn *sqlx.Conn, iso sql.IsolationLevel) (*Tx, error) {
	t := &Tx{conn: conn}
	switch iso {
	case sql.LevelDefault:
	case sql.LevelReadCommitted:
		t.queued.WriteString("SET TRANSACTION ISOLATION LEVEL READ COMMITTED; ")
	case sql.LevelRepeatableRead:
		t.queued.WriteString("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; ")
	default:
		return nil, errors.New("shardsql: isolation level " + iso.String() + " is not supported")
	}
	t.queued.WriteString("START TRANSACTION")
	t.beginLen = t.queued.Len()
	return t, nil
}

// BeginOn is Begin on a connection of db's pool, which Rollback gives back.
func BeginOn(ctx context.Context, db *sqlx.DB, iso sql.IsolationLevel) (*Tx, error) {
	conn, err := db.Connx(ctx)
	if err != nil {
		return nil, err
	}
	t, err := Begin(conn, iso)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	t.closeConn = true
	t.Bound(ctx)
	return t, nil
}

// Commit sends the queued statements (with the cache_outbox marks) and
// the COMMIT, in one round trip, and reads there the id of the object
// InsertNew inserted if t has not read it yet. A transaction that never
// sent a statement and has none queued commits without one. On an error
// the transaction is not committed, unless the error is of the connection
// itself during the COMMIT or the read of the new id after it (then, as
// with any commit, whether it did is unknown); Rollback undoes the rest.
func (t *Tx) Commit(ctx context.Context) error {
	if t.state == txDone {
		return errTxDone
	}
	t.queueMarks()
	if t.state == txQueued && t.onlyBegin() {
		t.state = txDone
		return nil
	}
	if t.idDue() {
		return t.CommitReading(ctx, "")
	}
	q, a := t.commitText("")
	t.committing()
	sctx, span := t.roundTrip(ctx, "COMMIT")
	res, err := t.conn.ExecContext(t.run(sctx), q, a...)
	endRoundTrip(span, res, err)
	if err != nil {
		return err
	}
	t.state = txDone
	return nil
}

// committing marks the COMMIT about to be sent: its context's end no
// longer kills the connection (socket.committing).
func (t *Tx) committing() {
	if t.sock != nil {
		t.sock.committing.Store(true)
	}
}

// CommitReading is Commit with query (when not ""), a read of one row,
// sent after the COMMIT in the same text, its columns scanned into dest:
// what the session knows of the transaction just committed (its GTID), a
// read that fails only with its connection. A row that does not scan
// leaves dest as it was; the commit stands.
func (t *Tx) CommitReading(ctx context.Context, query string, dest ...any) error {
	if t.state == txDone {
		return errTxDone
	}
	var tail string
	if t.idDue() {
		tail = "; SELECT " + newIDVar // its own result set, before query's
	}
	if query != "" {
		tail += "; " + query
	}
	q, a := t.commitText(tail)
	t.committing()
	sctx, span := t.roundTrip(ctx, "COMMIT")
	rows, err := t.conn.QueryContext(t.run(sctx), q, a...)
	endRoundTrip(span, nil, err)
	if err != nil {
		return err // the COMMIT or a statement before it failed
	}
	defer rows.Close()
	t.state = txDone
	if t.idDue() {
		if err := t.inserted.scanInserted(rows); err != nil {
			return fmt.Errorf("shardsql: the new id after the commit: %w", err)
		}
		if query == "" || !rows.NextResultSet() {
			return nil
		}
	}
	if rows.Next() {
		_ = rows.Scan(dest...)
	}
	return nil
}

// commitText empties the queue, with the cache_outbox marks, into one
// text ending in the COMMIT and then tail.
func (t *Tx) commitText(tail string) (string, []any) {
	t.queueMarks()
	if t.queued.Len() > 0 {
		t.queued.WriteString("; ")
	}
	t.queued.WriteString("COMMIT")
	return t.take(tail)
}

// Rollback ends a transaction that did not commit, and gives back a
// connection BeginOn took; after Commit it only does the latter. A
// connection whose ROLLBACK fails is closed, not pooled, and so is one
// whose statement Bound's context interrupted.
func (t *Tx) Rollback() {
	if t.unbound() {
		// Interrupted: the server is killing the connection, which rolls
		// the transaction back; it goes back to no pool.
		_ = t.conn.Raw(func(any) error { return driver.ErrBadConn })
	} else if t.state == txOpen {
		ctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
		if _, err := t.conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			_ = t.conn.Raw(func(any) error { return driver.ErrBadConn }) // closes it
		}
		cancel()
	}
	t.state = txDone
	t.queued.Reset()
	t.queuedArgs = nil
	if t.closeConn {
		t.closeConn = false
		_ = t.conn.Close()
	}
}

// onlyBegin reports whether the queue holds the START TRANSACTION alone.
func (t *Tx) onlyBegin() bool {
	return t.queued.Len() == t.beginLen
}
