package store

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

func mustSection(t *testing.T, s *Store, board uint64, name string) uint64 {
	t.Helper()
	o, err := s.Create(ctx, idcodec.TypeSection, &model.SectionDoc{BoardID: model.ID(board), Name: name}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return o.ID
}

func sectionOf(t *testing.T, s *Store, pin uint64) uint64 {
	t.Helper()
	var d model.PinDoc
	if err := json.Unmarshal(mustGet(t, s, pin).Doc, &d); err != nil {
		t.Fatal(err)
	}
	return uint64(d.SectionID)
}

// A board's sections are in its owner's order (a new one last, a move
// reorders); a pin is in at most one section of its board, moves between
// them in one transaction, and every list's count follows.
func TestSectionsOrderPinsAndCounts(t *testing.T) {
	s, _ := openTest(t)
	ann := mustUser(t, s, "ann")
	board, other := mustBoard(t, s, ann), mustBoard(t, s, ann)
	a, b, c := mustSection(t, s, board, "a"), mustSection(t, s, board, "b"), mustSection(t, s, board, "c")
	if got := all(t, s, model.BoardSections, board, 2, true); !slices.Equal(got, []uint64{a, b, c}) {
		t.Fatalf("sections %v, want %v (creation order, a new one last)", got, []uint64{a, b, c})
	}
	if err := s.Move(ctx, model.BoardSections, board, c, a, 0); err != nil { // c before a
		t.Fatal(err)
	}
	if got := all(t, s, model.BoardSections, board, 10, true); !slices.Equal(got, []uint64{c, a, b}) {
		t.Fatalf("after moving c first: %v", got)
	}
	d := mustSection(t, s, board, "d")
	if got := all(t, s, model.BoardSections, board, 10, true); !slices.Equal(got, []uint64{c, a, b, d}) {
		t.Fatalf("a section made after a move: %v, want it last", got)
	}
	if n := count(t, s, model.BoardSections, board); n != 4 {
		t.Fatalf("board_sections count %d", n)
	}
	if bo, err := s.Get(ctx, board, idcodec.TypeBoard); err != nil || !slices.Equal(bo.Counts, []int64{0, 4}) {
		t.Fatalf("board counts %v (%v), want pins 0, sections 4", bo.Counts, err)
	}
	if _, err := s.List(ctx, model.BoardSections, board, model.Page{Since: mustGet(t, s, mustPin(t, s, other)).CreatedAt}); !model.IsCode(err, model.EInvalid) {
		t.Fatalf("a time range over sections: %v", err)
	}

	// A pin made in a section, moved to another, out of any, and back.
	p, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(board), SectionID: model.ID(a)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	q := mustPin(t, s, board)
	if sectionOf(t, s, p.ID) != a || count(t, s, model.SectionPins, a) != 1 {
		t.Fatalf("pin made in a: section %d, a has %d", sectionOf(t, s, p.ID), count(t, s, model.SectionPins, a))
	}
	move := func(pin, to uint64) model.Object {
		t.Helper()
		o, err := s.SetPinSection(ctx, pin, to)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	o := move(p.ID, b)
	if o.Version != 2 || sectionOf(t, s, p.ID) != b || count(t, s, model.SectionPins, a) != 0 || count(t, s, model.SectionPins, b) != 1 {
		t.Fatalf("moved to b: version %d, a %d, b %d", o.Version, count(t, s, model.SectionPins, a), count(t, s, model.SectionPins, b))
	}
	if again := move(p.ID, b); again.Version != 2 {
		t.Fatalf("moving a pin where it is raised its version to %d", again.Version)
	}
	move(q, b)
	if got := all(t, s, model.SectionPins, b, 1, true); !slices.Equal(got, []uint64{q, p.ID}) {
		t.Fatalf("b's pins %v, want newest first", got)
	}
	if sec, err := s.Get(ctx, b, idcodec.TypeSection); err != nil || !slices.Equal(sec.Counts, []int64{2}) {
		t.Fatalf("section b counts %v (%v)", sec.Counts, err)
	}
	move(p.ID, 0)
	if sectionOf(t, s, p.ID) != 0 || count(t, s, model.SectionPins, b) != 1 {
		t.Fatalf("moved out: section %d, b has %d", sectionOf(t, s, p.ID), count(t, s, model.SectionPins, b))
	}
	if n := count(t, s, model.BoardPins, board); n != 2 {
		t.Fatalf("the board holds %d pins, want 2 whatever their sections", n)
	}

	// Bad moves change nothing.
	foreign := mustSection(t, s, other, "x")
	for name, to := range map[string]uint64{"another board's section": foreign, "a pin id": q, "a missing section": idcodec.MustEncode(idcodec.ShardOf(a), idcodec.TypeSection, idcodec.LocalOf(a)+1000)} {
		_, err := s.SetPinSection(ctx, p.ID, to)
		if !model.IsCode(err, model.EInvalid) && !model.IsCode(err, model.ENotFound) {
			t.Fatalf("%s: %v", name, err)
		}
		if sectionOf(t, s, p.ID) != 0 || mustGet(t, s, p.ID).Version != 3 {
			t.Fatalf("%s changed the pin", name)
		}
	}
	if _, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(board), SectionID: model.ID(foreign)}, 0); !model.IsCode(err, model.EInvalid) {
		t.Fatalf("a pin made in another board's section: %v", err)
	}
	if n := count(t, s, model.BoardPins, board); n != 2 {
		t.Fatalf("a refused pin was listed: %d", n)
	}
	if _, err := s.Create(ctx, idcodec.TypeSection, &model.SectionDoc{BoardID: model.ID(board), Name: string(make([]byte, model.MaxName+1))}, 0); !model.IsCode(err, model.EInvalid) {
		t.Fatalf("a section name too long: %v", err)
	}
	if _, err := s.Create(ctx, idcodec.TypeSection, &model.SectionDoc{BoardID: model.ID(board)}, ann+1); !model.IsCode(err, model.EForbidden) && !model.IsCode(err, model.EInvalid) {
		t.Fatalf("a section without a name, or by another user: %v", err)
	}
	if n := count(t, s, model.BoardSections, board); n != 4 {
		t.Fatalf("refused sections were listed: %d", n)
	}

	// Deleting a pin takes it out of its section.
	if err := s.Delete(ctx, q, idcodec.TypePin, 0); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, model.SectionPins, b); n != 0 {
		t.Fatalf("a deleted pin is still in its section: %d", n)
	}
}

