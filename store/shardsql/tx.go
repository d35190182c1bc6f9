package shardsql

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// Tx is a transaction on one shard database that remembers the objects
// its statements changed (an object's row, or the count of one of its
// lists; both live on the object's shard), so that cached copies of them
// can be dropped once it commits (Touched).
//
// It does so by construction: every statement of this package that
// changes an existing object's row or a count takes a *Tx (never a pool,
// where nothing would remember it) and runs through Tx.change, which
// records the objects it names with the statement itself; no helper
// records them apart, so none can forget (TestObjectWritesGoThroughChange
// checks the package for any other write to those tables). Statements on
// other tables run on the embedded *sqlx.Tx as usual. It also holds the
// statements queued to go with its next one (later.go); those that change
// an object go through Tx.changeLater, which records them the same way.
type Tx struct {
	*sqlx.Tx
	touched    []uint64
	queued     strings.Builder
	queuedArgs []any
}

// NewTx wraps tx.
func NewTx(tx *sqlx.Tx) *Tx { return &Tx{Tx: tx} }

// Touched lists the objects the transaction changed, in first-change order.
func (t *Tx) Touched() []uint64 { return t.touched }

// change runs query, a statement that changes the objects ids (their rows
// or their lists' counts), and records them as changed. It records them
// before the statement runs: a statement that fails leaves the transaction
// to roll back, and a spare invalidation costs a cache miss, never a stale
// read.
func (t *Tx) change(ctx context.Context, ids []uint64, query string, args ...any) (sql.Result, error) {
	t.record(ids)
	return t.ExecContext(ctx, query, args...)
}

// changeLater is change for a statement whose result nobody reads: it is
// queued to go with the transaction's next statement (later.go).
func (t *Tx) changeLater(ctx context.Context, ids []uint64, query string, args ...any) error {
	t.record(ids)
	return later(ctx, t, query, args...)
}

// record adds ids to the objects the transaction changed.
func (t *Tx) record(ids []uint64) {
	for _, id := range ids {
		if !containsID(t.touched, id) {
			t.touched = append(t.touched, id)
		}
	}
}

func containsID(ids []uint64, id uint64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

const cacheOutboxTable = "cache_outbox"

// MarkCached records in the shard's cache_outbox, in the transaction that
// changed them, that the cached copies of ids must go; token names this
// transaction's rows, so that only its own invalidation clears them (a
// later transaction's rows replace them).
func MarkCached(ctx context.Context, x sqlx.ExecerContext, db DB, ids []uint64, token uint64, at time.Time) error {
	var b strings.Builder
	b.WriteString("INSERT INTO " + db.table(cacheOutboxTable) + " (object_id, token, created_at) VALUES ")
	args := make([]any, 0, 3*len(ids))
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?)")
		args = append(args, id, token, at)
	}
	b.WriteString(" ON DUPLICATE KEY UPDATE token = VALUES(token), created_at = VALUES(created_at)")
	return later(ctx, x, b.String(), args...)
}

// CachedMark is a cache_outbox row: an object whose cached copy must go,
// and the token of the transaction that recorded it.
type CachedMark struct {
	ID    uint64
	Token uint64
}

// UnmarkCached deletes the cache_outbox rows of marks that still hold the
// token given (their invalidation reached the cache).
func UnmarkCached(ctx context.Context, x sqlx.ExecerContext, db DB, marks []CachedMark) error {
	var b strings.Builder
	b.WriteString("DELETE FROM " + db.table(cacheOutboxTable) + " WHERE (object_id, token) IN (")
	args := make([]any, 0, 2*len(marks))
	for i, m := range marks {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?)")
		args = append(args, m.ID, m.Token)
	}
	b.WriteByte(')')
	_, err := x.ExecContext(ctx, b.String(), args...)
	return err
}

// DueCached reads, with one statement, up to n cache_outbox rows per
// database of dbs (all on one host) recorded at or before cutoff.
func DueCached(ctx context.Context, q sqlx.QueryerContext, dbs []DB, cutoff time.Time, n int) (map[DB][]CachedMark, error) {
	query, args := unionPerDBTagged(dbs, "SELECT %d, object_id, token FROM %s WHERE created_at <= ? LIMIT ?", cacheOutboxTable, cutoff, n)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[DB][]CachedMark{}
	for rows.Next() {
		var i int
		var m CachedMark
		if err := rows.Scan(&i, &m.ID, &m.Token); err != nil {
			return nil, err
		}
		if i >= 0 && i < len(dbs) {
			out[dbs[i]] = append(out[dbs[i]], m)
		}
	}
	return out, rows.Err()
}
