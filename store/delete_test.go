package store

import (
	"slices"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// listRows is every row of from's list m, live objects or not, as the
// database holds them.
func listRows(t *testing.T, s *Store, m model.Mapping, from uint64) []uint64 {
	t.Helper()
	l, err := s.listRaw(ctx, "test", m, from, 500)
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, e := range l {
		out = append(out, e.To)
	}
	return out
}

// TestDeleteLeavesEveryDeclaredList deletes a comment, a pin in a section
// of a secret board, a section, a board and a user, and checks against
// each type's declaration (model.ObjectType) that no row of a list it
// names is left: every Member list lost the object (and its count, and
// its owner's count of secret entries), every Cascade's objects are gone
// with their rows, and every Drain is empty.
func TestDeleteLeavesEveryDeclaredList(t *testing.T) {
	s, _ := openTest(t)
	ann, bob := mustUser(t, s, "ann"), mustUser(t, s, "bob")
	bo, err := s.Create(ctx, idcodec.TypeBoard, &model.BoardDoc{OwnerID: model.ID(ann), Name: "b", Secret: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	board := bo.ID
	section, other := mustSection(t, s, board, "s"), mustSection(t, s, board, "t")
	var pins []uint64
	for range 2 {
		o, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(board), SectionID: model.ID(section)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		pins = append(pins, o.ID)
	}
	c, err := s.Create(ctx, idcodec.TypeComment, &model.CommentDoc{PinID: model.ID(pins[0]), AuthorID: model.ID(ann), Text: "hi"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddMapping(ctx, model.UserFollowing, bob, ann); err != nil {
		t.Fatal(err)
	}
	if err := s.AddMapping(ctx, model.UserLikes, ann, pins[0]); err != nil {
		t.Fatal(err)
	}
	gone := func(typ idcodec.Type, id uint64) {
		t.Helper()
		o, err := s.Get(ctx, id, typ)
		if err != nil {
			t.Fatalf("%s %d before its delete: %v", typ, id, err)
		}
		doc, err := model.DecodeDoc(typ, o.Doc)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, id, typ, 0); err != nil {
			t.Fatalf("delete %s %d: %v", typ, id, err)
		}
		decl, _ := model.TypeOf(typ)
		for _, mb := range decl.Members {
			from := uint64(mb.Of(doc))
			if from != 0 && slices.Contains(listRows(t, s, mb.List, from), id) {
				t.Errorf("deleted %s %d is still a row of %s of %d", typ, id, mb.List, from)
			}
		}
		for _, m := range append(slices.Clone(decl.Cascades), decl.Drains...) {
			if r := listRows(t, s, m, id); len(r) != 0 {
				t.Errorf("deleted %s %d: %s still has rows %v", typ, id, m, r)
			}
		}
	}
	gone(idcodec.TypeComment, c.ID)
	if n := count(t, s, model.PinComments, pins[0]); n != 0 {
		t.Fatalf("the pin counts %d comments after its one was deleted", n)
	}
	secretPins := func() int64 {
		l, err := s.List(ctx, model.UserPins, ann, model.Page{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		return l.Secret
	}
	if n := secretPins(); n != 2 {
		t.Fatalf("ann's secret pins %d, want 2", n)
	}
	gone(idcodec.TypePin, pins[0])
	if count(t, s, model.SectionPins, section) != 1 || count(t, s, model.UserPins, ann) != 1 || secretPins() != 1 {
		t.Fatalf("after a pin's delete: its section counts %d, ann's pins %d (%d secret), want 1, 1, 1",
			count(t, s, model.SectionPins, section), count(t, s, model.UserPins, ann), secretPins())
	}
	if r := listRows(t, s, model.UserLikes, ann); len(r) != 0 {
		t.Fatalf("ann still likes %v", r)
	}
	gone(idcodec.TypeSection, section)
	if sectionOf(t, s, pins[1]) != 0 || count(t, s, model.BoardPins, board) != 1 {
		t.Fatal("a section's delete took its pin off the board or left it naming the section")
	}
	gone(idcodec.TypeBoard, board)
	for _, id := range []uint64{pins[1], other} {
		if _, err := s.Get(ctx, id, idcodec.TypeOf(id)); !model.IsCode(err, model.ENotFound) {
			t.Fatalf("%d of a deleted board: %v", id, err)
		}
	}
	if count(t, s, model.UserPins, ann) != 0 || secretPins() != 0 || len(listRows(t, s, model.UserPins, ann)) != 0 {
		t.Fatal("a board's delete left its pins on their owner's list")
	}
	mustBoard(t, s, ann)
	gone(idcodec.TypeUser, ann)
	if r := listRows(t, s, model.UserFollowing, bob); len(r) != 0 {
		t.Fatalf("bob still follows %v", r)
	}
}
