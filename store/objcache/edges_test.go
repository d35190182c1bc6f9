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
	r, err := c.ReadEdges(ctx, from, model.UserLikes, tos, false)
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
	if r, err := c.ReadEdges(ctx, u, model.UserFollowing, []uint64{p1}, false); err != nil || r.Found[0] != EdgeUnknown {
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
	if r, _ := c.ReadEdges(ctx, u, model.UserFollowing, []uint64{p1}, false); r.Whole != EdgeUnknown || r.Found[0] != EdgeUnknown {
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

// Asked for them, ReadEdges reads the entries of the objects checked in
// the same round trip: a hit for an object the cache holds, none for one
// it lacks or whose entry an invalidation dropped.
func testEdgesReadTheObjectsChecked(t *testing.T, newCache newCacheFunc) {
	c, _ := newCache(t, Options{})
	ids := fillPins(t, c, 60, 2)
	from, missing := user(12), pin(3, 60, 0).ID
	tos := []uint64{ids[1], missing, ids[0]}
	r, err := c.ReadEdges(ctx, from, model.UserLikes, tos, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Objects) != 3 || r.Objects[0].ID != ids[1] || r.Objects[1].ID != 0 || r.Objects[2].ID != ids[0] || r.Objects[0].Version != 1 {
		t.Fatalf("objects read with the edges: %+v", r.Objects)
	}
	if err := c.Invalidate(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	r, err = c.ReadEdges(ctx, from, model.UserLikes, tos, true)
	if err != nil {
		t.Fatal(err)
	}
	if r.Objects[0].ID != ids[1] || r.Objects[2].ID != 0 {
		t.Fatalf("after invalidating %d: %+v", ids[0], r.Objects)
	}
	if r := readEdges(t, c, from, ids[1]); r.Objects != nil {
		t.Fatalf("objects read when not asked for: %+v", r.Objects)
	}
}

// With EdgeOwners, an invalidation drops the edge hash of an object that
// may own one and sends nothing for the edges of one that cannot.
func TestInvalidateDropsOnlyEdgeOwnersEdges(t *testing.T) {
	owner := user(11)
	c, client := newCache(t, Options{EdgeOwners: func(id uint64) bool { return id == owner }})
	other := fillPins(t, c, 50, 1)[0]
	for _, id := range []uint64{owner, other} {
		if err := client.HSet(ctx, c.edgeKey(id), "_g", 1).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Invalidate(ctx, owner, other); err != nil {
		t.Fatal(err)
	}
	if n := client.Exists(ctx, c.edgeKey(owner)).Val(); n != 0 {
		t.Fatal("the edge owner's edge hash outlived its invalidation")
	}
	if n := client.Exists(ctx, c.edgeKey(other)).Val(); n != 1 {
		t.Fatal("an invalidation sent a delete for the edges of an object that owns none")
	}
	if n := client.Exists(ctx, c.key(other)).Val(); n != 0 {
		t.Fatal("the other object's entry outlived its invalidation")
	}
}

// Redis away: ReadEdges fails (the caller reads MySQL).
func TestEdgesRedisAway(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer client.Close()
	c := New(client, Options{Registerer: prometheus.NewRegistry()})
	if _, err := c.ReadEdges(ctx, user(1), model.UserLikes, []uint64{user(2)}, false); err == nil {
		t.Fatal("ReadEdges with Redis away: no error")
	}
}

// Concurrent edge reads share pipelines, and each caller gets its own
// user's edges: user u likes the pins whose local id u divides.
func testCoalescedEdgeReadsAnswerEachCaller(t *testing.T, newCache newCacheFunc) {
	c, client := newCache(t, Options{})
	const users, pins = 8, 12
	var tos []uint64
	var objs []model.Object
	for p := range pins {
		o := pin(uint64(p+1), int64(p+1), 0) // version p+1: each caller must get its own entries
		tos, objs = append(tos, o.ID), append(objs, o)
	}
	if _, leases, err := c.Get(ctx, tos); err != nil || len(leases) != pins {
		t.Fatalf("leases %d of %d: %v", len(leases), pins, err)
	} else {
		c.Fill(ctx, objs, leases)
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
				objects := k%2 == 0 // and the pins' entries, read with the batch's others
				r, err := c.ReadEdges(ctx, user(uint64(u+1)), model.UserLikes, tos[u%3:], objects)
				if err != nil {
					t.Error(err)
					return
				}
				for i, o := range r.Objects {
					if o.ID != tos[u%3+i] || o.Version != int64(u%3+i+1) {
						t.Errorf("caller %d, user %d: entry %d is %d version %d, want %d version %d", g, u, i, o.ID, o.Version, tos[u%3+i], u%3+i+1)
						return
					}
				}
				if objects && len(r.Objects) != pins-u%3 {
					t.Errorf("caller %d: %d entries, want %d", g, len(r.Objects), pins-u%3)
					return
				}
				for i, f := range r.Found {
					p := u%3 + i
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
