package shardsql

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// Tx is a transaction on one shard database that remembers the objects
// its statements changed (an object's row, or the count of one of its
// lists; both live on the object's shard), so that cached copies of them
// can be dropped once it commits (Touched), and the object it inserted
// (InsertNew, inserted.go) with, for a pin, its owner, for the owner cache
// (CacheOwner).
//
// It does so by construction: every statement of this package that
// changes an existing object's row or a count takes a *Tx (never a pool,
// where nothing would remember it) and runs through Tx.change, which
// records the objects it names with the statement itself; no helper
// records them apart, so none can forget (TestObjectWritesGoThroughChange
// checks the package for any other write to those tables). It also holds
// the statements queued to go with its next one (later.go); those that
// change an object go through Tx.changeLater, which records them the same
// way.
//
// A Tx runs on one connection of its own and costs no round trip of its
// own to open or to close: its START TRANSACTION goes with its first
// statement and its COMMIT with its last (begin.go).
type Tx struct {
	conn      *sqlx.Conn
	closeConn bool    // conn is BeginOn's, given back by Rollback
	sock      *socket // conn's socket, while it holds the transaction's deadline (Bound)
	// stopInterrupt unregisters the interrupt Bound set on its context.
	stopInterrupt func() bool
	deadline      time.Time // the deadline Bound set on sock; zero for none
	state         txState
	beginLen      int // the length of the queued START TRANSACTION text
	touched       []uint64
	queued        strings.Builder
	queuedArgs    []any
	marks         *cacheMarks // nil: no object cache to keep
	inserted      *inserted   // the object InsertNew queued; nil for none
	trace         *txTrace    // what its round trips' spans carry (trace.go); nil: none
}

// cacheMarks is where a Tx records, in the shard's cache_outbox, the
// objects its statements change: the shard, the transaction's token, and
// how many of Tx.touched are marked so far.
type cacheMarks struct {
	db       DB
	token    uint64
	marked   int
	perWrite bool // db's cache_outbox is keyed by object and token (migrations.CacheOutboxPerWrite)
}

// MarkCached makes t record in db's cache_outbox, in t itself, that the
// cached copies of the objects its statements change must go; token names
// this transaction's rows, which are its own (the table's key is object
// and token), so that only an invalidation sent after its commit clears
// them, and transactions changing one object at once do not wait for
// each other's marks. The rows of every object a statement changed go to
// the server with the COMMIT, before it, in one statement queued after
// the others (later.go): no statement can change an object and leave it
// unmarked, and the marks cost no round trip of their own when other
// statements are queued. perWrite says that db's cache_outbox is keyed by
// object and token (migrations.CacheOutboxPerWrite); on a shard keyed by
// object alone, not migrated yet, the marks are upserts instead, where a
// write's mark of an object replaces an earlier write's.
func (t *Tx) MarkCached(db DB, token uint64, perWrite bool) {
	t.marks = &cacheMarks{db: db, token: token, perWrite: perWrite}
}

// Touched lists the objects the transaction changed, in first-change order.
func (t *Tx) Touched() []uint64 { return t.touched }

// CacheOwner records that the object the transaction inserted
// (InsertNew), a pin, is owned by owner, so that the owner cache learns
// the pair once it commits, in the round trip that drops the cached copies
// of what it changed (Owners).
func (t *Tx) CacheOwner(owner uint64) {
	if t.inserted != nil {
		t.inserted.owner = owner
	}
}

// Owners are the pins the transaction created, with their owners
// (CacheOwner), once it committed; nil when it created none.
func (t *Tx) Owners() map[uint64]uint64 {
	if n := t.inserted; n != nil && n.owner != 0 && n.id != 0 {
		return map[uint64]uint64{n.id: n.owner}
	}
	return nil
}

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

// The statements of cache_outbox.
var (
	insertCacheMarks = declare("INSERT INTO {db}.cache_outbox (object_id, token, created_at) VALUES ")
	deleteCacheMarks = declare("DELETE FROM {db}.cache_outbox WHERE (object_id, token) IN (")
	dueCacheMarks    = declare("SELECT ?, object_id, token FROM {db}.cache_outbox WHERE created_at <= ? LIMIT ?")
)

// queueMarks queues the cache_outbox rows of the objects recorded as
// changed and not marked yet, when t marks them (MarkCached). The rows go
// in ascending id order, the order of the table's key, which is also the
// order in which the batched delete of taken marks (UnmarkCached) locks
// them: a mark and that delete then wait for each other instead of
// deadlocking. They are plain inserts where the table is keyed per write;
// the upsert, which a shard keyed by object alone needs, measured costlier
// (BENCHMARKS.md, "Create-pin").
func (t *Tx) queueMarks() {
	m := t.marks
	if m == nil || m.marked == len(t.touched) {
		return
	}
	ids, at := slices.Sorted(slices.Values(t.touched[m.marked:])), Now()
	m.marked = len(t.touched)
	if t.queued.Len() > 0 {
		t.queued.WriteString("; ")
	}
	t.queued.WriteString(m.db.sql(insertCacheMarks))
	for i, id := range ids {
		if i > 0 {
			t.queued.WriteString(", ")
		}
		t.queued.WriteString("(?, ?, ?)")
		t.queuedArgs = append(t.queuedArgs, id, m.token, at)
	}
	if !m.perWrite {
		t.queued.WriteString(" ON DUPLICATE KEY UPDATE token = VALUES(token), created_at = VALUES(created_at)")
	}
}

// CachedMark is a cache_outbox row: an object whose cached copy must go,
// and the token of the transaction that recorded it.
type CachedMark struct {
	ID    uint64
	Token uint64
}

// UnmarkCached deletes the cache_outbox rows of marks that still hold the
// token given (their invalidation reached the cache), per database of one
// host: one statement a database, each its own transaction as before, all
// sent as one text.
func UnmarkCached(ctx context.Context, x sqlx.ExecerContext, marks map[DB][]CachedMark) error {
	dbs := make([]DB, 0, len(marks))
	for db, m := range marks {
		if len(m) > 0 {
			dbs = append(dbs, db)
		}
	}
	if len(dbs) == 0 {
		return nil
	}
	slices.SortFunc(dbs, func(a, b DB) int { return a.N - b.N })
	var q strings.Builder
	var args []any
	for i, db := range dbs {
		if i > 0 {
			q.WriteString("; ")
		}
		q.WriteString(placeholders(db.sql(deleteCacheMarks), len(marks[db]), "(?, ?)", ")"))
		for _, m := range marks[db] {
			args = append(args, m.ID, m.Token)
		}
	}
	_, err := x.ExecContext(ctx, q.String(), args...)
	return err
}

// DueCached reads, with one statement, up to n cache_outbox rows per
// database of dbs (all on one host) recorded at or before cutoff.
func DueCached(ctx context.Context, q sqlx.QueryerContext, dbs []DB, cutoff time.Time, n int) (map[DB][]CachedMark, error) {
	query, args := unionPerDBTagged(dbs, dueCacheMarks, cutoff, n)
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
