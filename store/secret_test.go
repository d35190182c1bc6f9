package store

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/migrations"
	"github.com/pinstore/pinstore/model"
)

// Making a board secret rewrites the board and every live pin of it in
// one transaction (each pin's version rises, its cached copy goes); new
// pins and saves on a secret board are secret; making it public again
// clears them all.
func TestBoardSecretFlipsItsPins(t *testing.T) {
	s, _ := openTest(t)
	ann, bob := mustUser(t, s, "ann"), mustUser(t, s, "bob")
	board := mustBoard(t, s, ann)
	p1, p2 := mustPin(t, s, board), mustPin(t, s, board)
	for _, p := range []uint64{p1, p2} { // cached before the flip
		if secretOf(t, mustGet(t, s, p)) {
			t.Fatal("a pin of a public board is secret")
		}
	}
	setSecret := func(secret bool) model.Object {
		t.Helper()
		o, err := s.Update(ctx, board, idcodec.TypeBoard, 0, withSecret(secret))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	if b := setSecret(true); !secretOf(t, b) {
		t.Fatal("the board is not secret")
	}
	for _, p := range []uint64{p1, p2} {
		o := mustGet(t, s, p)
		if !secretOf(t, o) || o.Version != 2 {
			t.Fatalf("pin %d after the flip: version %d, %s", p, o.Version, o.Doc)
		}
	}
	if !secretOf(t, mustGet(t, s, mustPin(t, s, board))) {
		t.Fatal("a new pin on a secret board is not secret")
	}
	// Nobody but ann may save from it (bob's board's owner cannot see it).
	if _, _, err := s.SavePin(ctx, p1, mustBoard(t, s, bob), 0); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("a save of a secret pin to another's board: %v", err)
	}
	saved, _, err := s.SavePin(ctx, p1, mustBoard(t, s, ann), ann)
	if err != nil || secretOf(t, saved) {
		t.Fatalf("ann saves her secret pin to a public board: %v %s", err, saved.Doc)
	}
	// Others can neither like nor comment on it.
	if err := s.AddMapping(ctx, model.UserLikes, bob, p1); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("bob likes a secret pin: %v", err)
	}
	if _, err := s.Create(ctx, idcodec.TypeComment, &model.CommentDoc{PinID: model.ID(p1), AuthorID: model.ID(bob), Text: "x"}, 0); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("bob comments on a secret pin: %v", err)
	}
	if err := s.AddMapping(ctx, model.UserLikes, ann, p1); err != nil {
		t.Fatalf("ann likes her own secret pin: %v", err)
	}
	setSecret(false)
	for _, p := range []uint64{p1, p2} {
		if o := mustGet(t, s, p); secretOf(t, o) || o.Version != 3 {
			t.Fatalf("pin %d made public: version %d, %s", p, o.Version, o.Doc)
		}
	}
	if err := s.AddMapping(ctx, model.UserLikes, bob, p1); err != nil {
		t.Fatalf("bob likes the pin made public: %v", err)
	}
}

// secretOf reports whether o is secret, after checking that the flags
// its row carries agree with its document.
func secretOf(t *testing.T, o model.Object) bool {
	t.Helper()
	d, err := model.DecodeDoc(o.Type, o.Doc)
	if err != nil {
		t.Fatal(err)
	}
	if f := model.FlagsOf(d); f != o.Flags {
		t.Fatalf("object %d carries flags %b, its document %b: %s", o.ID, o.Flags, f, o.Doc)
	}
	return o.Flags.Secret()
}

