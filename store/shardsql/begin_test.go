package shardsql_test

import (
	"context"
	"database/sql"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/shardsql/shardtest"
	"github.com/pinstore/pinstore/store/topology"
)

var ctx = context.Background()

// sent counts the writes pinstore's pools make on connections dialled
// through the "counted" network: one a round trip, the client sending one
// packet for each text; lastSent is the last of them.
var (
	sent     atomic.Int64
	lastSent atomic.Pointer[[]byte]
)

func init() {
	mysql.RegisterDialContext("counted", func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return countedConn{c}, nil
	})
}

type countedConn struct{ net.Conn }

func (c countedConn) Write(b []byte) (int, error) {
	sent.Add(1)
	b2 := append([]byte(nil), b...)
	lastSent.Store(&b2)
	return c.Conn.Write(b)
}

// txDB provisions one shard database and a pool on its host with
// pinstore's driver settings (topology.Dial) whose writes are counted.
func txDB(t *testing.T) (*sqlx.DB, shardsql.DB) {
	t.Helper()
	_, dbs := shardtest.Shards(t, "tx", 0)
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := topology.Dial("root@counted("+cfg.Addr+")/", 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	return pool, dbs[0]
}

// begin opens a transaction at level on a connection of its own, which
// the test's end closes (after rolling back whatever did not commit); it
// returns the round trips the pool had sent before it.
func begin(t *testing.T, pool *sqlx.DB, level sql.IsolationLevel) (*sqlx.Conn, *shardsql.Tx, int64) {
	t.Helper()
	conn, err := pool.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	before := sent.Load()
	tx, err := shardsql.Begin(conn, level)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tx.Rollback)
	return conn, tx, before
}

func feedRows(t *testing.T, pool *sqlx.DB, db shardsql.DB, follower uint64) int {
	t.Helper()
	var n int
	if err := pool.GetContext(ctx, &n, "SELECT COUNT(*) FROM "+db.Name+".user_feed WHERE from_id = ?", follower); err != nil {
		t.Fatal(err)
	}
	return n
}

// A transaction that reads, writes and commits costs the round trips of
// its statements alone: its START goes with the first and its COMMIT with
// the queued ones. And it is a transaction: what it wrote is seen by no
// other connection before the commit.
func TestTxOpensAndCommitsWithItsStatements(t *testing.T) {
	pool, db := txDB(t)
	conn, tx, before := begin(t, pool, sql.LevelDefault)
	var n int
	if err := tx.QueryRowxContext(ctx, "SELECT COUNT(*) FROM "+db.Name+".user_feed WHERE from_id = ? LOCK IN SHARE MODE", 1).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+db.Name+".user_feed (from_id, to_id, sequence, author_id) VALUES (1, 10, 1, 7)"); err != nil {
		t.Fatal(err)
	}
	if err := shardsql.InsertFeedRows(ctx, tx, db, nil); err != nil { // nothing to queue
		t.Fatal(err)
	}
	if err := shardsql.DeleteOutbox(ctx, tx, db, []uint64{99}, false); err != nil { // queued
		t.Fatal(err)
	}
	own := sent.Load() - before
	if got := feedRows(t, pool, db, 1); got != 0 { // on another connection
		t.Fatalf("another connection sees %d rows before the commit: the statements ran outside a transaction", got)
	}
	mid := sent.Load()
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	own += sent.Load() - mid
	if got := feedRows(t, pool, db, 1); got != 1 {
		t.Fatalf("%d rows after the commit, want 1", got)
	}
	if own != 3 {
		t.Fatalf("the transaction took %d round trips, want 3 (read, insert, queued delete with the commit)", own)
	}
	var open int
	if err := conn.GetContext(ctx, &open, "SELECT @@in_transaction"); err != nil {
		t.Fatal(err)
	}
	if open != 0 {
		t.Fatal("the connection still holds a transaction after the commit")
	}
}

// A transaction that never sent a statement commits without a round trip.
func TestTxWithoutStatementsSendsNothing(t *testing.T) {
	pool, _ := txDB(t)
	if err := pool.PingContext(ctx); err != nil { // a connection, dialled and idle
		t.Fatal(err)
	}
	before := sent.Load()
	tx, err := shardsql.BeginOn(ctx, pool, sql.LevelReadCommitted)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sent.Load() - before; got != 0 {
		t.Fatalf("an empty transaction took %d round trips", got)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("a second commit was taken")
	}
}

