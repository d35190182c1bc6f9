package objcache

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
)

func user(local uint64) uint64 { return idcodec.MustEncode(7, idcodec.TypeUser, local) }

// readEdges is ReadEdges that fails the test on an error.
func readEdges(t *testing.T, c *Cache, from uint64, tos ...uint64) EdgeRead {
	t.Helper()
	r, err := c.ReadEdges(ctx, from, model.UserLikes, tos)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A reader takes the generation, fills what it read; a later read hits.
// A fill whose generation an invalidation took away is refused, and the
// next reader's generation is a new one.
func testEdgesFillUnderTheirGeneration(t *testing.T, newCache newCacheFunc) {
	c, client := newCache(t, Options{TTL: time.Minute})
	u, p1, p2 := user(1), pin(1, 1, 0).ID, pin(2, 1, 0).ID
	r := readEdges(t, c, u, p1, p2)
	if r.Gen == "" || r.Found[0] != EdgeUnknown || r.Found[1] != EdgeUnknown || r.ObjectHit {
		t.Fatalf("first read: %+v", r)
	}
	if ttl := client.TTL(ctx, c.edgeKey(u)).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("a new edge hash lives %v, want the entries' TTL", ttl)
	}
	c.FillEdges(ctx, u, model.UserLikes, r.Gen, []uint64{p1, p2}, []bool{true, false}, EdgeUnknown)
	r2 := readEdges(t, c, u, p1, p2, pin(3, 1, 0).ID)
	if r2.Gen != r.Gen || string(r2.Found) != "10\x00" {
		t.Fatalf("after the fill: gen %q (was %q), found %q", r2.Gen, r.Gen, r2.Found)
	}
	if got := c.EdgeStats().Hits.Load(); got != 2 {
		t.Fatalf("%d edge hits, want 2", got)
	}
	// Another list of the same user is another field.
	if r, err := c.ReadEdges(ctx, u, model.UserFollowing, []uint64{p1}); err != nil || r.Found[0] != EdgeUnknown {
		t.Fatalf("user_following read user_likes' field: %+v %v", r, err)
	}
	// A write commits and invalidates; then the slow reader fills.
	if err := c.Invalidate(ctx, u); err != nil {
		t.Fatal(err)
	}
	c.FillEdges(ctx, u, model.UserLikes, r2.Gen, []uint64{p1}, []bool{true}, EdgeUnknown)
	if c.EdgeStats().Refused.Load() != 1 {
		t.Fatalf("%d fills refused, want 1", c.EdgeStats().Refused.Load())
	}
	r3 := readEdges(t, c, u, p1)
	if r3.Gen == "" || r3.Gen == r.Gen || r3.Found[0] != EdgeUnknown || r3.Whole != EdgeUnknown {
		t.Fatalf("after the invalidation: %+v (old gen %q)", r3, r.Gen)
	}
	// A list filled whole answers for entries it does not hold.
	c.FillEdges(ctx, u, model.UserLikes, r3.Gen, []uint64{p2}, []bool{true}, EdgePresent)
	if r := readEdges(t, c, u, p1, p2); r.Whole != EdgePresent || string(r.Found) != "01" {
		t.Fatalf("a whole list: %+v", r)
	}
	if r, _ := c.ReadEdges(ctx, u, model.UserFollowing, []uint64{p1}); r.Whole != EdgeUnknown || r.Found[0] != EdgeUnknown {
		t.Fatalf("user_likes held whole made user_following whole: %+v", r)
	}
	// A list too long to hold whole says so, and its entries stay unknown.
	if err := c.Invalidate(ctx, u); err != nil {
		t.Fatal(err)
	}
	r4 := readEdges(t, c, u, p1)
	c.FillEdges(ctx, u, model.UserLikes, r4.Gen, nil, nil, EdgeAbsent)
	if r := readEdges(t, c, u, p1); r.Whole != EdgeAbsent || r.Found[0] != EdgeUnknown {
		t.Fatalf("a list too long to hold whole: %+v", r)
	}
}

// ReadEdges reads the owner's entry in the same round trip; Invalidate
// drops the entry and the edges together.
func testEdgesGoWithTheirObject(t *testing.T, newCache newCacheFunc) {
	c, _ := newCache(t, Options{})
	ids := fillPins(t, c, 40, 1) // a pin is the owner here: the cache does not care
	from, to := ids[0], user(9)
	r := readEdges(t, c, from, to)
	if !r.ObjectHit || r.Object.Version != 1 {
		t.Fatalf("the owner's entry: %+v", r)
	}
	c.FillEdges(ctx, from, model.UserLikes, r.Gen, []uint64{to}, []bool{true}, EdgeUnknown)
	if err := c.Invalidate(ctx, from); err != nil {
		t.Fatal(err)
	}
	if r := readEdges(t, c, from, to); r.ObjectHit || r.Found[0] != EdgeUnknown {
		t.Fatalf("after the invalidation: %+v", r)
	}
}

