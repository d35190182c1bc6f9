package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// keyCtx is ctx carrying the idempotency key key of a request with body.
func keyCtx(key, body string) context.Context {
	return model.WithIdempotency(ctx, model.NewIdempotency("test", key, "POST", "/v1/x", []byte(body)))
}

// awayKey names the first key prefix-N whose home is not shard target:
// so every test below runs with the key's claim and the create's outcome
// on two shards.
func awayKey(t *testing.T, s *Store, prefix string, target int) string {
	t.Helper()
	for i := range 100 {
		key := fmt.Sprintf("%s-%d", prefix, i)
		if keyHome(s.router.Current(), model.IdempotencyOf(keyCtx(key, ""))).DB.N != target {
			return key
		}
	}
	t.Fatal("no key found whose home is another shard")
	return ""
}

// ageKey makes the key's claim older than the lease, as a dead claimant
// leaves it.
func ageKey(t *testing.T, s *Store, c context.Context) {
	t.Helper()
	k := model.IdempotencyOf(c)
	home := keyHome(s.router.Current(), k)
	res, err := home.Host.DB.ExecContext(ctx, "UPDATE "+home.DB.Name+".idempotency_claims SET claimed_at = claimed_at - INTERVAL 1 MINUTE WHERE key_hash = ?", k.Hash[:])
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("age the key: %v, %d rows", err, n)
	}
}

// rows counts the rows of table on shard sh.
func rows(t *testing.T, sh topology.Shard, table string) int {
	t.Helper()
	var n int
	if err := sh.Host.DB.GetContext(ctx, &n, "SELECT COUNT(*) FROM "+sh.DB.Name+"."+table); err != nil {
		t.Fatal(err)
	}
	return n
}

// pinRows counts the pin rows of board on its shard sh, live or not,
// listed or not (a create under a claim that lost its key must leave
// none).
func pinRows(t *testing.T, sh topology.Shard, board uint64) int {
	t.Helper()
	var n int
	if err := sh.Host.DB.GetContext(ctx, &n, "SELECT COUNT(*) FROM "+sh.DB.Name+".pins WHERE JSON_VALUE(doc, '$.board_id') = ?", fmt.Sprint(board)); err != nil {
		t.Fatal(err)
	}
	return n
}

// claimRows counts the claims of c's key on its home.
func claimRows(t *testing.T, s *Store, c context.Context) int {
	t.Helper()
	k := model.IdempotencyOf(c)
	home := keyHome(s.router.Current(), k)
	var n int
	if err := home.Host.DB.GetContext(ctx, &n, "SELECT COUNT(*) FROM "+home.DB.Name+".idempotency_claims WHERE key_hash = ?", k.Hash[:]); err != nil {
		t.Fatal(err)
	}
	return n
}

// keyedPin sets up a board and a key whose home is another shard than the
// board's, and returns them (the key in the context of a pin create on
// the board) with the board's shard.
func keyedPin(t *testing.T, s *Store, name string) (board uint64, c context.Context, sh topology.Shard) {
	t.Helper()
	board = mustBoard(t, s, mustUser(t, s, name))
	sh, _, _ = s.route("test", board, idcodec.TypeBoard)
	return board, keyCtx(awayKey(t, s, name, sh.DB.N), `{"board_id":"`+fmt.Sprint(board)+`"}`), sh
}

// createUnder runs what the create of a pin does under kc's claim (its
// transaction, with the key's completion), without the claim step: the
// work of a claimant that holds kc.
func createUnder(s *Store, kc *keyClaim, sh topology.Shard, board uint64) (model.Object, error) {
	var o model.Object
	err := s.inTx(ctx, "test", sh, func(tx *shardsql.Tx) error {
		var err error
		if o, err = shardsql.InsertObject(ctx, tx, sh.DB, idcodec.TypePin, []byte(`{"board_id":"`+fmt.Sprint(board)+`","active":true}`), model.FlagActive, shardsql.Now()); err != nil {
			return err
		}
		return kc.record(ctx, tx, "test", model.Outcome{Object: o, Created: true})
	})
	return o, err
}

