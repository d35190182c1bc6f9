package store

import (
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// A server that created a pin on a board creates the next one from the
// board it remembers, with the board's read in the insert's round trip,
// and refuses a user who does not own the board. When another server has
// changed the board since, the pin is still made from the board as it
// is: secret on a board made secret (and counted so), refused on a board
// deleted.
func TestCreateOnARememberedBoard(t *testing.T) {
	a, m := openTest(t)
	b, err := Open(ctx, Config{Map: m, CursorSecret: []byte("test"), Redis: a.cfg.Redis, ObjectCache: a.cfg.ObjectCache})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ann, bob := mustUser(t, a, "ann"), mustUser(t, a, "bob")
	board := mustBoard(t, a, ann)
	memo := &a.Objects.parents
	create := func(actor uint64) (model.Object, error) {
		return a.CreatePin(ctx, model.PinDoc{BoardID: model.ID(board), Link: "https://example.com/g"}, actor)
	}
	first := mustPin(t, a, board)
	if memo.get(board) == nil || memo.kept.Load() != 0 {
		t.Fatalf("after the first pin: remembered %v, kept %d", memo.get(board) != nil, memo.kept.Load())
	}
	second, err := create(ann)
	if err != nil || memo.kept.Load() != 1 || secretOf(t, second) {
		t.Fatalf("the second pin, from the remembered board: %v, kept %d, secret %v", err, memo.kept.Load(), second.Flags.Secret())
	}
	if d, _ := model.DecodeDoc(idcodec.TypePin, second.Doc); uint64(d.(*model.PinDoc).OwnerID) != ann {
		t.Fatalf("the second pin's owner: %s", second.Doc)
	}

	if _, err := create(bob); !model.IsCode(err, model.EForbidden) {
		t.Fatalf("bob pins on ann's board: %v", err)
	}

	// Made secret by the other server: this one remembers it public.
	if _, err := b.Update(ctx, board, idcodec.TypeBoard, 0, withSecret(true)); err != nil {
		t.Fatal(err)
	}
	third, err := create(0)
	if err != nil {
		t.Fatal(err)
	}
	if !secretOf(t, third) || !secretOf(t, mustGet(t, b, third.ID)) {
		t.Fatalf("a pin on a secret board is not secret: %s", third.Doc)
	}
	if memo.undone.Load() != 1 {
		t.Fatalf("the pin from the board remembered public was not undone (%d)", memo.undone.Load())
	}
	if _, pins, _, secretPins := secretCounts(t, a, ann); pins != 3 || secretPins != 3 {
		t.Fatalf("ann's pins: %d, secret %d; want 3 and 3", pins, secretPins)
	}
	if fourth, err := create(0); err != nil || !secretOf(t, fourth) || memo.kept.Load() != 2 {
		t.Fatalf("the next pin, from the board as read last: %v, kept %d", err, memo.kept.Load())
	}

	// Deleted by the other server.
	if err := b.Delete(ctx, board, idcodec.TypeBoard, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := create(0); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("a pin on a deleted board: %v", err)
	}
	if _, pins, _, _ := secretCounts(t, a, ann); pins != 0 {
		t.Fatalf("ann has %d pins after her board's delete and a refused create", pins)
	}
	if _, err := a.Get(ctx, first, idcodec.TypePin); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("a pin of the deleted board: %v", err)
	}
}
