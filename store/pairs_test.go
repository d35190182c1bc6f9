package store

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
)

// halfWrite changes p's forward row and marks the pair, as a server that
// died right after its forward transaction leaves them: no settle.
func halfWrite(t *testing.T, s *Store, p shardsql.Pair, add bool) {
	t.Helper()
	sh, _, err := s.route("test", p.From, p.M.From())
	if err != nil {
		t.Fatal(err)
	}
	err = s.inTx(ctx, "test", sh, func(tx *shardsql.Tx) error {
		if err := shardsql.MarkPair(ctx, tx, sh.DB, p, shardsql.Now()); err != nil {
			return err
		}
		if add {
			_, err := shardsql.AddEdge(ctx, tx, sh.DB, p.M, p.From, p.To, shardsql.Sequence(shardsql.Now()))
			return err
		}
		_, err := shardsql.RemoveEdge(ctx, tx, sh.DB, p.M, p.From, p.To)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rowsOf counts the rows of one of the shard tables, over every shard.
func rowsOf(t *testing.T, s *Store, table string) int {
	t.Helper()
	top := s.router.Current()
	total := 0
	for n := range top.Len() {
		sh, _ := top.Shard(n)
		var k int
		if err := sh.Host.DB.QueryRow("SELECT COUNT(*) FROM " + sh.Name + "." + table).Scan(&k); err != nil {
			t.Fatal(err)
		}
		total += k
	}
	return total
}

// marks counts the pair_outbox rows of every shard.
func marks(t *testing.T, s *Store) int { return rowsOf(t, s, "pair_outbox") }

// brokenPairs is what a dry-run repair would fix.
func brokenPairs(t *testing.T, s *Store) int {
	t.Helper()
	rep, err := s.Repair(ctx, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range rep {
		n += r.DeadEndpoint + r.MissingInverse + r.OrphanInverse
	}
	return n
}

// A follow and a like left half-way (forward written, inverse not) and an
// unfollow left half-way are settled by the sweep alone: inverses, counts
// and the follower's feed match the forward rows, and no mark is left.
func TestHealPairsFinishesWhatADeadServerLeft(t *testing.T) {
	s, _ := openTest(t)
	a, b, c := mustUser(t, s, "a"), mustUser(t, s, "b"), mustUser(t, s, "c")
	bPin, cPin := mustPin(t, s, mustBoard(t, s, b)), mustPin(t, s, mustBoard(t, s, c))
	if err := s.AddMapping(ctx, model.UserFollowing, a, c); err != nil {
		t.Fatal(err)
	}
	waitFeed(t, s)
	halfWrite(t, s, shardsql.Pair{M: model.UserFollowing, From: a, To: b}, true)
	halfWrite(t, s, shardsql.Pair{M: model.UserLikes, From: a, To: bPin}, true)
	halfWrite(t, s, shardsql.Pair{M: model.UserFollowing, From: a, To: c}, false)
	if got := all(t, s, model.UserFollowers, b, 10, true); len(got) != 0 {
		t.Fatalf("setup: b's followers %v", got)
	}
	if n := brokenPairs(t, s); n != 3 {
		t.Fatalf("setup: repair would fix %d pairs, want 3", n)
	}

	n, err := s.HealPairs(ctx, 0)
	if err != nil || n != 3 {
		t.Fatalf("HealPairs = %d, %v; want 3 settled", n, err)
	}
	if got := all(t, s, model.UserFollowers, b, 10, true); !slices.Equal(got, []uint64{a}) {
		t.Fatalf("b's followers %v", got)
	}
	if got := all(t, s, model.PinLikers, bPin, 10, true); !slices.Equal(got, []uint64{a}) {
		t.Fatalf("likers %v", got)
	}
	if got := all(t, s, model.UserFollowers, c, 10, true); len(got) != 0 {
		t.Fatalf("c's followers after the unfollow %v", got)
	}
	if count(t, s, model.UserFollowers, b) != 1 || count(t, s, model.PinLikers, bPin) != 1 || count(t, s, model.UserFollowers, c) != 0 {
		t.Fatal("counts do not match the lists")
	}
	// The feed follows the follows: b's pin in, c's pin out.
	if got := feedAll(t, s, a, 10); !slices.Equal(got, []uint64{bPin}) {
		t.Fatalf("a's feed %v, want [%d] (not %d)", got, bPin, cPin)
	}
	if m := marks(t, s); m != 0 {
		t.Fatalf("%d marks left", m)
	}
	if n := brokenPairs(t, s); n != 0 {
		t.Fatalf("repair still finds %d", n)
	}
	if n, _ := s.HealPairs(ctx, 0); n != 0 {
		t.Fatalf("a second sweep settled %d", n)
	}
}

// A server runs the sweep on its own: a pair left half-way heals within
// seconds with no command run.
func TestPairsHealWithoutACommand(t *testing.T) {
	s0, m := openTest(t)
	a, b := mustUser(t, s0, "a"), mustUser(t, s0, "b")
	halfWrite(t, s0, shardsql.Pair{M: model.UserFollowing, From: a, To: b}, true)
	// Another server of the same deployment: on the same Redis and object
	// cache, since a server with the cache off records nothing of what it
	// changes for the others' caches (s0 reads b's first page from it).
	s, err := Open(ctx, Config{Map: m, CursorSecret: []byte("test"), PairSweep: 50 * time.Millisecond, Redis: s0.cfg.Redis, ObjectCache: s0.cfg.ObjectCache})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	for !slices.Equal(all(t, s0, model.UserFollowers, b, 10, true), []uint64{a}) {
		if time.Since(start) > 10*time.Second {
			t.Fatal("the pair did not heal within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("healed in %v", time.Since(start).Round(time.Millisecond))
}

// Follows and unfollows of one pair racing each other leave both sides,
// the count and the feed agreeing with the last forward write, with no
// repair: each settle makes the inverse match a forward row no one can
// change under it.
func TestRacingFollowsStayPaired(t *testing.T) {
	s, _ := openTest(t)
	a, b := mustUser(t, s, "a"), mustUser(t, s, "b")
	pin := mustPin(t, s, mustBoard(t, s, b))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 15 {
				var err error
				if (w+i)%2 == 0 {
					err = s.AddMapping(ctx, model.UserFollowing, a, b)
				} else {
					err = s.RemoveMapping(ctx, model.UserFollowing, a, b)
				}
				if err != nil && !model.IsCode(err, model.EUnavailable) { // a lock wait past the deadline is the only fault allowed
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	following := slices.Contains(all(t, s, model.UserFollowing, a, 10, true), b)
	followed := slices.Contains(all(t, s, model.UserFollowers, b, 10, true), a)
	if following != followed {
		t.Fatalf("a follows b: %v; b's followers hold a: %v", following, followed)
	}
	want := int64(0)
	if following {
		want = 1
	}
	if count(t, s, model.UserFollowing, a) != want || count(t, s, model.UserFollowers, b) != want {
		t.Fatal("counts do not match")
	}
	waitFeed(t, s)
	if got := feedAll(t, s, a, 10); following != slices.Equal(got, []uint64{pin}) {
		t.Fatalf("following %v, feed %v", following, got)
	}
	if m := marks(t, s); m != 0 {
		t.Fatalf("%d marks left", m)
	}
	if n := brokenPairs(t, s); n != 0 {
		t.Fatalf("repair would fix %d", n)
	}
}

// A delete whose server died after its own transaction, before emptying
// the deleted pin's likers: the drain mark its transaction left lets the
// sweep finish, so no like points at the deleted pin.
func TestInterruptedDeleteIsDrainedBySweep(t *testing.T) {
	s, _ := openTest(t)
	owner, fan := mustUser(t, s, "owner"), mustUser(t, s, "fan")
	board := mustBoard(t, s, owner)
	pin, keep := mustPin(t, s, board), mustPin(t, s, board)
	for _, p := range []uint64{pin, keep} {
		if err := s.AddMapping(ctx, model.UserLikes, fan, p); err != nil {
			t.Fatal(err)
		}
	}
	sh, local, _ := s.route("test", pin, idcodec.TypePin)
	if err := s.inTx(ctx, "test", sh, func(tx *shardsql.Tx) error { // Delete's own transaction, and no more
		d, err := markDeleted(ctx, tx, "test", sh, idcodec.TypePin, local, 0)
		if err != nil {
			return err
		}
		if err := unlink(ctx, tx, "test", sh, idcodec.TypePin, pin, d, new(deleted)); err != nil {
			return err
		}
		return shardsql.MarkPair(ctx, tx, sh.DB, drainMark(model.PinLikers, pin), shardsql.Now())
	}); err != nil {
		t.Fatal(err)
	}
	if n := brokenPairs(t, s); n != 1 {
		t.Fatalf("setup: repair would fix %d pairs, want the 1 like of the deleted pin", n)
	}
	if _, err := s.HealPairs(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got := all(t, s, model.UserLikes, fan, 10, true); !slices.Equal(got, []uint64{keep}) || count(t, s, model.UserLikes, fan) != 1 {
		t.Fatalf("fan's likes after the sweep %v (count %d), want [%d]", got, count(t, s, model.UserLikes, fan), keep)
	}
	if m := marks(t, s); m != 0 {
		t.Fatalf("%d marks left", m)
	}
	if n := brokenPairs(t, s); n != 0 {
		t.Fatalf("repair still finds %d", n)
	}
}

// A follow and a like whose inverse side is on a range that a move holds
// for longer than the query timeout: the forward side's transaction is
// not opened until the inverse shard takes writes again, so both wait in
// the write buffer and succeed once the hold ends, with both sides, the
// counts and the feed written and no mark left.
func TestPairWaitsOutAHoldLongerThanTheQueryTimeout(t *testing.T) {
	const qt = time.Second
	f := newFileMap(t, []string{testenv.MySQLDSN(t)}, "{shards: 0-3, host: h0}", "{shards: 4-7, host: h0}")
	// The objects are made with the default timeout: a on shards 0-3, c
	// and c's pin on 4-7.
	setup := openFile(t, f, 0, true)
	var a, c uint64
	for i := 0; a == 0 || c == 0; i++ {
		if i == 200 {
			t.Fatal("no user on one of the ranges")
		}
		u := mustUser(t, setup, "u")
		if idcodec.ShardOf(u) < 4 {
			a = u
		} else {
			c = u
		}
	}
	pin := mustPin(t, setup, mustBoard(t, setup, c))
	if idcodec.ShardOf(pin) < 4 {
		t.Fatalf("pin %d is not on its owner's range", pin)
	}
	s := openFile(t, f, qt, false)

	f.write(t, "{shards: 0-3, host: h0}", "{shards: 4-7, host: h0, read_only: true}")
	if err := s.Router().ReloadFile(); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	go func() { errs <- s.AddMapping(ctx, model.UserFollowing, a, c) }()
	go func() { errs <- s.AddMapping(ctx, model.UserLikes, a, pin) }()
	eventually(t, 2*time.Second, "the pairs do not wait in the write buffer", func() bool { return s.Router().Buffer().Waiting() == 2 })
	time.Sleep(qt + qt/2) // the hold outlasts the query timeout, not the write buffer
	f.write(t, "{shards: 0-3, host: h0}", "{shards: 4-7, host: h0}")
	if err := s.Router().ReloadFile(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("a pair written across the hold: %v", err)
		}
	}
	if n := marks(t, s); n != 0 {
		t.Fatalf("%d pairs left half-settled", n)
	}
	if got := all(t, s, model.UserFollowers, c, 10, true); !slices.Equal(got, []uint64{a}) {
		t.Fatalf("followers %v", got)
	}
	if got := all(t, s, model.PinLikers, pin, 10, true); !slices.Equal(got, []uint64{a}) {
		t.Fatalf("likers %v", got)
	}
	if count(t, s, model.UserFollowing, a) != 1 || count(t, s, model.UserFollowers, c) != 1 || count(t, s, model.UserLikes, a) != 1 || count(t, s, model.PinLikers, pin) != 1 {
		t.Fatal("counts are not 1")
	}
	if fd, err := s.Feed(ctx, a, model.Page{Limit: 10}); err != nil || !slices.Equal(ids(fd), []uint64{pin}) {
		t.Fatalf("feed %v %v", ids(fd), err)
	}
	if n := brokenPairs(t, s); n != 0 {
		t.Fatalf("repair finds %d broken pairs", n)
	}
}
