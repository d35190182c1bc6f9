package store

import (
	"slices"
	"sync"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
)

func pinDoc(t *testing.T, s *Store, id uint64) *model.PinDoc {
	t.Helper()
	o, err := s.Get(ctx, id, idcodec.TypePin)
	if err != nil {
		t.Fatal(err)
	}
	d, err := model.DecodeDoc(idcodec.TypePin, o.Doc)
	if err != nil {
		t.Fatal(err)
	}
	return d.(*model.PinDoc)
}

func savesCount(t *testing.T, s *Store, pin uint64) int64 {
	t.Helper()
	o, err := s.Get(ctx, pin, idcodec.TypePin)
	if err != nil {
		t.Fatal(err)
	}
	return o.Counts[slices.Index(model.Counted(idcodec.TypePin), model.PinSaves)]
}

// A save is a new pin of the saver on their board, with the source's
// content and saved_from; it is listed on the board, in the saver's pins,
// in their followers' feeds, and in the source's saves and count. Saving
// again to the same board returns the same pin.
func TestSavePin(t *testing.T) {
	s, _ := openTest(t)
	ann, bob, cat := mustUser(t, s, "ann"), mustUser(t, s, "bob"), mustUser(t, s, "cat")
	src, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(mustBoard(t, s, ann)), Link: "https://example.com/a", Description: "orig", Data: []byte(`{"k":1}`)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddMapping(ctx, model.UserFollowing, cat, bob); err != nil {
		t.Fatal(err)
	}
	board := mustBoard(t, s, bob)
	saved, created, err := s.SavePin(ctx, src.ID, board, bob)
	if err != nil || !created {
		t.Fatalf("save: %v created=%v", err, created)
	}
	d := pinDoc(t, s, saved.ID)
	if uint64(d.OwnerID) != bob || uint64(d.BoardID) != board || uint64(d.SavedFrom) != src.ID || d.Link != "https://example.com/a" || d.Description != "orig" || string(d.Data) != `{"k":1}` {
		t.Fatalf("saved doc %+v", d)
	}
	if idcodec.ShardOf(saved.ID) != idcodec.ShardOf(board) {
		t.Fatal("the saved pin is not on its board's shard")
	}
	again, created, err := s.SavePin(ctx, src.ID, board, 0)
	if err != nil || created || again.ID != saved.ID {
		t.Fatalf("second save: %v created=%v id %d want %d", err, created, again.ID, saved.ID)
	}
	waitFeed(t, s)
	if got := all(t, s, model.BoardPins, board, 10, true); !slices.Equal(got, []uint64{saved.ID}) {
		t.Fatalf("board pins %v", got)
	}
	if got := all(t, s, model.UserPins, bob, 10, true); !slices.Equal(got, []uint64{saved.ID}) {
		t.Fatalf("bob's pins %v", got)
	}
	if got := feedAll(t, s, cat, 10); !slices.Equal(got, []uint64{saved.ID}) {
		t.Fatalf("follower's feed %v", got)
	}
	if got := all(t, s, model.PinSaves, src.ID, 10, true); !slices.Equal(got, []uint64{saved.ID}) {
		t.Fatalf("source's saves %v", got)
	}
	if n := savesCount(t, s, src.ID); n != 1 {
		t.Fatalf("saves count %d", n)
	}
	// Another user may not save to bob's board.
	if _, _, err := s.SavePin(ctx, src.ID, board, ann); !model.IsCode(err, model.EForbidden) {
		t.Fatalf("save to another's board: %v", err)
	}
	// Nor can the pair be written as a mapping.
	if err := s.AddMapping(ctx, model.PinSaves, src.ID, saved.ID); !model.IsCode(err, model.EInvalid) {
		t.Fatalf("AddMapping of a save: %v", err)
	}
	if brokenPairs(t, s) != 0 || marks(t, s) != 0 {
		t.Fatal("a save left a broken pair or a mark")
	}

	// Deleting the saved pin takes it out of the source's saves and count;
	// a new save then makes a new pin.
	if err := s.Delete(ctx, saved.ID, idcodec.TypePin, 0); err != nil {
		t.Fatal(err)
	}
	if n := savesCount(t, s, src.ID); n != 0 || len(all(t, s, model.PinSaves, src.ID, 10, true)) != 0 {
		t.Fatalf("after deleting the save: count %d", n)
	}
	next, created, err := s.SavePin(ctx, src.ID, board, bob)
	if err != nil || !created || next.ID == saved.ID {
		t.Fatalf("save after delete: %v created=%v", err, created)
	}
	// Deleting the source leaves the save, with its content and saved_from.
	if err := s.Delete(ctx, src.ID, idcodec.TypePin, 0); err != nil {
		t.Fatal(err)
	}
	d = pinDoc(t, s, next.ID)
	if uint64(d.SavedFrom) != src.ID || d.Description != "orig" {
		t.Fatalf("the save after its source's delete: %+v", d)
	}
	if _, _, err := s.SavePin(ctx, src.ID, mustBoard(t, s, cat), 0); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("save of a deleted pin: %v", err)
	}
	if brokenPairs(t, s) != 0 || marks(t, s) != 0 {
		t.Fatal("the deletes left a broken pair or a mark")
	}
}