func mustGet(t *testing.T, s *Store, pin uint64) model.Object {
	t.Helper()
	o, err := s.Get(ctx, pin, idcodec.TypePin)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// BenchmarkBoardSecretFlip: one PATCH of a board's secret flag, which
// rewrites the board and its 1,000 pins in one transaction.
func BenchmarkBoardSecretFlip(b *testing.B) {
	s, _ := openTestB(b)
	o, err := s.CreateUser(ctx, model.UserDoc{Username: "flip"})
	if err != nil {
		b.Fatal(err)
	}
	bo, err := s.Create(ctx, idcodec.TypeBoard, &model.BoardDoc{OwnerID: model.ID(o.ID), Name: "b"}, 0)
	if err != nil {
		b.Fatal(err)
	}
	for range 1000 {
		if _, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(bo.ID), Link: "https://example.com/x"}, 0); err != nil {
			b.Fatal(err)
		}
	}
	secret := false
	b.ResetTimer()
	for b.Loop() {
		secret = !secret
		_, err := s.Update(ctx, bo.ID, idcodec.TypeBoard, 0, withSecret(secret))
		if err != nil {
			b.Fatal(err)
		}
	}
}

// secretCounts returns a user's boards and pins counts, and how many of
// each are secret, as Get carries them (model.CountKeys), and checks that
// a list page of each carries the same.
func secretCounts(t *testing.T, s *Store, user uint64) (boards, pins, secretBoards, secretPins int64) {
	t.Helper()
	u, err := s.Get(ctx, user, idcodec.TypeUser)
	if err != nil {
		t.Fatal(err)
	}
	keys := model.CountKeys(idcodec.TypeUser)
	at := func(key uint8) int64 { return u.Counts[slices.Index(keys, key)] }
	boards, pins = at(uint8(model.UserBoards)), at(uint8(model.UserPins))
	secretBoards, secretPins = at(model.SecretKey(model.UserBoards)), at(model.SecretKey(model.UserPins))
	for m, want := range map[model.Mapping][2]int64{model.UserBoards: {boards, secretBoards}, model.UserPins: {pins, secretPins}} {
		l, err := s.List(ctx, m, user, model.Page{Limit: 1})
		if err != nil || l.Count != want[0] || l.Secret != want[1] {
			t.Fatalf("%s of %d: count %d, secret %d, %v; the user carries %v", m, user, l.Count, l.Secret, err, want)
		}
	}
	return
}

