package store

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
)

// keyCtx is ctx carrying the idempotency key key of a request with body.
func keyCtx(key, body string) context.Context {
	return model.WithIdempotency(ctx, model.NewIdempotency("test", key, "POST", "/v1/x", []byte(body), func(o model.Object) ([]byte, error) {
		return json.Marshal(struct {
			ID  uint64 `json:"id"`
			Doc string `json:"doc"`
		}{o.ID, string(o.Doc)})
	}))
}

// ageKey makes the key's claim older than the lease, as a dead claimant
// leaves it.
func ageKey(t *testing.T, s *Store, c context.Context, db shardsql.DB) {
	t.Helper()
	k := model.IdempotencyOf(c)
	res, err := s.router.Current().Hosts()[0].DB.ExecContext(ctx, "UPDATE "+db.Name+".idempotency_keys SET claimed_at = claimed_at - INTERVAL 1 MINUTE WHERE key_hash = ?", k.Hash[:])
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("age the key: %v, %d rows", err, n)
	}
}

// A user create killed after its user exists but before its name is
// claimed leaves the key pending with the user noted: the retry after the
// lease finishes that user, never makes a second one, and the next retry
// is a replay.
func TestKeyedUserCreateResumesTheDeadClaimantsUser(t *testing.T) {
	s, _ := openTest(t)
	c := keyCtx("u-1", `{"username":"resumed"}`)
	sh := s.userShard(c)
	kc, err := s.claimKey(c, "test", sh)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(model.UserDoc{Username: "resumed"}) // inactive, as the first step writes it
	var dead model.Object
	err = s.inTx(ctx, "test", sh, func(tx *shardsql.Tx) error {
		at := shardsql.Now()
		if dead, err = shardsql.InsertObject(ctx, tx, sh.DB, idcodec.TypeUser, doc, at); err != nil {
			return err
		}
		if err := shardsql.InsertUserClaim(ctx, tx, sh.DB, dead.ID, "resumed", at); err != nil {
			return err
		}
		return kc.note(ctx, tx, "test", dead.ID)
	})
	if err != nil {
		t.Fatal(err)
	}
	// The server dies here. Within the lease a retry is refused.
	if _, err := s.CreateUser(c, model.UserDoc{Username: "resumed"}); !model.IsCode(err, model.EKeyInUse) {
		t.Fatalf("retry within the lease: %v, want %s", err, model.EKeyInUse)
	}
	ageKey(t, s, c, sh.DB)
	got, err := s.CreateUser(c, model.UserDoc{Username: "resumed"})
	if err != nil || got.ID != dead.ID {
		t.Fatalf("retry after the lease: %d, %v; want the dead claimant's user %d", got.ID, err, dead.ID)
	}
	if u, err := s.GetUserByUsername(ctx, "resumed"); err != nil || u.ID != dead.ID {
		t.Fatalf("by name: %d, %v", u.ID, err)
	}
	if _, err := s.CreateUser(c, model.UserDoc{Username: "resumed"}); !errors.Is(err, model.ErrReplayed) || model.IdempotencyOf(c).Replay == nil {
		t.Fatalf("the next retry: %v, want a replay", err)
	}
	var n int
	if err := sh.Host.DB.GetContext(ctx, &n, "SELECT COUNT(*) FROM "+sh.DB.Name+".users"); err != nil || n != 1 {
		t.Fatalf("%d users on the key's shard, %v; want 1", n, err)
	}
}

// A claimant that outlives its lease loses its key to the retry that took
// it over: its create rolls back (EKeyInUse), and exactly one pin exists.
func TestKeyTakenOverRollsTheSlowCreateBack(t *testing.T) {
	s, _ := openTest(t)
	board := mustBoard(t, s, mustUser(t, s, "slow"))
	c := keyCtx("p-1", `{"board_id":"1"}`)
	sh, _, _ := s.route("test", board, idcodec.TypeBoard)
	slow, err := s.claimKey(c, "test", sh)
	if err != nil {
		t.Fatal(err)
	}
	ageKey(t, s, c, sh.DB)
	if _, err := s.CreatePin(c, model.PinDoc{BoardID: model.ID(board)}, 0); err != nil {
		t.Fatalf("the retry after the lease: %v", err)
	}
	err = s.inTx(ctx, "test", sh, func(tx *shardsql.Tx) error {
		o, err := shardsql.InsertObject(ctx, tx, sh.DB, idcodec.TypePin, []byte(`{"board_id":"1","active":true}`), shardsql.Now())
		if err != nil {
			return err
		}
		return slow.complete(ctx, tx, "test", o)
	})
	if !model.IsCode(err, model.EKeyInUse) {
		t.Fatalf("the slow claimant's create: %v, want %s", err, model.EKeyInUse)
	}
	if n := count(t, s, model.BoardPins, board); n != 1 {
		t.Fatalf("board has %d pins, want 1", n)
	}
	var rows int
	if err := sh.Host.DB.GetContext(ctx, &rows, "SELECT COUNT(*) FROM "+sh.DB.Name+".pins"); err != nil || rows != 1 {
		t.Fatalf("%d pin rows, %v; want 1 (the slow create rolled back)", rows, err)
	}
}