// Deleting a section keeps its pins on the board, in no section; deleting
// a board deletes its sections.
func TestSectionDeleteKeepsPinsBoardDeleteCascades(t *testing.T) {
	s, _ := openTest(t)
	ann := mustUser(t, s, "ann")
	board := mustBoard(t, s, ann)
	a, b := mustSection(t, s, board, "a"), mustSection(t, s, board, "b")
	var pins []uint64
	for range 3 {
		o, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(board), SectionID: model.ID(a)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		pins = append(pins, o.ID)
	}
	if err := s.Delete(ctx, a, idcodec.TypeSection, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, a, idcodec.TypeSection); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("a deleted section: %v", err)
	}
	for _, p := range pins {
		if sectionOf(t, s, p) != 0 {
			t.Fatalf("pin %d still names the deleted section", p)
		}
	}
	if n := count(t, s, model.BoardPins, board); n != 3 {
		t.Fatalf("the board lost its pins: %d", n)
	}
	if got := all(t, s, model.BoardSections, board, 10, true); !slices.Equal(got, []uint64{b}) || count(t, s, model.BoardSections, board) != 1 || count(t, s, model.SectionPins, a) != 0 {
		t.Fatalf("after deleting a: sections %v, count %d, a's pins %d", got, count(t, s, model.BoardSections, board), count(t, s, model.SectionPins, a))
	}
	if _, err := s.SetPinSection(ctx, pins[0], b); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, board, idcodec.TypeBoard, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, b, idcodec.TypeSection); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("a section of a deleted board: %v", err)
	}
	if count(t, s, model.SectionPins, b) != 0 || count(t, s, model.BoardSections, board) != 0 {
		t.Fatal("a deleted board's sections kept their lists")
	}
}

