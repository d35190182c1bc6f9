package shardsql_test

import (
	"database/sql"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
)

// A new object's insert, its lists' rows, its outbox row and the COMMIT
// go in one round trip, and the transaction learns the object's id there:
// the id the rows that name the object hold, the one its table gave it.
func TestInsertNewRidesWithTheCommit(t *testing.T) {
	pool, db := txDB(t)
	const board, user = 101, 202
	lists := []shardsql.ListRef{{M: model.BoardPins, From: board}, {M: model.UserPins, From: user}}
	_, tx, before := begin(t, pool, sql.LevelDefault)
	at := shardsql.Now()
	obj, err := shardsql.InsertNew(ctx, tx, db, idcodec.TypePin, []byte(`{"board_id":"1","active":true}`), model.FlagActive, at)
	if err != nil {
		t.Fatal(err)
	}
	if obj.ID != 0 || obj.Version != 1 || !obj.Flags.Active() {
		t.Fatalf("the queued insert's object: %+v, want no ID yet, version 1, active", obj)
	}
	if err := shardsql.AddEdges(ctx, tx, db, shardsql.NewObject, 7, lists, nil); err != nil {
		t.Fatal(err)
	}
	if err := shardsql.InsertOutbox(ctx, tx, db, user, 7, at); err != nil {
		t.Fatal(err)
	}
	if _, err := shardsql.InsertNew(ctx, tx, db, idcodec.TypePin, []byte(`{}`), 0, at); err == nil {
		t.Fatal("a second new object in one transaction was taken")
	}
	if got := sent.Load() - before; got != 0 {
		t.Fatalf("%d round trips before the commit, want 0: the insert and its rows are queued", got)
	}
	if tx.Inserted() != 0 {
		t.Fatal("the id is known before the insert ran")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sent.Load() - before; got != 1 {
		t.Fatalf("the create took %d round trips, want 1 (everything with the COMMIT)", got)
	}
	id := tx.Inserted()
	p, err := idcodec.Decode(id)
	if err != nil || p.Shard != uint32(db.N) || p.Type != idcodec.TypePin {
		t.Fatalf("the commit read id %d (%+v, %v), not a pin of shard %d", id, p, err, db.N)
	}
	var rows int
	if err := pool.GetContext(ctx, &rows, "SELECT COUNT(*) FROM "+db.Name+".pins WHERE local_id = ?", p.Local); err != nil || rows != 1 {
		t.Fatalf("pins holds %d rows of local id %d (%v)", rows, p.Local, err)
	}
	for _, l := range lists {
		var to uint64
		if err := pool.GetContext(ctx, &to, "SELECT to_id FROM "+db.Name+"."+l.M.Table()+" WHERE from_id = ?", l.From); err != nil || to != id {
			t.Fatalf("%s of %d holds %d (%v), want the new pin %d", l.M, l.From, to, err, id)
		}
		if n := countRow(t, pool, db, l.From, uint8(l.M)); n != 1 {
			t.Fatalf("%s of %d counts %d, want 1", l.M, l.From, n)
		}
	}
	var out uint64
	if err := pool.GetContext(ctx, &out, "SELECT pin_id FROM "+db.Name+".feed_outbox WHERE author_id = ?", user); err != nil || out != id {
		t.Fatalf("feed_outbox names pin %d (%v), want %d", out, err, id)
	}

	// Asked before the commit, the id costs a round trip of its own, and
	// is the one the rows then name.
	_, tx2, before := begin(t, pool, sql.LevelDefault)
	if _, err := shardsql.InsertNew(ctx, tx2, db, idcodec.TypePin, []byte(`{"board_id":"1","active":true}`), model.FlagActive, at); err != nil {
		t.Fatal(err)
	}
	early, err := tx2.InsertedID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := sent.Load() - before; got != 1 || early <= id {
		t.Fatalf("InsertedID took %d round trips and gave %d (the first pin %d)", got, early, id)
	}
	if err := shardsql.AddEdges(ctx, tx2, db, shardsql.NewObject, 8, lists[:1], nil); err != nil {
		t.Fatal(err)
	}
	if err := tx2.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if tx2.Inserted() != early {
		t.Fatalf("after the commit the id is %d, read before as %d", tx2.Inserted(), early)
	}
	var n int
	if err := pool.GetContext(ctx, &n, "SELECT COUNT(*) FROM "+db.Name+".board_pins WHERE from_id = ? AND to_id = ?", board, early); err != nil || n != 1 {
		t.Fatalf("board_pins holds %d rows of the second pin (%v)", n, err)
	}

	// A transaction that inserted nothing cannot name a new object: the
	// variable would hold another transaction's id.
	_, tx3, _ := begin(t, pool, sql.LevelDefault)
	if err := shardsql.AddEdges(ctx, tx3, db, shardsql.NewObject, 9, lists, nil); err == nil {
		t.Fatal("AddEdges named a new object in a transaction that inserted none")
	}
	if err := shardsql.InsertOutbox(ctx, tx3, db, user, 9, at); err == nil {
		t.Fatal("InsertOutbox named a new object in a transaction that inserted none")
	}
}

// A local id past the 36 bits an ID carries fails the queued insert's
// transaction in the server, as EShardFull, and leaves nothing.
func TestInsertNewPastTheLastID(t *testing.T) {
	pool, db := txDB(t)
	if _, err := pool.ExecContext(ctx, "ALTER TABLE "+db.Name+".pins AUTO_INCREMENT = ?", idcodec.MaxLocal+1); err != nil {
		t.Fatal(err)
	}
	_, tx, _ := begin(t, pool, sql.LevelDefault)
	if _, err := shardsql.InsertNew(ctx, tx, db, idcodec.TypePin, []byte(`{"board_id":"1","active":true}`), model.FlagActive, shardsql.Now()); err != nil {
		t.Fatal(err)
	}
	if err := shardsql.AddEdges(ctx, tx, db, shardsql.NewObject, 1, []shardsql.ListRef{{M: model.BoardPins, From: 5}}, nil); err != nil {
		t.Fatal(err)
	}
	err := tx.Commit(ctx)
	if !model.IsCode(shardsql.Classify("test", "local", err), model.EShardFull) {
		t.Fatalf("commit past the last local id: %v, want EShardFull", err)
	}
	tx.Rollback()
	var pins, edges int
	if err := pool.GetContext(ctx, &pins, "SELECT COUNT(*) FROM "+db.Name+".pins"); err != nil {
		t.Fatal(err)
	}
	if err := pool.GetContext(ctx, &edges, "SELECT COUNT(*) FROM "+db.Name+".board_pins"); err != nil {
		t.Fatal(err)
	}
	if pins != 0 || edges != 0 || countRow(t, pool, db, 5, uint8(model.BoardPins)) != 0 {
		t.Fatalf("the refused create left %d pins, %d board_pins rows", pins, edges)
	}
}

// A commit that also reads what the session knows (the GTID, for
// replicas) reads the new id first, each from its own result set, in the
// one round trip.
func TestInsertNewCommitReading(t *testing.T) {
	pool, db := txDB(t)
	_, tx, before := begin(t, pool, sql.LevelDefault)
	if _, err := shardsql.InsertNew(ctx, tx, db, idcodec.TypeBoard, []byte(`{"owner_id":"1","name":"b","active":true}`), model.FlagActive, shardsql.Now()); err != nil {
		t.Fatal(err)
	}
	open := -1
	if err := tx.CommitReading(ctx, "SELECT @@in_transaction", &open); err != nil {
		t.Fatal(err)
	}
	if got := sent.Load() - before; got != 1 {
		t.Fatalf("the commit and its reads took %d round trips, want 1", got)
	}
	if open != 0 {
		t.Fatalf("@@in_transaction read with the commit = %d, want 0", open)
	}
	if p, err := idcodec.Decode(tx.Inserted()); err != nil || p.Type != idcodec.TypeBoard || p.Shard != uint32(db.N) || p.Local == 0 {
		t.Fatalf("the commit read id %d (%+v, %v), not a board of shard %d", tx.Inserted(), p, err, db.N)
	}
}
