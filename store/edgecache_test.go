package store

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/objcache"
)

// openSecond opens another server on a's shards and Redis.
func openSecond(t *testing.T, a *Store, redisAddr string) *Store {
	t.Helper()
	b, err := Open(ctx, Config{Map: a.cfg.Map, CursorSecret: []byte("test"), Redis: RedisConfig{Addrs: []string{redisAddr}, Prefix: a.cfg.Redis.Prefix}, ObjectCache: a.cfg.ObjectCache})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// edgeState is one (owner, item) pair's history: writes started and
// acknowledged; after n acknowledged writes the item is held when n is
// odd (every write toggles it).
type edgeState struct{ started, acked atomic.Int64 }

// toggleRace toggles owners×items pairs through alternating servers
// (writes per owner, one writer each) while 4 readers read an owner's
// items through either server, and judges every item no write
// overlapped: it must be held exactly when the last acknowledged write
// left it there, never an older state.
type toggleRace struct {
	stores                []*Store
	owners, items, writes int
	toggle                func(s *Store, owner, item int, on bool) error
	read                  func(s *Store, owner int) ([]bool, error) // per item, in order
}

// run runs the race and fails t on an answer older than acknowledged or
// when nothing was judged; it returns the reads and the items judged.
func (r toggleRace) run(t *testing.T) (reads, judged int64) {
	t.Helper()
	state := make([][]edgeState, r.owners)
	for o := range state {
		state[o] = make([]edgeState, r.items)
	}
	var writers sync.WaitGroup
	for o := range r.owners {
		writers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(o), 11))
			for w := range r.writes {
				k := rng.IntN(r.items)
				st := &state[o][k]
				if err := r.toggle(r.stores[w%len(r.stores)], o, k, st.started.Add(1)%2 == 1); err != nil {
					t.Error(err)
					return
				}
				st.acked.Add(1)
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
			}
		})
	}
	done := make(chan struct{})
	var nReads, nJudged, violations atomic.Int64
	var readers sync.WaitGroup
	for rd := range 4 {
		readers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(rd), 7))
			before := make([]int64, r.items)
			for {
				select {
				case <-done:
					return
				default:
				}
				o := rng.IntN(r.owners)
				for k := range before {
					before[k] = state[o][k].acked.Load()
				}
				got, err := r.read(r.stores[rng.IntN(len(r.stores))], o)
				if err != nil {
					t.Error(err)
					return
				}
				nReads.Add(1)
				for k, has := range got {
					if state[o][k].started.Load() != before[k] {
						continue // a write overlapped the read: either answer is right
					}
					nJudged.Add(1)
					if want := before[k]%2 == 1; has != want {
						violations.Add(1)
						t.Errorf("owner %d, item %d: held %v after %d acknowledged writes, want %v", o, k, has, before[k], want)
					}
				}
			}
		})
	}
	writers.Wait()
	close(done)
	readers.Wait()
	if nJudged.Load() == 0 || violations.Load() != 0 {
		t.Fatalf("%d reads, %d items judged, %d older than acknowledged", nReads.Load(), nJudged.Load(), violations.Load())
	}
	return nReads.Load(), nJudged.Load()
}

// Likes and follows toggled (like, unlike, like again: the same state
// twice, ABA) through alternating servers while readers check them
// through either: a check that no write overlapped sees the state the
// last acknowledged write left, never an older one.
// Lists are held whole (the default), or too long to be (cached entry by
// entry), or a mix (some lists longer than 2).
func TestEdgeCacheNeverOlderAcrossServers(t *testing.T) {
	for _, whole := range []int{0, -1, 2} {
		t.Run(fmt.Sprintf("whole=%d", whole), func(t *testing.T) { edgeCacheNeverOlderAcrossServers(t, whole) })
	}
}