// Sixteen concurrent saves of one pin to one board make exactly one pin.
func TestConcurrentSavesMakeOnePin(t *testing.T) {
	s, _ := openTest(t)
	ann, bob := mustUser(t, s, "ann"), mustUser(t, s, "bob")
	src := mustPin(t, s, mustBoard(t, s, ann))
	board := mustBoard(t, s, bob)
	const n = 16
	got := make([]uint64, n)
	made := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			o, c, err := s.SavePin(ctx, src, board, bob)
			got[i], made[i], errs[i] = o.ID, c, err
		})
	}
	wg.Wait()
	created := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("save %d: %v", i, errs[i])
		}
		if got[i] != got[0] {
			t.Fatalf("saves returned different pins: %v", got)
		}
		if made[i] {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d saves say they created the pin", created)
	}
	if pins := all(t, s, model.BoardPins, board, 50, true); len(pins) != 1 {
		t.Fatalf("board holds %d pins", len(pins))
	}
	if c := savesCount(t, s, src); c != 1 {
		t.Fatalf("saves count %d", c)
	}
}

// A save left half-way (saved pin and forward row committed, the
// source's list not written) is finished by the sweep, and repair finds
// and fixes a missing inverse.
func TestSaveHealedAndRepaired(t *testing.T) {
	s, _ := openTest(t)
	ann, bob := mustUser(t, s, "ann"), mustUser(t, s, "bob")
	src := mustPin(t, s, mustBoard(t, s, ann))
	saved, _, err := s.SavePin(ctx, src, mustBoard(t, s, bob), bob)
	if err != nil {
		t.Fatal(err)
	}
	// Take the inverse away, leaving the mark as a dead server would.
	tsh, _, _ := s.route("test", src, idcodec.TypePin)
	p := shardsql.Pair{M: model.PinSavedFrom, From: saved.ID, To: src}
	if err := s.inTx(ctx, "test", tsh, func(tx *shardsql.Tx) error {
		_, err := shardsql.RemoveEdge(ctx, tx, tsh.DB, model.PinSaves, src, saved.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	halfWrite(t, s, p, true)
	if savesCount(t, s, src) != 0 {
		t.Fatal("the inverse is still there")
	}
	if _, err := s.HealPairs(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if savesCount(t, s, src) != 1 || marks(t, s) != 0 {
		t.Fatal("the sweep did not settle the save")
	}
	// Without a mark, only repair finds it.
	if err := s.inTx(ctx, "test", tsh, func(tx *shardsql.Tx) error {
		_, err := shardsql.RemoveEdge(ctx, tx, tsh.DB, model.PinSaves, src, saved.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if brokenPairs(t, s) != 1 {
		t.Fatal("repair does not see the missing inverse")
	}
	if _, err := s.Repair(ctx, false, nil); err != nil {
		t.Fatal(err)
	}
	if savesCount(t, s, src) != 1 || brokenPairs(t, s) != 0 {
		t.Fatal("repair did not restore the save's inverse")
	}
}
