package shardsql_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/shardsql/shardtest"
	"github.com/pinstore/pinstore/store/topology"
)

// bounded provisions one shard database and a pool on its host with
// pinstore's driver settings on TCP, its round trips measured as a
// server's pools are (topology.DialMetered), whose row locks are waited
// for at most wait seconds, and a second pool to hold them.
func bounded(t *testing.T, wait int) (*sqlx.DB, *sqlx.DB, shardsql.DB) {
	t.Helper()
	other, dbs := shardtest.Shards(t, "sock", 0)
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	m := &shardsql.Meter{}
	shardsql.NewRoundTrips(nil).Name(m, "sock", shardsql.RoleMaster)
	pool, err := topology.DialMetered(fmt.Sprintf("root@tcp(%s)/?innodb_lock_wait_timeout=%d", cfg.Addr, wait), 2, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	return pool, other, dbs[0]
}

// holdRow inserts a user_feed row of from in a transaction of db's that
// stays open until the test ends: its lock is held till then.
func holdRow(t *testing.T, db *sqlx.DB, name string, from uint64) {
	t.Helper()
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+name+".user_feed (from_id, to_id, sequence, author_id) VALUES (?, 10, 1, 7)", from); err != nil {
		t.Fatal(err)
	}
}

// A transaction's deadline holds every statement it sends, whatever
// context the statement carries: one that waits for a lock past it fails
// then, not when the lock wait gives up, and the pool goes on.
func TestTxDeadlineHoldsEveryStatement(t *testing.T) {
	const lockWait = 20 // seconds
	pool, other, db := bounded(t, lockWait)
	holdRow(t, other, db.Name, 3)

	c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	tx, err := shardsql.BeginOn(c, pool, sql.LevelDefault)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// context.Background: the statement's own context has no deadline.
	_, err = tx.ExecContext(context.Background(), "INSERT INTO "+db.Name+".user_feed (from_id, to_id, sequence, author_id) VALUES (3, 10, 1, 7)")
	took := time.Since(start)
	tx.Rollback()
	if err == nil {
		t.Fatal("the insert of a held row succeeded")
	}
	if took > 5*time.Second {
		t.Fatalf("the statement gave up after %v, with its transaction's deadline at 300ms (the lock wait is %ds)", took.Round(time.Millisecond), lockWait)
	}
	var one int
	if err := pool.GetContext(ctx, &one, "SELECT 1"); err != nil || one != 1 {
		t.Fatalf("the pool after the deadline: %d, %v", one, err)
	}
}

// The deadline is the transaction's alone: the connection it ran on goes
// on without it.
func TestTxDeadlineEndsWithTheTransaction(t *testing.T) {
	pool, _, db := bounded(t, 20)
	conn, err := pool.Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	tx, err := shardsql.Begin(conn, sql.LevelDefault)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	tx.Bound(c)
	if _, err := tx.ExecContext(c, "INSERT INTO "+db.Name+".user_feed (from_id, to_id, sequence, author_id) VALUES (4, 10, 1, 7)"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(c); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	time.Sleep(300 * time.Millisecond) // past the deadline
	var n int
	if err := conn.GetContext(ctx, &n, "SELECT COUNT(*) FROM "+db.Name+".user_feed WHERE from_id = 4"); err != nil || n != 1 {
		t.Fatalf("the connection after its transaction's deadline: %d rows, %v", n, err)
	}
}

// running lists the statements on the server that name table and wait or
// run, other than the caller's own.
func running(t *testing.T, db *sqlx.DB, table string) []string {
	t.Helper()
	var infos []string
	if err := db.SelectContext(ctx, &infos, "SELECT INFO FROM information_schema.PROCESSLIST"+
		" WHERE ID <> CONNECTION_ID() AND COMMAND = 'Query' AND INFO LIKE CONCAT('%', ?, '%')", table); err != nil {
		t.Fatal(err)
	}
	return infos
}

// waitRunning waits until a statement naming table runs on the server, or
// fails the test after 5 s.
func waitRunning(t *testing.T, db *sqlx.DB, table string) {
	t.Helper()
	for start := time.Now(); len(running(t, db, table)) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the statement never showed in the process list")
		}
	}
}