func edgeCacheNeverOlderAcrossServers(t *testing.T, whole int) {
	a, _ := openTestWith(t, func(c *Config) { c.ObjectCache.WholeList = whole })
	b := openSecond(t, a, testenv.RedisAddr(t))
	owner := mustUser(t, a, "owner")
	board := mustBoard(t, a, owner)
	const nUsers, nItems, writes = 3, 4, 16
	var users, pins, targets []uint64
	for i := range nUsers {
		users = append(users, mustUser(t, a, fmt.Sprintf("u%d", i)))
	}
	for i := range nItems {
		pins = append(pins, mustPin(t, a, board))
		targets = append(targets, mustUser(t, a, fmt.Sprintf("t%d", i)))
	}
	lists := []struct {
		m     model.Mapping
		items []uint64
	}{{model.UserLikes, pins}, {model.UserFollowing, targets}}
	// Owner o is users[o%nUsers]'s list lists[o/nUsers].
	checks, judged := toggleRace{
		stores: []*Store{a, b}, owners: len(lists) * nUsers, items: nItems, writes: writes,
		toggle: func(s *Store, o, k int, on bool) error {
			l := lists[o/nUsers]
			if on {
				return s.AddMapping(ctx, l.m, users[o%nUsers], l.items[k])
			}
			return s.RemoveMapping(ctx, l.m, users[o%nUsers], l.items[k])
		},
		read: func(s *Store, o int) ([]bool, error) {
			l := lists[o/nUsers]
			return s.HasMany(ctx, l.m, users[o%nUsers], l.items)
		},
	}.run(t)
	hits, refused := answeredFromCache(t, "edge", a.objects.cache.EdgeStats(), b.objects.cache.EdgeStats())
	t.Logf("%d checks, %d answers judged, %d edges from the cache, %d fills refused", checks, judged, hits, refused)
}

// answeredFromCache sums the hits and refused fills of stats (one per
// server of a race) and fails t when the cache answered no read of what:
// a race the cache took no part in tested nothing.
func answeredFromCache(t *testing.T, what string, stats ...*objcache.Stats) (hits, refused int64) {
	t.Helper()
	for _, st := range stats {
		hits += st.Hits.Load()
		refused += st.Refused.Load()
	}
	if hits == 0 {
		t.Fatalf("no %s was answered from the cache", what)
	}
	return hits, refused
}

// edgeJobs is how many edge checks s sent to MySQL.
func edgeJobs(s *Store) float64 { return testutil.ToFloat64(s.edgeStats.Jobs) }

// A check the cache holds whole sends no statement; a write through
// another server is seen by the next check.
func TestEdgeCacheHitSendsNoStatement(t *testing.T) {
	a, _ := openTest(t)
	b := openSecond(t, a, testenv.RedisAddr(t))
	u, owner := mustUser(t, a, "u"), mustUser(t, a, "owner")
	pin := mustPin(t, a, mustBoard(t, a, owner))
	check := func(s *Store, want bool) {
		t.Helper()
		got, err := s.HasMany(ctx, model.UserLikes, u, []uint64{pin})
		if err != nil || got[0] != want {
			t.Fatalf("liked = %v (%v), want %v", got, err, want)
		}
	}
	check(a, false) // a miss: read from MySQL, filled
	jobs, hits := edgeJobs(a), a.objects.cache.EdgeStats().Hits.Load()
	check(a, false)
	if edgeJobs(a) != jobs || a.objects.cache.EdgeStats().Hits.Load() != hits+1 {
		t.Fatalf("a cached check sent %v edge checks to MySQL, %d hits", edgeJobs(a)-jobs, a.objects.cache.EdgeStats().Hits.Load()-hits)
	}
	if err := b.AddMapping(ctx, model.UserLikes, u, pin); err != nil {
		t.Fatal(err)
	}
	check(a, true)
	check(a, true)
	if err := b.RemoveMapping(ctx, model.UserLikes, u, pin); err != nil {
		t.Fatal(err)
	}
	check(a, false)
	// Lists that are not a viewer's state keep the MySQL path.
	jobs = edgeJobs(a)
	if got, err := a.HasMany(ctx, model.UserPins, owner, []uint64{pin}); err != nil || !got[0] {
		t.Fatalf("user_pins holds the pin: %v %v", got, err)
	}
	if edgeJobs(a) != jobs+1 {
		t.Fatal("a check of user_pins did not read MySQL")
	}
}

