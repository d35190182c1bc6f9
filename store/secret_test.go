package store

import (
	"encoding/json"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
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
		if model.SecretOf(mustGet(t, s, p).Doc) {
			t.Fatal("a pin of a public board is secret")
		}
	}
	setSecret := func(secret bool) model.Object {
		t.Helper()
		o, err := s.Update(ctx, board, idcodec.TypeBoard, 0, func(doc []byte) ([]byte, error) {
			var d model.BoardDoc
			if err := json.Unmarshal(doc, &d); err != nil {
				return nil, err
			}
			d.Secret = secret
			return json.Marshal(&d)
		})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	if b := setSecret(true); !model.SecretOf(b.Doc) {
		t.Fatal("the board is not secret")
	}
	for _, p := range []uint64{p1, p2} {
		o := mustGet(t, s, p)
		if !model.SecretOf(o.Doc) || o.Version != 2 {
			t.Fatalf("pin %d after the flip: version %d, %s", p, o.Version, o.Doc)
		}
	}
	if !model.SecretOf(mustGet(t, s, mustPin(t, s, board)).Doc) {
		t.Fatal("a new pin on a secret board is not secret")
	}
	// Nobody but ann may save from it (bob's board's owner cannot see it).
	if _, _, err := s.SavePin(ctx, p1, mustBoard(t, s, bob), 0); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("a save of a secret pin to another's board: %v", err)
	}
	saved, _, err := s.SavePin(ctx, p1, mustBoard(t, s, ann), ann)
	if err != nil || model.SecretOf(saved.Doc) {
		t.Fatalf("ann saves her secret pin to a public board: %v %s", err, saved.Doc)
	}
	// Others can neither like nor comment on it.
	if err := s.AddMapping(ctx, model.UserLikes, bob, p1); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("bob likes a secret pin: %v", err)
	}
	if _, err := s.CreateComment(ctx, model.CommentDoc{PinID: model.ID(p1), AuthorID: model.ID(bob), Text: "x"}); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("bob comments on a secret pin: %v", err)
	}
	if err := s.AddMapping(ctx, model.UserLikes, ann, p1); err != nil {
		t.Fatalf("ann likes her own secret pin: %v", err)
	}
	setSecret(false)
	for _, p := range []uint64{p1, p2} {
		if o := mustGet(t, s, p); model.SecretOf(o.Doc) || o.Version != 3 {
			t.Fatalf("pin %d made public: version %d, %s", p, o.Version, o.Doc)
		}
	}
	if err := s.AddMapping(ctx, model.UserLikes, bob, p1); err != nil {
		t.Fatalf("bob likes the pin made public: %v", err)
	}
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
	bo, err := s.CreateBoard(ctx, model.BoardDoc{OwnerID: model.ID(o.ID), Name: "b"})
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
		_, err := s.Update(ctx, bo.ID, idcodec.TypeBoard, 0, func(doc []byte) ([]byte, error) {
			var d model.BoardDoc
			if err := json.Unmarshal(doc, &d); err != nil {
				return nil, err
			}
			d.Secret = secret
			return json.Marshal(&d)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
