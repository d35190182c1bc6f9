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
// pinstore's driver settings on TCP (topology.Dial), whose row locks are
// waited for at most wait seconds, and a second pool to hold them.
func bounded(t *testing.T, wait int) (*sqlx.DB, *sqlx.DB, shardsql.DB) {
	t.Helper()
	other, dbs := shardtest.Shards(t, "sock", 0)
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := topology.Dial(fmt.Sprintf("root@tcp(%s)/?innodb_lock_wait_timeout=%d", cfg.Addr, wait), 2)
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