// replayed fails unless err is a replay whose response names want.
func replayed(t *testing.T, c context.Context, err error, want uint64) {
	t.Helper()
	if !errors.Is(err, model.ErrReplayed) {
		t.Fatalf("retry: %v, want a replay", err)
	}
	if r := model.IdempotencyOf(c).Replay; r.Object.ID != want {
		t.Fatalf("replayed %+v, want the outcome of %d", r, want)
	}
}

// A key's claim lives on its home, picked from the key alone, and the
// outcome of its create on the create's shard: one create, then a replay,
// with each row where it belongs; another request with the key, to
// another shard, is refused.
func TestKeyHomeIsIndependentOfTheCreatesShard(t *testing.T) {
	s, _ := openTest(t)
	board, c, sh := keyedPin(t, s, "home")
	home := keyHome(s.router.Current(), model.IdempotencyOf(c))
	first, err := s.CreatePin(c, model.PinDoc{BoardID: model.ID(board)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.CreatePin(c, model.PinDoc{BoardID: model.ID(board)}, 0)
	replayed(t, c, err, first.ID)
	if rows(t, home, "idempotency_claims") != 1 || rows(t, sh, "idempotency_outcomes") != 1 || rows(t, sh, "idempotency_claims") != 0 {
		t.Fatalf("claims on the home %d, outcomes on the board's shard %d, claims there %d; want 1, 1, 0",
			rows(t, home, "idempotency_claims"), rows(t, sh, "idempotency_outcomes"), rows(t, sh, "idempotency_claims"))
	}
	// The same key with another request, for an owner on another shard.
	key := awayKey(t, s, "home", sh.DB.N) // the key of c
	for u := mustUser(t, s, "elsewhere"); ; u = mustUser(t, s, "elsewhere") {
		if idcodec.ShardOf(u) != uint32(sh.DB.N) {
			other := keyCtx(key, `{"owner_id":"`+fmt.Sprint(u)+`"}`)
			if _, err := s.Create(other, idcodec.TypeBoard, &model.BoardDoc{OwnerID: model.ID(u), Name: "x"}, 0); !model.IsCode(err, model.EKeyReused) {
				t.Fatalf("another request with the key, on shard %d: %v, want %s", idcodec.ShardOf(u), err, model.EKeyReused)
			}
			if n := count(t, s, model.UserBoards, u); n != 0 {
				t.Fatalf("the refused create made %d boards", n)
			}
			break
		}
	}
	if n := count(t, s, model.BoardPins, board); n != 1 {
		t.Fatalf("board has %d pins, want 1", n)
	}
}

// The crash points of a keyed create, each as a server that died there
// leaves it, and what a retry then does: the create happens once, and a
// create that committed is replayed.
func TestKeyedCreateCrashPoints(t *testing.T) {
	s, _ := openTest(t)
	pin := func(c context.Context, board uint64) (model.Object, error) {
		return s.CreatePin(c, model.PinDoc{BoardID: model.ID(board)}, 0)
	}

	t.Run("after the claim, before the create", func(t *testing.T) {
		board, c, sh := keyedPin(t, s, "claimed")
		dead, err := s.claimKey(c, "test", sh)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pin(c, board); !model.IsCode(err, model.EKeyInUse) {
			t.Fatalf("retry within the lease: %v, want %s", err, model.EKeyInUse)
		}
		ageKey(t, s, c)
		o, err := pin(c, board)
		if err != nil {
			t.Fatalf("retry after the lease: %v", err)
		}
		_, err = pin(c, board)
		replayed(t, c, err, o.ID)
		// The claimant was only slow: its create now rolls back.
		if _, err := createUnder(s, dead, sh, board); !model.IsCode(err, model.EKeyInUse) {
			t.Fatalf("the slow claimant's create: %v, want %s", err, model.EKeyInUse)
		}
		if n := pinRows(t, sh, board); n != 1 {
			t.Fatalf("%d pin rows of the board, want 1 (the slow create rolled back)", n)
		}
	})

	t.Run("after the create committed, before the answer", func(t *testing.T) {
		board, c, sh := keyedPin(t, s, "committed")
		kc, err := s.claimKey(c, "test", sh)
		if err != nil {
			t.Fatal(err)
		}
		o, err := createUnder(s, kc, sh, board)
		if err != nil {
			t.Fatal(err)
		}
		// Within the lease the retry reads the outcome: replayed at once.
		_, err = pin(c, board)
		replayed(t, c, err, o.ID)
		ageKey(t, s, c)
		_, err = pin(c, board)
		replayed(t, c, err, o.ID)
		if n := pinRows(t, sh, board); n != 1 {
			t.Fatalf("%d pin rows of the board, want 1", n)
		}
	})

	t.Run("after the create rolled back, before the release", func(t *testing.T) {
		board, c, sh := keyedPin(t, s, "rolledback")
		kc, err := s.claimKey(c, "test", sh)
		if err != nil {
			t.Fatal(err)
		}
		err = s.inTx(ctx, "test", sh, func(tx *shardsql.Tx) error {
			if _, err := shardsql.InsertObject(ctx, tx, sh.DB, idcodec.TypePin, []byte(`{"board_id":"`+fmt.Sprint(board)+`","active":true}`), model.FlagActive, shardsql.Now()); err != nil {
				return err
			}
			if err := kc.record(ctx, tx, "test", model.Outcome{Object: model.Object{ID: 1}, Created: true}); err != nil {
				return err
			}
			return errors.New("the commit failed")
		})
		if err == nil {
			t.Fatal("the create did not fail")
		}
		if _, err := pin(c, board); !model.IsCode(err, model.EKeyInUse) {
			t.Fatalf("retry within the lease: %v, want %s", err, model.EKeyInUse)
		}
		ageKey(t, s, c)
		o, err := pin(c, board)
		if err != nil {
			t.Fatal(err)
		}
		_, err = pin(c, board)
		replayed(t, c, err, o.ID)
		if n := pinRows(t, sh, board); n != 1 {
			t.Fatalf("%d pin rows of the board, want 1", n)
		}
	})

	t.Run("after the release fenced, before it deleted the claim", func(t *testing.T) {
		board, c, sh := keyedPin(t, s, "fenced")
		kc, err := s.claimKey(c, "test", sh)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := shardsql.FenceOutcome(ctx, sh.Host.DB, sh.DB, kc.k.Hash[:], kc.claim, kc.expires); err != nil {
			t.Fatal(err)
		}
		// A fenced claim can never commit: the retry need not wait.
		o, err := pin(c, board)
		if err != nil {
			t.Fatalf("retry of a fenced claim: %v", err)
		}
		_, err = pin(c, board)
		replayed(t, c, err, o.ID)
		if n := pinRows(t, sh, board); n != 1 {
			t.Fatalf("%d pin rows of the board, want 1", n)
		}
	})

	t.Run("a commit in doubt that did commit", func(t *testing.T) {
		// The create committed but its server saw an error (the commit's
		// answer was lost) and released the key: the release meets the
		// committed outcome and keeps the claim, so the retry replays.
		board, c, sh := keyedPin(t, s, "doubt")
		kc, err := s.claimKey(c, "test", sh)
		if err != nil {
			t.Fatal(err)
		}
		o, err := createUnder(s, kc, sh, board)
		if err != nil {
			t.Fatal(err)
		}
		s.releaseKey(ctx, "test", kc)
		_, err = pin(c, board)
		replayed(t, c, err, o.ID)
		if n := pinRows(t, sh, board); n != 1 {
			t.Fatalf("%d pin rows of the board, want 1", n)
		}
	})

	t.Run("a failed create keeps nothing", func(t *testing.T) {
		board, c, sh := keyedPin(t, s, "failed")
		gone := idcodec.MustEncode(uint32(sh.DB.N), idcodec.TypeBoard, 1<<36-2)
		if _, err := pin(c, gone); !model.IsCode(err, model.ENotFound) {
			t.Fatalf("pin on a missing board: %v", err)
		}
		if n := claimRows(t, s, c); n != 0 {
			t.Fatalf("%d claims left by a failed create, want 0", n)
		}
		if _, err := pin(c, board); err != nil { // the retry runs
			t.Fatalf("the retry of a failed create: %v", err)
		}
	})
}

// A user create killed after its user exists but before its name is
// claimed leaves the claim pending with the user noted on the user's
// shard: the retry after the lease finishes that user, never makes a
// second one, and the next retry is a replay. Killed after its last step
// committed, the retry is a replay at once.
func TestKeyedUserCreateResumesTheDeadClaimantsUser(t *testing.T) {
	s, _ := openTest(t)
	var c context.Context
	var sh topology.Shard
	for i := range 100 { // a key whose home is not the user's shard
		c = keyCtx(fmt.Sprintf("u-%d", i), `{"username":"resumed"}`)
		sh = s.userShard(c)
		if keyHome(s.router.Current(), model.IdempotencyOf(c)).DB != sh.DB {
			break
		}
	}
	kc, err := s.claimKey(c, "test", sh)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(model.UserDoc{Username: "resumed"}) // inactive, as the first step writes it
	var dead model.Object
	err = s.inTx(ctx, "test", sh, func(tx *shardsql.Tx) error {
		at := shardsql.Now()
		if dead, err = shardsql.InsertObject(ctx, tx, sh.DB, idcodec.TypeUser, doc, 0, at); err != nil {
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
	ageKey(t, s, c)
	got, err := s.CreateUser(c, model.UserDoc{Username: "resumed"})
	if err != nil || got.ID != dead.ID {
		t.Fatalf("retry after the lease: %d, %v; want the dead claimant's user %d", got.ID, err, dead.ID)
	}
	if u, err := s.GetUserByUsername(ctx, "resumed"); err != nil || u.ID != dead.ID {
		t.Fatalf("by name: %d, %v", u.ID, err)
	}
	_, err = s.CreateUser(c, model.UserDoc{Username: "resumed"})
	replayed(t, c, err, dead.ID)
	if n := rows(t, sh, "users"); n != 1 {
		t.Fatalf("%d users on the user's shard; want 1", n)
	}
	// The dead claimant's last step, had it been only slow, cannot
	// complete the key any more: its claim was fenced.
	err = s.inTx(ctx, "test", sh, func(tx *shardsql.Tx) error {
		return kc.record(ctx, tx, "test", model.Outcome{Object: dead, Created: true})
	})
	if !model.IsCode(err, model.EKeyInUse) {
		t.Fatalf("the slow claimant's completion: %v, want %s", err, model.EKeyInUse)
	}

	// Killed after the last step: the retry replays, within the lease.
	c2 := keyCtx("u-done", `{"username":"finished"}`)
	first, err := s.CreateUser(c2, model.UserDoc{Username: "finished"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateUser(c2, model.UserDoc{Username: "finished"})
	replayed(t, c2, err, first.ID)
}

// A request that creates nothing (a read by POST) makes the key its own:
// the same key with a create is refused on any shard, and the read with
// the same key runs again; a key first used by a create refuses the read.
func TestUseKey(t *testing.T) {
	s, _ := openTest(t)
	c := keyCtx("read-1", `{"ids":[]}`)
	if err := s.UseKey(c); err != nil {
		t.Fatal(err)
	}
	if err := s.UseKey(c); err != nil {
		t.Fatalf("the same read again: %v", err)
	}
	create := keyCtx("read-1", `{"username":"x"}`)
	if _, err := s.CreateUser(create, model.UserDoc{Username: "x"}); !model.IsCode(err, model.EKeyReused) {
		t.Fatalf("a create with a read's key: %v, want %s", err, model.EKeyReused)
	}
	c2 := keyCtx("read-2", `{"username":"y"}`)
	if _, err := s.CreateUser(c2, model.UserDoc{Username: "y"}); err != nil {
		t.Fatal(err)
	}
	if err := s.UseKey(keyCtx("read-2", `{"ids":[]}`)); !model.IsCode(err, model.EKeyReused) {
		t.Fatalf("a read with a create's key: %v, want %s", err, model.EKeyReused)
	}
	if err := s.UseKey(ctx); err != nil {
		t.Fatalf("no key: %v", err)
	}
}
