package objcache

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

var ctx = context.Background()

// newCacheFunc returns a Cache under a prefix of the test's own, and the
// client it uses.
type newCacheFunc func(t testing.TB, opts Options) (*Cache, redis.UniversalClient)

// protocol is what the cache promises, run on one Redis (TestProtocol) and
// on a Redis Cluster (TestProtocolOnACluster).
var protocol = []struct {
	name string
	test func(*testing.T, newCacheFunc)
}{
	{"LeaseAndFill", testLeaseAndFill},
	{"InvalidationRefusesAStaleFill", testInvalidationRefusesAStaleFill},
	{"GetOneIsGetOfOne", testGetOneIsGetOfOne},
	{"TTLAndMany", testTTLAndMany},
	{"InvalidateWithOthersWrites", testInvalidateWithOthersWrites},
	{"CoalescedReadsAnswerEachCaller", testCoalescedReadsAnswerEachCaller},
	{"EdgesFillUnderTheirGeneration", testEdgesFillUnderTheirGeneration}, // edges_test.go
	{"EdgesGoWithTheirObject", testEdgesGoWithTheirObject},
	{"EdgesReadTheObjectsChecked", testEdgesReadTheObjectsChecked},
	{"PagesFillUnderTheirGeneration", testPagesFillUnderTheirGeneration}, // pages_test.go
	{"HashesHoldAtMostTheirSize", testHashesHoldAtMostTheirSize},         // pages_test.go
	{"CoalescedEdgeReadsAnswerEachCaller", testCoalescedEdgeReadsAnswerEachCaller},
}

func TestProtocol(t *testing.T) {
	for _, p := range protocol {
		t.Run(p.name, func(t *testing.T) { p.test(t, newCache) })
	}
}

// The same protocol on a Redis Cluster of three masters: a batch's keys
// fall on many slots and every node, so reads, leases, fills and
// invalidations each go as one pipeline that the client splits per node.
func TestProtocolOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	addrs := testenv.RedisCluster(t)
	var roundTrips atomic.Int64 // to any node
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	client.OnNewNode(func(node *redis.Client) { node.AddHook(countHook{&roundTrips}) })
	t.Cleanup(func() { client.Close() })
	newClusterCache := func(t testing.TB, opts Options) (*Cache, redis.UniversalClient) {
		opts.Prefix = testenv.UniquePrefix(t, "oc") + ":c:"
		if opts.Timeout == 0 {
			opts.Timeout = 2 * time.Second
		}
		if opts.Registerer == nil {
			opts.Registerer = prometheus.NewRegistry()
		}
		return New(client, opts), client
	}
	for _, p := range protocol {
		t.Run(p.name, func(t *testing.T) { p.test(t, newClusterCache) })
	}

	// Per-node batching: 300 ids spread over every node are read with one
	// round trip per node, and their entries really are on every node.
	c, _ := newClusterCache(t, Options{})
	ids := fillPins(t, c, 5000, 300)
	roundTrips.Store(0)
	hits, _, err := c.Get(ctx, ids)
	if err != nil || len(hits) != len(ids) {
		t.Fatalf("%d hits of %d: %v", len(hits), len(ids), err)
	}
	if n := roundTrips.Load(); n != int64(len(addrs)) {
		t.Errorf("reading %d entries took %d round trips, want one per node (%d)", len(ids), n, len(addrs))
	}
	for _, addr := range addrs {
		nc := redis.NewClient(&redis.Options{Addr: addr})
		n, err := nc.DBSize(ctx).Result()
		nc.Close()
		if err != nil || n == 0 {
			t.Errorf("node %s holds %d keys (%v): the entries are not spread", addr, n, err)
		}
	}
}

func newCache(t testing.TB, opts Options) (*Cache, redis.UniversalClient) {
	t.Helper()
	addr := testenv.RedisAddr(t)
	prefix := testenv.UniquePrefix(t, "oc")
	t.Cleanup(func() { testenv.DropKeys(t, addr, prefix) })
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	opts.Prefix = prefix + ":c:"
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Second // a busy machine is not a Redis fault
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	c := New(client, opts)
	t.Cleanup(c.Close) // before the client's (cleanups run last first)
	return c, client
}

