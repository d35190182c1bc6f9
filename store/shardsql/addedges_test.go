package shardsql_test

import (
	"database/sql"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
)

// countRow reads mapping_counts' n for (from, key); 0 when absent.
func countRow(t *testing.T, pool *sqlx.DB, db shardsql.DB, from uint64, key uint8) int64 {
	t.Helper()
	var n int64
	err := pool.GetContext(ctx, &n, "SELECT n FROM "+db.Name+".mapping_counts WHERE from_id = ? AND mapping = ?", from, key)
	if err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	return n
}

// addEdges runs AddEdges for the new object to in a transaction of its
// own and returns the commit's error and the round trips it took.
func addEdges(t *testing.T, pool *sqlx.DB, db shardsql.DB, to uint64, lists, secret []shardsql.ListRef) (int64, error) {
	t.Helper()
	_, tx, before := begin(t, pool, sql.LevelDefault)
	if err := shardsql.AddEdges(ctx, tx, db, shardsql.RefTo(to), 5, lists, secret); err != nil {
		t.Fatal(err)
	}
	err := tx.Commit(ctx)
	return sent.Load() - before, err
}

// A new object joins its lists and is counted in them, and a secret one
// in its owner's count of secret entries too, with every statement riding
// on the commit; an object already on a list fails its transaction, and
// nothing of it stays.
func TestAddEdgesCountsANewObject(t *testing.T) {
	pool, db := txDB(t)
	const board, user, pin1, pin2 = 101, 202, 303, 304
	lists := []shardsql.ListRef{{M: model.BoardPins, From: board}, {M: model.UserPins, From: user}}
	secret := []shardsql.ListRef{{M: model.UserPins, From: user}}

	trips, err := addEdges(t, pool, db, pin1, lists, secret)
	if err != nil {
		t.Fatal(err)
	}
	if trips != 1 {
		t.Errorf("the edges and counts took %d round trips, want 1 (with the COMMIT)", trips)
	}
	if _, err := addEdges(t, pool, db, pin2, lists, nil); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for _, c := range []struct {
			from uint64
			key  uint8
			want int64
		}{
			{board, uint8(model.BoardPins), 2},
			{user, uint8(model.UserPins), 2},
			{user, model.SecretKey(model.UserPins), 1},
			{board, model.SecretKey(model.BoardPins), 0},
		} {
			if got := countRow(t, pool, db, c.from, c.key); got != c.want {
				t.Errorf("%s: count of %d under key %d is %d, want %d", when, c.from, c.key, got, c.want)
			}
		}
		for _, l := range lists {
			var rows int
			if err := pool.GetContext(ctx, &rows, "SELECT COUNT(*) FROM "+db.Name+"."+l.M.Table()+" WHERE from_id = ?", l.From); err != nil {
				t.Fatal(err)
			}
			if rows != 2 {
				t.Errorf("%s: %s of %d holds %d rows, want 2", when, l.M, l.From, rows)
			}
		}
	}
	check("two new pins")

	// pin1 again on the board's list (and a new list): refused whole.
	again := []shardsql.ListRef{{M: model.UserPins, From: 909}, {M: model.BoardPins, From: board}}
	if _, err := addEdges(t, pool, db, pin1, again, nil); err == nil {
		t.Fatal("adding an object to a list it is on committed")
	}
	check("after the refused add")
	if got := countRow(t, pool, db, 909, uint8(model.UserPins)); got != 0 {
		t.Errorf("the refused transaction left a count of %d", got)
	}
}