// A user's likes held whole answer a check of any pin from the cache,
// however small the owners' hashes are configured: their size grows to
// fit the lists held whole.
func TestListsHeldWholeFitTheirHash(t *testing.T) {
	const likes = 120 // about 2.4 KB of edges
	s, _ := openTestWith(t, func(c *Config) { c.ObjectCache.WholeList, c.ObjectCache.HashSize = likes, 1<<10 })
	u, owner := mustUser(t, s, "u"), mustUser(t, s, "owner")
	board := mustBoard(t, s, owner)
	for range likes {
		if err := s.AddMapping(ctx, model.UserLikes, u, mustPin(t, s, board)); err != nil {
			t.Fatal(err)
		}
	}
	notLiked := []uint64{mustPin(t, s, board), mustPin(t, s, board)}
	if got, err := s.HasMany(ctx, model.UserLikes, u, notLiked[:1]); err != nil || got[0] {
		t.Fatalf("liked = %v (%v), want false", got, err)
	}
	jobs, st := edgeJobs(s), s.objects.cache.EdgeStats()
	hits := st.Hits.Load()
	if got, err := s.HasMany(ctx, model.UserLikes, u, notLiked[1:]); err != nil || got[0] {
		t.Fatalf("liked = %v (%v), want false", got, err)
	}
	if edgeJobs(s) != jobs || st.Hits.Load() != hits+1 {
		t.Fatalf("a pin outside a list held whole: %v statements, %d hits; the whole list was not cached (%d fills left out)",
			edgeJobs(s)-jobs, st.Hits.Load()-hits, st.Full.Load())
	}
}

// With Redis unreachable, checks read MySQL and answer right; while a
// write's invalidation is pending, this server's checks of its user skip
// the cache, whose entry is still the old one.
func TestEdgeCacheRedisAwayAndPending(t *testing.T) {
	b, _ := openTest(t) // on Redis directly
	proxy := startCutProxy(t, testenv.RedisAddr(t))
	a := openSecond(t, b, proxy.ln.Addr().String())
	u, owner := mustUser(t, b, "u"), mustUser(t, b, "owner")
	pin := mustPin(t, b, mustBoard(t, b, owner))
	check := func(s *Store, want bool) {
		t.Helper()
		got, err := s.HasMany(ctx, model.UserLikes, u, []uint64{pin})
		if err != nil || got[0] != want {
			t.Fatalf("liked = %v (%v), want %v", got, err, want)
		}
	}
	check(a, false)
	check(a, false) // cached
	proxy.setCut(true)
	if err := b.AddMapping(ctx, model.UserLikes, u, pin); err != nil {
		t.Fatal(err)
	}
	check(a, true) // Redis away: MySQL
	// b's like invalidated the entry; fill it again as "liked", the entry
	// a's unlike cannot invalidate.
	check(b, true)
	check(b, true)
	if err := a.RemoveMapping(ctx, model.UserLikes, u, pin); err != nil {
		t.Fatal(err)
	}
	if !a.objects.pendingFor(u) {
		t.Fatal("setup: the unlike's invalidation is not pending")
	}
	proxy.setCut(false)
	st := a.objects.cache.EdgeStats()
	hits, misses := st.Hits.Load(), st.Misses.Load()
	check(a, false)
	if !a.objects.pendingFor(u) {
		t.Skip("the invalidation was resent before the check: nothing left to test")
	}
	if st.Hits.Load() != hits || st.Misses.Load() != misses {
		t.Fatal("a check of a user with a pending invalidation read the edge cache")
	}
	// Once resent, every server sees the unlike.
	deadline := time.Now().Add(time.Second)
	for a.objects.pendingFor(u) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	check(b, false)
}