// fillPins caches n pins, locals first…first+n-1 (version 1, pin i with
// i likes), through a miss, its leases and a fill, and returns their ids.
func fillPins(tb testing.TB, c *Cache, first uint64, n int) []uint64 {
	tb.Helper()
	var objs []model.Object
	var ids []uint64
	for i := range n {
		o := pin(first+uint64(i), 1, int64(i))
		objs, ids = append(objs, o), append(ids, o.ID)
	}
	_, leases, err := c.Get(ctx, ids)
	if err != nil || len(leases) != n {
		tb.Fatalf("leases %d of %d: %v", len(leases), n, err)
	}
	c.Fill(ctx, objs, leases)
	return ids
}

func pin(local uint64, version int64, likes int64) model.Object {
	at := time.Date(2026, 11, 23, 8, 0, 0, 123456000, time.UTC)
	return model.Object{ID: idcodec.MustEncode(7, idcodec.TypePin, local), Type: idcodec.TypePin, Version: version,
		CreatedAt: at, UpdatedAt: at.Add(time.Duration(version) * time.Second), Doc: []byte(`{"board_id":"1","owner_id":"2","secret":true,"active":true}`), Counts: []int64{likes, 1, 0}, Flags: model.FlagActive | model.FlagSecret}
}

func TestEncodeRoundTrip(t *testing.T) {
	for _, o := range []model.Object{pin(1, 3, 9), {ID: idcodec.MustEncode(1, idcodec.TypeComment, 5), Type: idcodec.TypeComment, Version: 1, Doc: []byte(`{}`)}} {
		got, ok := decode(o.ID, encode(o))
		if !ok || got.Version != o.Version || !got.CreatedAt.Equal(o.CreatedAt) || !got.UpdatedAt.Equal(o.UpdatedAt) ||
			string(got.Doc) != string(o.Doc) || !slices.Equal(got.Counts, o.Counts) || got.Type != o.Type || got.Flags != o.Flags {
			t.Fatalf("round trip of %+v: %+v, %v", o, got, ok)
		}
	}
	short := pin(1, 3, 9)
	short.Counts = short.Counts[:2] // cached by a version whose pins carried fewer counts
	// An entry of the layout before flags: 'V', version, times, no counts, the document.
	old := append([]byte{'V'}, make([]byte, 25)...)
	old = append(old, `{"active":true}`...)
	for _, bad := range [][]byte{nil, []byte("Labc"), []byte("V12"), encode(short), old} {
		if _, ok := decode(1, bad); ok {
			t.Fatalf("%q decoded", bad)
		}
	}
}

// A miss takes a lease; the filler's copy becomes a hit; a second reader
// meanwhile gets neither a hit nor a lease.
func testLeaseAndFill(t *testing.T, newCache newCacheFunc) {
	c, _ := newCache(t, Options{})
	o := pin(1, 1, 0)
	hits, leases, err := c.Get(ctx, []uint64{o.ID})
	if err != nil || len(hits) != 0 || leases[o.ID] == "" {
		t.Fatalf("first miss: %v %v %v", hits, leases, err)
	}
	_, other, _ := c.Get(ctx, []uint64{o.ID})
	if len(other) != 0 {
		t.Fatalf("a second reader got a lease too: %v", other)
	}
	c.Fill(ctx, []model.Object{o}, leases)
	hits, _, err = c.Get(ctx, []uint64{o.ID})
	if err != nil || hits[o.ID].Version != 1 {
		t.Fatalf("after the fill: %v %v", hits, err)
	}
}

