package store

import (
	"bytes"
	"slices"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
)

// A transaction whose statements change an object (its row, or the count
// of one of its lists) drops the object's cached copy when it commits,
// with nothing but the statements: no call records the change apart.
func TestObjectStatementsInvalidateByThemselves(t *testing.T) {
	s, _ := openTest(t)
	if !s.objects.on() {
		t.Fatal("the object cache is off")
	}
	ann := mustUser(t, s, "ann")
	board := mustBoard(t, s, ann)
	pin := mustPin(t, s, board)
	hits := s.objects.cache.Stats().Hits.Load()
	for range 2 { // the second read is the cached copy
		mustGet(t, s, pin)
		if _, err := s.Get(ctx, board, idcodec.TypeBoard); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.objects.cache.Stats().Hits.Load() - hits; got != 2 {
		t.Fatalf("%d cache hits, want 2: the objects are not cached", got)
	}
	sh, local, err := s.route("test", pin, idcodec.TypePin)
	if err != nil {
		t.Fatal(err)
	}
	other := mustPin(t, s, mustBoard(t, s, ann))
	var changed []uint64
	err = s.inTx(ctx, "test", sh, func(tx *shardsql.Tx) error {
		r, err := shardsql.ReadObject(ctx, tx, sh.DB, idcodec.TypePin, local, shardsql.ForUpdate)
		if err != nil {
			return err
		}
		doc := bytes.Replace(r.Doc, []byte(`"active":true`), []byte(`"description":"changed","active":true`), 1)
		if err := shardsql.UpdateObject(ctx, tx, sh.DB, idcodec.TypePin, local, doc, shardsql.Now()); err != nil {
			return err
		}
		if _, err := shardsql.AddEdge(ctx, tx, sh.DB, model.BoardPins, board, other, 1); err != nil {
			return err
		}
		changed = tx.Touched()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(changed) != 2 || changed[0] != pin || changed[1] != board {
		t.Fatalf("the transaction recorded %v, want [%d %d]", changed, pin, board)
	}
	if o := mustGet(t, s, pin); o.Version != 2 || !bytes.Contains(o.Doc, []byte(`"changed"`)) {
		t.Fatalf("after the update: version %d, %s", o.Version, o.Doc)
	}
	b, err := s.Get(ctx, board, idcodec.TypeBoard)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.Index(model.Counted(idcodec.TypeBoard), model.BoardPins); i < 0 || b.Counts[i] != 2 {
		t.Fatalf("the board's counts after the add: %v, want %d pins", b.Counts, 2)
	}
}