// A section is secret as its board is, from its creation and through
// every change of the board's flag.
func TestSectionsFollowTheirBoardsSecret(t *testing.T) {
	s, _ := openTest(t)
	ann, bob := mustUser(t, s, "ann"), mustUser(t, s, "bob")
	board := mustBoard(t, s, ann)
	a := mustSection(t, s, board, "a")
	flip := func(secret bool) {
		t.Helper()
		_, err := s.Update(ctx, board, idcodec.TypeBoard, 0, withSecret(secret))
		if err != nil {
			t.Fatal(err)
		}
	}
	get := func(id uint64) model.Object {
		t.Helper()
		o, err := s.Get(ctx, id, idcodec.TypeSection)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	flip(true)
	if o := get(a); !secretOf(t, o) || o.Version != 2 {
		t.Fatalf("a section of a board made secret: version %d, %s", o.Version, o.Doc)
	}
	b := mustSection(t, s, board, "b")
	if !secretOf(t, get(b)) {
		t.Fatal("a new section of a secret board is not secret")
	}
	if _, err := s.Create(ctx, idcodec.TypeSection, &model.SectionDoc{BoardID: model.ID(board), Name: "x"}, bob); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("bob adds a section to ann's secret board: %v", err)
	}
	flip(false)
	for _, id := range []uint64{a, b} {
		if secretOf(t, get(id)) {
			t.Fatalf("section %d of a board made public is secret", id)
		}
	}
	if _, err := s.Create(ctx, idcodec.TypeSection, &model.SectionDoc{BoardID: model.ID(board), Name: "x"}, bob); !model.IsCode(err, model.EForbidden) {
		t.Fatalf("bob adds a section to ann's public board: %v", err)
	}
}

// Racing moves of one pin leave it in exactly one section, the one its
// document names; racing creates each take a place of their own.
func TestSectionsUnderRaces(t *testing.T) {
	s, _ := openTest(t)
	ann := mustUser(t, s, "ann")
	board := mustBoard(t, s, ann)
	secs := make([]uint64, 8)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range secs {
		wg.Go(func() {
			o, err := s.Create(ctx, idcodec.TypeSection, &model.SectionDoc{BoardID: model.ID(board), Name: "s"}, 0)
			if err != nil {
				errs <- err
				return
			}
			secs[i] = o.ID
		})
	}
	wg.Wait()
	pin := mustPin(t, s, board)
	for i := range 32 {
		wg.Go(func() {
			to := secs[i%len(secs)]
			if i%5 == 0 {
				to = 0
			}
			if _, err := s.SetPinSection(ctx, pin, to); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	listed := all(t, s, model.BoardSections, board, 3, true)
	if len(listed) != len(secs) || count(t, s, model.BoardSections, board) != int64(len(secs)) {
		t.Fatalf("%d sections listed, count %d, want %d", len(listed), count(t, s, model.BoardSections, board), len(secs))
	}
	var in []uint64
	for _, sec := range secs {
		if n := count(t, s, model.SectionPins, sec); n > 0 {
			in = append(in, sec)
			if got := all(t, s, model.SectionPins, sec, 10, true); n != 1 || !slices.Equal(got, []uint64{pin}) {
				t.Fatalf("section %d holds %v (count %d)", sec, got, n)
			}
		}
	}
	named := sectionOf(t, s, pin)
	if len(in) > 1 || (named == 0) != (len(in) == 0) || (named != 0 && in[0] != named) {
		t.Fatalf("the pin names section %d and is listed in %v", named, in)
	}
}