// GetOne keeps Get's protocol for one id: a miss takes the lease, a
// second reader gets neither, the fill is a hit, and a fill after an
// invalidation is refused.
func testGetOneIsGetOfOne(t *testing.T, newCache newCacheFunc) {
	c, _ := newCache(t, Options{})
	o := pin(3, 1, 0)
	_, hit, lease, err := c.GetOne(ctx, o.ID)
	if err != nil || hit || lease == "" {
		t.Fatalf("first miss: hit %v lease %q %v", hit, lease, err)
	}
	if _, hit, other, _ := c.GetOne(ctx, o.ID); hit || other != "" {
		t.Fatalf("a second reader: hit %v lease %q", hit, other)
	}
	c.Fill(ctx, []model.Object{o}, map[uint64]Lease{o.ID: lease})
	got, hit, _, err := c.GetOne(ctx, o.ID)
	if err != nil || !hit || got.Version != 1 || got.ID != o.ID {
		t.Fatalf("after the fill: %+v hit %v %v", got, hit, err)
	}
	if err := c.Invalidate(ctx, o.ID); err != nil {
		t.Fatal(err)
	}
	_, hit, lease, _ = c.GetOne(ctx, o.ID)
	if hit || lease == "" {
		t.Fatalf("after the invalidation: hit %v lease %q", hit, lease)
	}
	if err := c.Invalidate(ctx, o.ID); err != nil { // a write while this reader reads MySQL
		t.Fatal(err)
	}
	c.Fill(ctx, []model.Object{o}, map[uint64]Lease{o.ID: lease})
	if _, hit, _, _ := c.GetOne(ctx, o.ID); hit {
		t.Fatal("a fill after an invalidation was taken")
	}
	if hits := c.Stats().Hits.Load(); hits != 1 {
		t.Fatalf("%d hits counted, want 1", hits)
	}
}