// gone reports how long a statement naming table stayed in the process
// list, polled every 20 ms up to limit; limit itself when it did not go.
func gone(t *testing.T, db *sqlx.DB, table string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < limit {
		if len(running(t, db, table)) == 0 {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return limit
}

// A statement whose transaction's deadline passes stops in the server,
// not only in the client: it leaves MariaDB's process list at once rather
// than waiting out its lock wait (20 s), and the lock it queued for is
// free of it.
func TestTxDeadlineStopsTheStatementInTheServer(t *testing.T) {
	pool, other, db := bounded(t, 20)
	holdRow(t, other, db.Name, 5)
	c, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	tx, err := shardsql.BeginOn(c, pool, sql.LevelDefault)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.ExecContext(c, "INSERT INTO "+db.Name+".user_feed (from_id, to_id, sequence, author_id) VALUES (5, 10, 1, 7)")
	tx.Rollback()
	if err == nil {
		t.Fatal("the insert of a held row succeeded")
	}
	if took := gone(t, other, db.Name+".user_feed", 5*time.Second); took > 2*time.Second {
		t.Fatalf("the statement stayed in the server's process list %v after its deadline: %q", took, running(t, other, db.Name+".user_feed"))
	}
	var one int
	if err := pool.GetContext(ctx, &one, "SELECT 1"); err != nil || one != 1 {
		t.Fatalf("the pool after the interrupt: %d, %v", one, err)
	}
}

// A transaction whose context is cancelled (no deadline: its request's
// client left) stops its statement in the server, promptly, and the
// statement fails as cancelled.
func TestTxCancelStopsTheStatementInTheServer(t *testing.T) {
	pool, other, db := bounded(t, 20)
	holdRow(t, other, db.Name, 6)
	c, cancel := context.WithCancel(ctx)
	defer cancel()
	tx, err := shardsql.BeginOn(c, pool, sql.LevelDefault)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := tx.ExecContext(c, "INSERT INTO "+db.Name+".user_feed (from_id, to_id, sequence, author_id) VALUES (6, 10, 1, 7)")
		done <- err
	}()
	waitRunning(t, other, db.Name+".user_feed")
	time.Sleep(200 * time.Millisecond) // still waiting for the lock
	if n := len(running(t, other, db.Name+".user_feed")); n != 1 {
		t.Fatalf("%d statements waiting before the cancel, want 1", n)
	}
	cancel()
	select {
	case err = <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("the statement did not return within 3 s of its context's cancel")
	}
	tx.Rollback()
	if err == nil {
		t.Fatal("the insert of a held row succeeded")
	}
	if took := gone(t, other, db.Name+".user_feed", 5*time.Second); took > 2*time.Second {
		t.Fatalf("the statement stayed in the server's process list %v after its cancel: %q", took, running(t, other, db.Name+".user_feed"))
	}
	var one int
	if err := pool.GetContext(ctx, &one, "SELECT 1"); err != nil || one != 1 {
		t.Fatalf("the pool after the interrupt: %d, %v", one, err)
	}
}

// A transaction that ends before its context does is not interrupted:
// its connection goes back to the pool and serves the next transaction,
// whose context's cancel then stops only that one.
func TestTxEndedIsNotInterrupted(t *testing.T) {
	pool, _, db := bounded(t, 20)
	pool.SetMaxOpenConns(1)
	var before, after int64
	if err := pool.GetContext(ctx, &before, "SELECT CONNECTION_ID()"); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithCancel(ctx)
	tx, err := shardsql.BeginOn(c, pool, sql.LevelDefault)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(c, "INSERT INTO "+db.Name+".user_feed (from_id, to_id, sequence, author_id) VALUES (8, 10, 1, 7)"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(c); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	cancel() // after the transaction: nothing to interrupt
	time.Sleep(100 * time.Millisecond)
	if err := pool.GetContext(ctx, &after, "SELECT CONNECTION_ID()"); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("the connection changed from %d to %d: the cancel after the transaction interrupted it", before, after)
	}
}