// ReadEdgesAndTargets reads the entries of tos with the edges, in the
// same round trip: the cached ones as Get returns them, the others as
// misses, and no edge or generation differs from ReadEdges'.
func testEdgesWithTheirTargets(t *testing.T, newCache newCacheFunc) {
	c, _ := newCache(t, Options{})
	ids := fillPins(t, c, 3, 3) // cached pins
	from, uncached := user(4), pin(9, 9, 0).ID
	tos := []uint64{ids[0], uncached, ids[2]}
	r, err := c.ReadEdgesAndTargets(ctx, from, model.UserLikes, tos)
	if err != nil {
		t.Fatal(err)
	}
	c.FillEdges(ctx, from, model.UserLikes, r.Gen, tos, []bool{true, true, false}, EdgeUnknown)
	hitsBefore := c.Stats().Hits.Load()
	r, err = c.ReadEdgesAndTargets(ctx, from, model.UserLikes, tos)
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Found) != "110" || len(r.Targets) != len(tos) {
		t.Fatalf("edges %q, %d targets for %d ids", r.Found, len(r.Targets), len(tos))
	}
	hits, _, err := c.Get(ctx, []uint64{ids[0], ids[2]})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range tos {
		got, want := r.Targets[i], hits[id]
		if got.ID != want.ID || got.Version != want.Version || string(got.Doc) != string(want.Doc) || got.Type != want.Type {
			t.Fatalf("target %d (%d): %+v, want %+v", i, id, got, want)
		}
	}
	if got := c.Stats().Hits.Load() - hitsBefore; got != 2 { // the targets are the caller's to count, the check by Get counts its own
		t.Fatalf("%d hits counted, want 2", got)
	}
	c.CountHits(1)
	if got := c.Stats().Hits.Load() - hitsBefore; got != 3 {
		t.Fatalf("%d hits counted after CountHits(1), want 3", got)
	}
	plain := readEdges(t, c, from, tos...)
	if plain.Gen != r.Gen || string(plain.Found) != string(r.Found) || plain.Targets != nil {
		t.Fatalf("ReadEdges %+v beside ReadEdgesAndTargets %+v", plain, r)
	}
	// An invalidated target is a miss.
	if err := c.Invalidate(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if r, err := c.ReadEdgesAndTargets(ctx, from, model.UserLikes, tos); err != nil || r.Targets[0].ID != 0 || r.Targets[2].ID != ids[2] {
		t.Fatalf("after invalidating the first target: %+v, %v", r.Targets, err)
	}
}

// Redis away: ReadEdges fails (the caller reads MySQL).
func TestEdgesRedisAway(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer client.Close()
	c := New(client, Options{Registerer: prometheus.NewRegistry()})
	if _, err := c.ReadEdges(ctx, user(1), model.UserLikes, []uint64{user(2)}); err == nil {
		t.Fatal("ReadEdges with Redis away: no error")
	}
}

// Concurrent edge reads share pipelines, and each caller gets its own
// user's edges: user u likes the pins whose local id u divides.
func testCoalescedEdgeReadsAnswerEachCaller(t *testing.T, newCache newCacheFunc) {
	c, client := newCache(t, Options{})
	const users, pins = 8, 12
	var tos []uint64
	for p := range pins {
		tos = append(tos, pin(uint64(p+1), 1, 0).ID)
	}
	likes := func(u, p int) bool { return (p+1)%(u+1) == 0 }
	for u := range users {
		r := readEdges(t, c, user(uint64(u+1)), tos...)
		has := make([]bool, pins)
		for p := range has {
			has[p] = likes(u, p)
		}
		c.FillEdges(ctx, user(uint64(u+1)), model.UserLikes, r.Gen, tos, has, EdgeUnknown)
	}
	var sent atomic.Int64
	client.AddHook(countHook{&sent})
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for k := range 20 {
				u := (g + k) % users
				r, err := c.ReadEdges(ctx, user(uint64(u+1)), model.UserLikes, tos)
				if err != nil {
					t.Error(err)
					return
				}
				for p, f := range r.Found {
					if want := likes(u, p); f != EdgeAbsent && f != EdgePresent || (f == EdgePresent) != want {
						t.Errorf("caller %d, user %d, pin %d: %q, want liked=%v", g, u, p, f, want)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	t.Logf("64×20 edge reads in %d Redis round trips", sent.Load())
	if sent.Load() >= 64*20 {
		t.Fatalf("%d round trips for %d edge reads: not coalesced", sent.Load(), 64*20)
	}
}