// A user's counts of secret boards and of pins on them are exact through
// every change that moves them: creating a secret board and pins and saves
// on it, flipping it both ways, deleting a pin and the board; and the
// migration that counts them from the rows finds the same.
func TestSecretCountsAreExact(t *testing.T) {
	s, _ := openTest(t)
	ann := mustUser(t, s, "ann")
	want := func(what string, boards, pins, secretBoards, secretPins int64) {
		t.Helper()
		b, p, sb, sp := secretCounts(t, s, ann)
		if b != boards || p != pins || sb != secretBoards || sp != secretPins {
			t.Fatalf("%s: boards %d pins %d, secret boards %d pins %d; want %d %d, %d %d", what, b, p, sb, sp, boards, pins, secretBoards, secretPins)
		}
	}
	flip := func(board uint64, secret bool) {
		t.Helper()
		if _, err := s.Update(ctx, board, idcodec.TypeBoard, 0, withSecret(secret)); err != nil {
			t.Fatal(err)
		}
	}
	open := mustBoard(t, s, ann)
	src := mustPin(t, s, open)
	secret, err := s.Create(ctx, idcodec.TypeBoard, &model.BoardDoc{OwnerID: model.ID(ann), Name: "s", Secret: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	want("a secret board", 2, 1, 1, 0)
	p1 := mustPin(t, s, secret.ID)
	mustPin(t, s, secret.ID)
	if _, _, err := s.SavePin(ctx, src, secret.ID, 0); err != nil {
		t.Fatal(err)
	}
	want("two pins and a save on it", 2, 4, 1, 3)
	flip(secret.ID, false)
	want("made public", 2, 4, 0, 0)
	flip(secret.ID, true)
	want("secret again", 2, 4, 1, 3)
	flip(open, true)
	want("both secret", 2, 4, 2, 4)
	flip(open, false)
	if err := s.Delete(ctx, p1, idcodec.TypePin, 0); err != nil {
		t.Fatal(err)
	}
	want("a secret pin deleted", 2, 3, 1, 2)
	// The migration counts the same from the rows.
	sh, _, _ := s.route("test", ann, idcodec.TypeUser)
	recount := func(what string) {
		t.Helper()
		b, p, sb, sp := secretCounts(t, s, ann)
		if _, err := sh.Host.DB.ExecContext(ctx, "DELETE FROM "+sh.DB.Name+".mapping_counts WHERE mapping >= 128"); err != nil {
			t.Fatal(err)
		}
		ms, err := migrations.All()
		if err != nil {
			t.Fatal(err)
		}
		conn, err := sh.Host.DB.Connx(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		stmts := []string{"USE " + sh.DB.Name}
		for _, m := range ms {
			if m.Name == "secret_counts" {
				stmts = append(stmts, m.Statements...)
			}
		}
		for _, q := range append(stmts, "USE information_schema") {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		if s.objects.on() {
			if err := s.objects.cache.Invalidate(ctx, ann); err != nil {
				t.Fatal(err)
			}
		}
		want(what+", counted again by the migration", b, p, sb, sp)
	}
	recount("a secret pin deleted")
	if err := s.Delete(ctx, secret.ID, idcodec.TypeBoard, 0); err != nil {
		t.Fatal(err)
	}
	want("the secret board deleted", 1, 1, 0, 0)
	recount("the secret board deleted")
}

// withSecret is an Update's change of a board document: its secret flag
// set to secret.
func withSecret(secret bool) func(doc []byte) ([]byte, error) {
	return func(doc []byte) ([]byte, error) {
		var d model.BoardDoc
		if err := json.Unmarshal(doc, &d); err != nil {
			return nil, err
		}
		d.Secret = secret
		return json.Marshal(&d)
	}
}

// Pins created through one server race the board's secret flag flipped
// through another. Whatever the order, none of them fails (a create and a
// flip take the board's lock first, so neither deadlocks the other), and
// once both are done every pin on the board is as secret as the board,
// and the owner's counts of pins and secret pins are exact.
func TestCreatesRaceABoardsFlips(t *testing.T) {
	a, _ := openTest(t)
	b := openSecond(t, a, testenv.RedisAddr(t))
	ann := mustUser(t, a, "ann")
	board := mustBoard(t, a, ann)
	mustPin(t, a, board)
	const creators, each, flips = 4, 25, 20
	var wg sync.WaitGroup
	errs := make(chan error, creators*each+flips)
	for range creators {
		wg.Go(func() {
			for range each {
				if _, err := a.CreatePin(ctx, model.PinDoc{BoardID: model.ID(board), Link: "https://example.com/r"}, ann); err != nil {
					errs <- err
				}
			}
		})
	}
	secret := false
	wg.Go(func() {
		for range flips {
			secret = !secret
			if _, err := b.Update(ctx, board, idcodec.TypeBoard, 0, withSecret(secret)); err != nil {
				errs <- err
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	pins := all(t, a, model.BoardPins, board, 50, true)
	if len(pins) != 1+creators*each {
		t.Fatalf("%d pins on the board, want %d", len(pins), 1+creators*each)
	}
	for _, p := range pins {
		if o := mustGet(t, a, p); secretOf(t, o) != secret {
			t.Fatalf("pin %d secret %v on a board whose secret flag is %v: %s", p, o.Flags.Secret(), secret, o.Doc)
		}
	}
	wantSecret := int64(0)
	if secret {
		wantSecret = int64(len(pins))
	}
	if _, n, _, sn := secretCounts(t, a, ann); n != int64(len(pins)) || sn != wantSecret {
		t.Fatalf("ann's pins: %d, secret %d; want %d and %d", n, sn, len(pins), wantSecret)
	}
}