// The heart of it: a reader that missed, then read an old copy, cannot
// fill once a write has invalidated the entry, so no reader after the
// write sees the old copy.
func testInvalidationRefusesAStaleFill(t *testing.T, newCache newCacheFunc) {
	reg := prometheus.NewRegistry()
	c, _ := newCache(t, Options{Registerer: reg})
	old := pin(2, 1, 0)
	_, leases, err := c.Get(ctx, []uint64{old.ID})
	if err != nil || leases[old.ID] == "" {
		t.Fatalf("miss: %v %v", leases, err)
	}
	// A write commits version 2 and invalidates; then the slow reader fills
	// the version 1 it read before.
	if err := c.Invalidate(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	c.Fill(ctx, []model.Object{old}, leases)
	if n := testutil.ToFloat64(c.refused); n != 1 {
		t.Fatalf("%v fills refused, want 1", n)
	}
	hits, leases2, _ := c.Get(ctx, []uint64{old.ID})
	if len(hits) != 0 || leases2[old.ID] == "" {
		t.Fatalf("after a refused fill the entry must be a miss with a new lease: %v %v", hits, leases2)
	}
	c.Fill(ctx, []model.Object{pin(2, 2, 0)}, leases2)
	if hits, _, _ := c.Get(ctx, []uint64{old.ID}); hits[old.ID].Version != 2 {
		t.Fatalf("the new reader's fill: %v", hits)
	}
	// Invalidating an entry drops it.
	if err := c.Invalidate(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	if hits, _, _ := c.Get(ctx, []uint64{old.ID}); len(hits) != 0 {
		t.Fatalf("invalidated entry still read: %v", hits)
	}
}

// Entries live TTL; many keys go in one round trip per call.
func testTTLAndMany(t *testing.T, newCache newCacheFunc) {
	c, client := newCache(t, Options{TTL: 300 * time.Millisecond})
	ids := fillPins(t, c, 100, 50)
	hits, _, _ := c.Get(ctx, ids)
	if len(hits) != 50 || hits[ids[7]].Counts[0] != 7 {
		t.Fatalf("%d hits", len(hits))
	}
	if ttl := client.PTTL(ctx, c.key(ids[0])).Val(); ttl <= 0 || ttl > 300*time.Millisecond {
		t.Fatalf("entry TTL %v", ttl)
	}
	time.Sleep(400 * time.Millisecond)
	if hits, _, _ := c.Get(ctx, ids); len(hits) != 0 {
		t.Fatalf("%d entries outlived their TTL", len(hits))
	}
}

// InvalidateWith sends another cache's writes in the invalidation's round
// trip and lets them read their results once it is sent; their failure
// is theirs, not the invalidation's.
func testInvalidateWithOthersWrites(t *testing.T, newCache newCacheFunc) {
	c, client := newCache(t, Options{})
	ids := fillPins(t, c, 300, 20) // on every node of a cluster
	str, hash := c.prefix+"other:str", c.prefix+"other:hash"
	if err := client.Set(ctx, str, "a string", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var wrong, right error
	calls := 0
	err := c.InvalidateWith(ctx, func(ctx context.Context, pipe redis.Pipeliner) func() error {
		bad := pipe.HSet(ctx, str, "f", "v") // WRONGTYPE: str holds a string
		good := pipe.HSet(ctx, hash, "f", "v")
		return func() error { calls++; wrong, right = bad.Err(), good.Err(); return wrong }
	}, ids...)
	if err != nil {
		t.Fatalf("InvalidateWith: %v; another cache's failed write is not the invalidation's", err)
	}
	if calls != 1 || wrong == nil || right != nil {
		t.Errorf("also's func called %d times, saw %v and %v; want once, after the round trip: WRONGTYPE, then nil", calls, wrong, right)
	}
	if v, err := client.HGet(ctx, hash, "f").Result(); err != nil || v != "v" {
		t.Errorf("the other cache's write: %q, %v", v, err)
	}
	if hits, _, err := c.Get(ctx, ids); err != nil || len(hits) != 0 {
		t.Errorf("%d of %d entries left after InvalidateWith (%v)", len(hits), len(ids), err)
	}
}

// Redis away: Get fails (the caller reads MySQL), Invalidate reports it.
func TestRedisAway(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer client.Close()
	c := New(client, Options{Registerer: prometheus.NewRegistry()})
	if _, _, err := c.Get(ctx, []uint64{1}); err == nil {
		t.Fatal("Get with Redis away: no error")
	}
	if err := c.Invalidate(ctx, 1); err == nil {
		t.Fatal("Invalidate with Redis away: no error")
	}
}

// Concurrent reads are coalesced into shared commands, and each caller
// still gets exactly its own entries.
func testCoalescedReadsAnswerEachCaller(t *testing.T, newCache newCacheFunc) {
	c, client := newCache(t, Options{})
	var objs []model.Object
	var ids []uint64
	for i := range 200 {
		o := pin(uint64(1000+i), int64(i+1), int64(i))
		objs, ids = append(objs, o), append(ids, o.ID)
	}
	_, leases, err := c.Get(ctx, ids)
	if err != nil || len(leases) != len(ids) {
		t.Fatalf("leases %d %v", len(leases), err)
	}
	c.Fill(ctx, objs, leases)
	var sent atomic.Int64 // round trips this client made
	client.AddHook(countHook{&sent})
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Go(func() {
			for r := range 20 {
				i := (g*7 + r*13) % (len(ids) - 3)
				want := ids[i : i+3]
				hits, _, err := c.Get(ctx, want)
				if err != nil {
					t.Error(err)
					return
				}
				for j, id := range want {
					if o, ok := hits[id]; !ok || o.Version != int64(i+j+1) {
						t.Errorf("caller %d asked for %d: got %+v", g, id, o)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	cmds := sent.Load()
	t.Logf("64×20 reads in %d Redis round trips", cmds)
	if cmds >= 64*20 {
		t.Fatalf("%d round trips for %d reads: not coalesced", cmds, 64*20)
	}
}

// countHook counts the round trips a client (or a cluster's node) makes:
// one per command, one per pipeline.
type countHook struct{ n *atomic.Int64 }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

// A Redis that accepts connections and never answers (paused, or a
// partition that drops replies): every read, the one a lane sends and the
// ones queued behind it, fails within a few timeouts, and the caller reads
// MySQL instead.
func TestGetIsBoundedByTheTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, conn := range held {
			conn.Close()
		}
	}()
	client := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ContextTimeoutEnabled: true, MaxRetries: -1, ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	defer client.Close()
	const timeout = 100 * time.Millisecond
	c := New(client, Options{Timeout: timeout, Registerer: prometheus.NewRegistry()})
	start := time.Now()
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			if _, _, err := c.Get(ctx, []uint64{uint64(i + 1)}); err == nil {
				t.Errorf("Get from a Redis that never answers: no error")
			}
		})
	}
	wg.Wait()
	if took := time.Since(start); took > 20*timeout {
		t.Fatalf("16 reads from a Redis that never answers took %v; the timeout is %v", took, timeout)
	}
}