// The edge cache answers the viewer's lists, a user's likes and
// following, and nothing else; every list's rows are written only where
// their owner is recorded as changed (shardsql's
// TestListRowWritesRecordTheirOwner), counted on the wire or not.
func TestEdgeCachedLists(t *testing.T) {
	var got []model.Mapping
	for _, m := range model.Mappings() {
		if edgeCached(m) {
			got = append(got, m)
			if m.From() != idcodec.TypeUser {
				t.Errorf("%s is cached on a %s, not a user", m, m.From())
			}
		}
	}
	if len(got) != 2 || !slices.Contains(got, model.UserLikes) || !slices.Contains(got, model.UserFollowing) {
		t.Fatalf("edge-cached lists %v, want user_likes and user_following", got)
	}
	// Only the invalidation of an object that owns a list (edges, first
	// pages) drops a hash: a user's, a board's; never a comment's.
	for _, typ := range model.ObjectTypes() {
		id := idcodec.MustEncode(3, typ, 1)
		owns := slices.ContainsFunc(model.Mappings(), func(m model.Mapping) bool { return m.From() == typ })
		if got := edgeOwner(id); got != owns {
			t.Errorf("edgeOwner(a %s) = %v, want %v", typ, got, owns)
		}
	}
	if !edgeOwner(idcodec.MustEncode(3, idcodec.TypeUser, 1)) || !edgeOwner(idcodec.MustEncode(3, idcodec.TypeBoard, 1)) || edgeOwner(idcodec.MustEncode(3, idcodec.TypeComment, 1)) {
		t.Error("users and boards own lists, comments none")
	}
}

// HasManyLive reads the objects of the edges it finds in the edges' round
// trip when the cache holds them (no statement at all once warm), never
// an entry older than a write acknowledged before the call, nor one whose
// invalidation this server has not got into Redis, and reports no edge to
// an object that is gone.
func TestHasManyLive(t *testing.T) {
	b, _ := openTest(t) // on Redis directly
	proxy := startCutProxy(t, testenv.RedisAddr(t))
	a := openSecond(t, b, proxy.ln.Addr().String())
	u, owner := mustUser(t, b, "u"), mustUser(t, b, "owner")
	board := mustBoard(t, b, owner)
	p1, p2, p3 := mustPin(t, b, board), mustPin(t, b, board), mustPin(t, b, board)
	for _, p := range []uint64{p1, p2} {
		if err := b.AddMapping(ctx, model.UserLikes, u, p); err != nil {
			t.Fatal(err)
		}
	}
	tos := []uint64{p1, p3, p2}
	check := func(s *Store, want string, version int64) []model.Object {
		t.Helper()
		has, objs, err := s.HasManyLive(ctx, model.UserLikes, u, tos)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for i, h := range has {
			switch {
			case h && objs[i].ID != tos[i]:
				t.Fatalf("edge %d reported with object %d", tos[i], objs[i].ID)
			case h:
				got += "1"
			default:
				got += "0"
			}
		}
		if got != want {
			t.Fatalf("edges %s, want %s", got, want)
		}
		if has[0] && objs[0].Version != version {
			t.Fatalf("pin %d at version %d, want %d", p1, objs[0].Version, version)
		}
		return objs
	}
	check(a, "101", 1) // fills the edges and the objects
	reads, edges, hits := testutil.ToFloat64(a.readStats.Jobs), edgeJobs(a), a.objects.cache.Stats().Hits.Load()
	check(a, "101", 1)
	if testutil.ToFloat64(a.readStats.Jobs) != reads || edgeJobs(a) != edges {
		t.Fatal("a warm check read MySQL")
	}
	if got := a.objects.cache.Stats().Hits.Load() - hits; got != 3 {
		t.Fatalf("a warm check counted %d object hits, want 3 (the user and the two pins liked)", got)
	}
	describe := func(s *Store, text string) int64 {
		t.Helper()
		return edit(t, s, p1, idcodec.TypePin, func(d model.Doc) { d.(*model.PinDoc).Description = text })
	}
	v := describe(b, "through the other server")
	check(a, "101", v)
	// a's own write whose invalidation Redis did not take: the entry b
	// fills again is older, and a must not read it.
	proxy.setCut(true)
	check(b, "101", v)
	v = describe(a, "while a cannot reach Redis")
	proxy.setCut(false)
	check(a, "101", v)
	if err := b.Delete(ctx, p2, idcodec.TypePin, 0); err != nil {
		t.Fatal(err)
	}
	check(a, "100", v)
	// Another server sees a's write once a has resent its invalidation
	// (cacheRetry after Redis is back).
	deadline := time.Now().Add(time.Second)
	for a.objects.pendingFor(p1) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	check(b, "100", v)
}