// A transaction that did not commit is rolled back by Rollback, and its
// connection is left with no transaction open for whoever takes it next.
func TestTxRollbackLeavesNoTransactionOpen(t *testing.T) {
	pool, db := txDB(t)
	conn, tx, _ := begin(t, pool, sql.LevelDefault)
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+db.Name+".user_feed (from_id, to_id, sequence, author_id) VALUES (2, 10, 1, 7)"); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	var open int
	if err := conn.GetContext(ctx, &open, "SELECT @@in_transaction"); err != nil {
		t.Fatal(err)
	}
	if open != 0 {
		t.Fatal("the connection holds a transaction after Rollback")
	}
	if got := feedRows(t, pool, db, 2); got != 0 {
		t.Fatalf("%d rows after the rollback, want 0", got)
	}
	if _, err := tx.ExecContext(ctx, "SELECT 1"); err == nil {
		t.Fatal("a statement was taken after Rollback")
	}
	var one int
	if err := tx.QueryRowxContext(ctx, "SELECT 1").Scan(&one); err == nil {
		t.Fatal("a row was read after Rollback, outside any transaction")
	}
}

// When a statement of the commit's text fails, nothing of the transaction
// is committed: the statements before it in the text ran, the COMMIT after
// it did not, and Rollback undoes them.
func TestTxFailedCommitTextCommitsNothing(t *testing.T) {
	pool, db := txDB(t)
	tx, err := shardsql.BeginOn(ctx, pool, sql.LevelDefault)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+db.Name+".user_feed (from_id, to_id, sequence, author_id) VALUES (3, 10, 1, 7)"); err != nil {
		t.Fatal(err)
	}
	missing := shardsql.DB{N: db.N, Name: db.Name + "_missing"}
	if err := shardsql.DeleteOutbox(ctx, tx, missing, []uint64{1}, false); err != nil {
		t.Fatal(err)
	}
	err = tx.Commit(ctx)
	if err == nil || !strings.Contains(err.Error(), "_missing") {
		t.Fatalf("the commit of a failing text returned %v", err)
	}
	tx.Rollback()
	if got := feedRows(t, pool, db, 3); got != 0 {
		t.Fatalf("%d rows after a failed commit, want 0", got)
	}
}

// The isolation level asked for is the transaction's: at READ COMMITTED a
// second read sees what another connection committed after the first, at
// REPEATABLE READ it does not.
func TestTxIsolationLevel(t *testing.T) {
	pool, db := txDB(t)
	for i, c := range []struct {
		iso       sql.IsolationLevel
		seesOther bool
	}{{sql.LevelReadCommitted, true}, {sql.LevelRepeatableRead, false}} {
		follower := uint64(10 + i)
		func() {
			tx, err := shardsql.BeginOn(ctx, pool, c.iso)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			count := func() int {
				var n int
				if err := tx.QueryRowxContext(ctx, "SELECT COUNT(*) FROM "+db.Name+".user_feed WHERE from_id = ?", follower).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			first := count()
			if _, err := pool.ExecContext(ctx, "INSERT INTO "+db.Name+".user_feed (from_id, to_id, sequence, author_id) VALUES (?, 10, 1, 7)", follower); err != nil {
				t.Fatal(err)
			}
			if sees := count() > first; sees != c.seesOther {
				t.Fatalf("at %v the second read sees another connection's commit: %v, want %v", c.iso, sees, c.seesOther)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}()
	}
	if _, err := shardsql.BeginOn(ctx, pool, sql.LevelSerializable); err == nil {
		t.Fatal("an isolation level Begin does not set was taken")
	}
}

// CommitReading commits and reads what the session then knows in the same
// round trip: the read runs after the COMMIT.
func TestTxCommitReading(t *testing.T) {
	pool, db := txDB(t)
	if err := pool.PingContext(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err := shardsql.BeginOn(ctx, pool, sql.LevelDefault)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := shardsql.DeleteOutbox(ctx, tx, db, []uint64{5}, false); err != nil { // queued
		t.Fatal(err)
	}
	before := sent.Load()
	open := -1
	if err := tx.CommitReading(ctx, "SELECT @@in_transaction", &open); err != nil {
		t.Fatal(err)
	}
	if got := sent.Load() - before; got != 1 {
		t.Fatalf("the commit and its read took %d round trips, want 1", got)
	}
	if open != 0 {
		t.Fatalf("@@in_transaction read with the commit = %d: the read ran before the COMMIT", open)
	}

	// A statement of the text that fails: no commit, an error, nothing read.
	tx2, err := shardsql.BeginOn(ctx, pool, sql.LevelDefault)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback()
	if _, err := tx2.ExecContext(ctx, "INSERT INTO "+db.Name+".user_feed (from_id, to_id, sequence, author_id) VALUES (5, 10, 1, 7)"); err != nil {
		t.Fatal(err)
	}
	if err := shardsql.DeleteOutbox(ctx, tx2, shardsql.DB{N: db.N, Name: db.Name + "_missing"}, []uint64{1}, false); err != nil {
		t.Fatal(err)
	}
	open = -1
	if err := tx2.CommitReading(ctx, "SELECT @@in_transaction", &open); err == nil {
		t.Fatal("the commit of a failing text returned no error")
	}
	tx2.Rollback()
	if open != -1 {
		t.Fatalf("a failed commit read %d", open)
	}
	if got := feedRows(t, pool, db, 5); got != 0 {
		t.Fatalf("%d rows after a failed commit, want 0", got)
	}
}
