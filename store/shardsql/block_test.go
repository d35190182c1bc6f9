package shardsql_test

import (
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
)

// Several queued statements reach the server as one block, which it
// answers once; one goes as it is. A statement of the block that fails
// is still the text's error, with its own number, and nothing of the
// transaction stays.
func TestQueuedStatementsGoAsOneBlock(t *testing.T) {
	pool, db := txDB(t)
	text := func() string { return string((*lastSent.Load())[5:]) } // past the packet's header and command byte

	_, tx, _ := begin(t, pool, sql.LevelDefault)
	if err := shardsql.DeleteOutbox(ctx, tx, db, []uint64{1}, false); err != nil { // queued after the START
		t.Fatal(err)
	}
	if err := shardsql.DeleteOutbox(ctx, tx, db, []uint64{2}, true); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+db.Name+".user_feed").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if q := text(); !strings.Contains(q, "BEGIN NOT ATOMIC START TRANSACTION; DELETE") || !strings.Contains(q, "; END; SELECT COUNT(*)") {
		t.Fatalf("the queued statements did not go as one block before the read: %q", q)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if q := text(); strings.Contains(q, "BEGIN NOT ATOMIC") {
		t.Fatalf("a COMMIT alone went in a block: %q", q)
	}

	_, tx2, _ := begin(t, pool, sql.LevelDefault)
	row := "INSERT INTO " + db.Name + ".user_feed (from_id, to_id, sequence, author_id) VALUES (7, 10, 1, 7)"
	if _, err := tx2.ExecContext(ctx, row); err != nil { // with the START, which is one statement: no block
		t.Fatal(err)
	}
	if q := text(); strings.Contains(q, "BEGIN NOT ATOMIC") {
		t.Fatalf("one queued statement went in a block: %q", q)
	}
	if err := shardsql.DeleteOutbox(ctx, tx2, db, []uint64{3}, false); err != nil {
		t.Fatal(err)
	}
	err := tx2.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if q := text(); !strings.HasPrefix(q, "BEGIN NOT ATOMIC DELETE") || !strings.HasSuffix(q, "COMMIT; END") {
		t.Fatalf("the commit's statements did not go as one block: %q", q)
	}
	if got := feedRows(t, pool, db, 7); got != 1 {
		t.Fatalf("%d rows after the block's commit, want 1", got)
	}

	// The same list row twice, queued: the second insert fails inside the
	// block as a duplicate, and nothing of the transaction stays.
	_, tx3, _ := begin(t, pool, sql.LevelDefault)
	lists := []shardsql.ListRef{{M: model.BoardPins, From: 9}}
	for range 2 {
		if err := shardsql.AddEdges(ctx, tx3, db, shardsql.RefTo(55), 1, lists, nil); err != nil {
			t.Fatal(err)
		}
	}
	err = tx3.Commit(ctx)
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1062 {
		t.Fatalf("a duplicate inside the block: %v, want error 1062", err)
	}
	if q := text(); !strings.HasPrefix(q, "BEGIN NOT ATOMIC START TRANSACTION;") {
		t.Fatalf("the failing transaction did not go as one block: %q", q)
	}
	tx3.Rollback()
	var rows int
	if err := pool.GetContext(ctx, &rows, "SELECT COUNT(*) FROM "+db.Name+".board_pins WHERE from_id = 9"); err != nil {
		t.Fatal(err)
	}
	if rows != 0 || countRow(t, pool, db, 9, uint8(model.BoardPins)) != 0 {
		t.Fatalf("the failed block's transaction left %d rows", rows)
	}
}
