package ownercache_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/ownercache"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

// realisticPairs returns n pins spread over the 4096 shards with per-shard
// auto-increment locals starting at 1, each owned by a random user on a
// random shard with a local id below 10M.
func realisticPairs(seed uint64, n int) (pins []uint64, owners map[uint64]uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	next := make(map[uint32]uint64)
	owners = make(map[uint64]uint64, n)
	for len(pins) < n {
		shard := uint32(r.IntN(4096))
		next[shard]++
		pin := pinID(shard, next[shard])
		pins = append(pins, pin)
		owners[pin] = userID(uint32(r.IntN(4096)), 1+r.Uint64N(10_000_000))
	}
	return pins, owners
}

func buckets(pins []uint64) int {
	seen := map[uint64]bool{}
	for _, p := range pins {
		seen[p/ownercache.BucketSize] = true
	}
	return len(seen)
}

// mapLoader is a source of truth backed by a map that records its calls.
type mapLoader struct {
	mu    sync.Mutex
	truth map[uint64]uint64
	calls [][]uint64
	err   error
}

func (l *mapLoader) load(_ context.Context, misses []uint64) (map[uint64]uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, slices.Clone(misses))
	if l.err != nil {
		return nil, l.err
	}
	out := make(map[uint64]uint64, len(misses))
	for _, p := range misses {
		if o, ok := l.truth[p]; ok {
			out[p] = o
		}
	}
	return out, nil
}

func (l *mapLoader) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = nil
}

func (l *mapLoader) loaded() (calls int, pins []uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.calls {
		pins = append(pins, c...)
	}
	return len(l.calls), pins
}

func TestRoundTrip(t *testing.T) {
	client := sharedClient(t)
	prefix := uniquePrefix(t, client)
	c := ownercache.New(client, ownercache.Options{Prefix: prefix})
	ctx := context.Background()

	// The last position of a bucket; boundary+1 is the first of the next.
	boundary := pinID(3429, 5000)/ownercache.BucketSize*ownercache.BucketSize + ownercache.BucketSize - 1
	pins := []uint64{
		241294492511762325, // published vector: pin 3429/7075733
		pinID(0, 1),
		pinID(4095, 1),
		boundary, boundary + 1, boundary - 1,
		pinID(65535, 1<<36-1), // largest pin ID
	}
	pairs := map[uint64]uint64{}
	for i, p := range pins {
		pairs[p] = userID(uint32(i*1000), uint64(i*7919+1))
	}
	pairs[pins[0]] = 241294629943640797 // published user vector

	if err := c.Set(ctx, pairs); err != nil {
		t.Fatalf("Set: %v", err)
	}
	absent := pinID(3429, 7075734)
	query := append(slices.Clone(pins), absent, pins[0]) // a miss and a duplicate
	got, err := c.Get(ctx, query)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	for i, p := range query {
		if want := pairs[p]; got[i] != want {
			t.Errorf("Get[%d] pin %d = %d, want %d", i, p, got[i], want)
		}
	}

	// Every key holds the prefix; keys are buckets, not pins.
	if n, want := countKeys(t, client, prefix), buckets(pins); n != want {
		t.Errorf("%d keys under prefix, want %d buckets", n, want)
	}

	if err := c.Delete(ctx, pins[0], boundary); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	got, err = c.Get(ctx, []uint64{pins[0], boundary, pins[1]})
	if err != nil {
		t.Fatalf("Get after Delete: %v", err)
	}
	if want := []uint64{0, 0, pairs[pins[1]]}; !slices.Equal(got, want) {
		t.Errorf("Get after Delete = %v, want %v", got, want)
	}

	// An ID with reserved bits set is no pin ID: a miss, never a key.
	if got, err := c.Get(ctx, []uint64{1<<63 | pins[1], pins[1]}); err != nil || got[0] != 0 || got[1] != pairs[pins[1]] {
		t.Errorf("Get(reserved-bit ID, pin) = %v, %v", got, err)
	}

	// Empty input: no round trip, no error.
	if got, err := c.Get(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("Get(nil) = %v, %v", got, err)
	}
	if err := c.Set(ctx, nil); err != nil {
		t.Errorf("Set(nil) = %v", err)
	}
	if err := c.Delete(ctx); err != nil {
		t.Errorf("Delete() = %v", err)
	}
}

// TestBinaryValueThatLooksDecimal stores an owner whose encoding is ASCII
// digits. Redis turns such a value into a listpack integer; it must come
// back byte-identical.
func TestBinaryValueThatLooksDecimal(t *testing.T) {
	client := sharedClient(t)
	prefix := uniquePrefix(t, client)
	c := ownercache.New(client, ownercache.Options{Prefix: prefix})
	ctx := context.Background()

	// u = local<<16 | shard = "1234" = 0x31323334 → local 0x3132, shard 0x3334.
	// u = "-123" (0x2d313233) → local 0x2d31, shard 0x3233.
	// u = "0" (0x30) → local 0, shard 0x30.
	pairs := map[uint64]uint64{
		pinID(1, 1): userID(0x3334, 0x3132),
		pinID(1, 2): userID(0x3233, 0x2d31),
		pinID(1, 3): userID(0x30, 0),
	}
	if err := c.Set(ctx, pairs); err != nil {
		t.Fatal(err)
	}
	pins := []uint64{pinID(1, 1), pinID(1, 2), pinID(1, 3)}
	got, err := c.Get(ctx, pins)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range pins {
		if got[i] != pairs[p] {
			t.Errorf("pin %d: got owner %d, want %d", p, got[i], pairs[p])
		}
	}
}

// TestBatchIsOneRoundTrip checks that 1,000 pins over hundreds of buckets are
// read, written and deleted with one pipeline each and no other command.
func TestBatchIsOneRoundTrip(t *testing.T) {
	hook := &countHook{}
	client := sharedClient(t, hook)
	prefix := uniquePrefix(t, client)
	c := ownercache.New(client, ownercache.Options{Prefix: prefix, Timeout: time.Second})
	ctx := context.Background()

	pins, pairs := realisticPairs(1, 1000)
	nb := buckets(pins)
	if nb < 500 {
		t.Fatalf("test data spans only %d buckets", nb)
	}
	if err := client.Ping(ctx).Err(); err != nil { // connect outside the count
		t.Fatal(err)
	}

	steps := []struct {
		name string
		run  func() error
	}{
		{"Set", func() error { return c.Set(ctx, pairs) }},
		{"Get", func() error {
			got, err := c.Get(ctx, pins)
			for i, p := range pins {
				if err == nil && got[i] != pairs[p] {
					t.Errorf("Get pin %d = %d, want %d", p, got[i], pairs[p])
				}
			}
			return err
		}},
		{"Delete", func() error { return c.Delete(ctx, pins...) }},
	}
	for _, s := range steps {
		hook.reset()
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if p, q, n := hook.pipelines.Load(), hook.process.Load(), hook.pipelinedCmds.Load(); p != 1 || q != 0 || n != int64(nb) {
			t.Errorf("%s of 1,000 pins: %d pipelines, %d single commands, %d pipelined commands; want 1, 0, %d (one per bucket)",
				s.name, p, q, n, nb)
		}
	}
	if n := countKeys(t, client, prefix); n != 0 {
		t.Errorf("%d keys left after Delete", n)
	}
}

// TestBatchCommandStats confirms the round-trip count from the server side:
// a 1,000-pin Get runs exactly one HMGET per bucket and nothing else.
func TestBatchCommandStats(t *testing.T) {
	srv := startRedis(t, "--hash-max-listpack-entries", "1024")
	client := newClient(t, srv.Addr())
	c := ownercache.New(client, ownercache.Options{Timeout: time.Second})
	ctx := context.Background()

	pins, pairs := realisticPairs(2, 1000)
	if err := c.Set(ctx, pairs); err != nil {
		t.Fatal(err)
	}
	if err := client.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, pins); err != nil {
		t.Fatal(err)
	}
	stats, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(stats, "\n") {
		if strings.HasPrefix(l, "cmdstat_") && !strings.HasPrefix(l, "cmdstat_config") {
			lines = append(lines, strings.TrimSpace(l))
		}
	}
	want := "cmdstat_hmget:calls=" + strconv.Itoa(buckets(pins)) + ","
	if len(lines) != 1 || !strings.HasPrefix(lines[0], want) {
		t.Errorf("commandstats after one Get = %q, want only %s…", lines, want)
	}
}

func TestLookupFillsThenHits(t *testing.T) {
	client := sharedClient(t)
	prefix := uniquePrefix(t, client)
	reg := prometheus.NewRegistry()
	c := ownercache.New(client, ownercache.Options{Prefix: prefix, Timeout: time.Second, Registerer: reg})
	ctx := context.Background()

	pins, truth := realisticPairs(3, 1000)
	unknown := pinID(12, 1<<35) // not in the source of truth
	delete(truth, pins[0])      // nor is this one
	query := append(slices.Clone(pins), unknown, pins[1])
	l := &mapLoader{truth: truth}

	got, err := c.Lookup(ctx, query, l.load)
	if err != nil {
		t.Fatalf("first Lookup: %v", err)
	}
	if len(got) != len(truth) {
		t.Errorf("first Lookup found %d pins, want %d", len(got), len(truth))
	}
	for p, o := range truth {
		if got[p] != o {
			t.Fatalf("first Lookup pin %d = %d, want %d", p, got[p], o)
		}
	}
	calls, loaded := l.loaded()
	if calls != 1 || len(loaded) != len(pins)+1 { // distinct misses: all pins + unknown
		t.Errorf("first Lookup: load called %d times with %d pins, want once with %d distinct", calls, len(loaded), len(pins)+1)
	}
	if h, m := counter(t, reg, "pinstore_owner_cache_hits_total"), counter(t, reg, "pinstore_owner_cache_misses_total"); h != 0 || m != float64(len(query)) {
		t.Errorf("after first Lookup hits=%v misses=%v, want 0 and %d", h, m, len(query))
	}

	// Second Lookup of the known pins: all hits, load never called.
	l.reset()
	known := pins[1:]
	got, err = c.Lookup(ctx, known, l.load)
	if err != nil {
		t.Fatalf("second Lookup: %v", err)
	}
	if calls, _ := l.loaded(); calls != 0 {
		t.Errorf("second Lookup called load %d times, want 0 (all hits)", calls)
	}
	for _, p := range known {
		if got[p] != truth[p] {
			t.Fatalf("second Lookup pin %d = %d, want %d", p, got[p], truth[p])
		}
	}
	if h := counter(t, reg, "pinstore_owner_cache_hits_total"); h != float64(len(known)) {
		t.Errorf("hits = %v, want %d", h, len(known))
	}

	// Pins the source of truth does not know are never cached.
	l.reset()
	if _, err := c.Lookup(ctx, []uint64{unknown, pins[0]}, l.load); err != nil {
		t.Fatal(err)
	}
	if calls, loaded := l.loaded(); calls != 1 || len(loaded) != 2 {
		t.Errorf("unknown pins: load called %d times with %v, want once with both", calls, loaded)
	}
}

func TestLookupLoadError(t *testing.T) {
	client := sharedClient(t)
	prefix := uniquePrefix(t, client)
	c := ownercache.New(client, ownercache.Options{Prefix: prefix})
	want := model.Errorf(model.EUnavailable, "shard down")
	l := &mapLoader{err: want}
	got, err := c.Lookup(context.Background(), []uint64{pinID(1, 1)}, l.load)
	if !errors.Is(err, want) || got != nil {
		t.Errorf("Lookup = %v, %v; want nil, %v", got, err, want)
	}
}

// TestLookupRedisDownAndBack kills a private Redis under a cache, checks that
// Lookup answers from the source of truth and counts the failure, then
// restarts Redis on the same port and checks that the same Cache (and
// client) use it again.
func TestLookupRedisDownAndBack(t *testing.T) {
	srv := startRedis(t, "--hash-max-listpack-entries", "1024")
	client := newClient(t, srv.Addr())
	reg := prometheus.NewRegistry()
	c := ownercache.New(client, ownercache.Options{Registerer: reg})
	ctx := context.Background()

	pins, truth := realisticPairs(4, 200)
	l := &mapLoader{truth: truth}
	mustLookupAll := func(when string) time.Duration {
		t.Helper()
		start := time.Now()
		got, err := c.Lookup(ctx, pins, l.load)
		d := time.Since(start)
		if err != nil {
			t.Fatalf("%s: Lookup: %v", when, err)
		}
		if len(got) != len(pins) {
			t.Fatalf("%s: Lookup found %d of %d", when, len(got), len(pins))
		}
		for _, p := range pins {
			if got[p] != truth[p] {
				t.Fatalf("%s: pin %d = %d, want %d", when, p, got[p], truth[p])
			}
		}
		return d
	}

	mustLookupAll("fill")
	l.reset()
	mustLookupAll("warm")
	if calls, _ := l.loaded(); calls != 0 {
		t.Fatalf("warm Lookup called load %d times", calls)
	}

	srv.Stop()
	l.reset()
	d := mustLookupAll("redis down")
	if calls, loaded := l.loaded(); calls != 1 || len(loaded) != len(pins) {
		t.Errorf("redis down: load called %d times with %d pins, want once with %d", calls, len(loaded), len(pins))
	}
	if n := counter(t, reg, "pinstore_owner_cache_errors_total", "op", "get"); n < 1 {
		t.Errorf("errors_total{op=get} = %v after a failed read, want ≥ 1", n)
	}
	t.Logf("Lookup of %d pins with Redis down answered from load in %v", len(pins), d)
	if d > time.Second {
		t.Errorf("Lookup with redis down took %v", d)
	}

	srv.Start() // empty: the server keeps nothing across restarts
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.reset()
		mustLookupAll("after restart, filling")
		l.reset()
		mustLookupAll("after restart")
		if calls, _ := l.loaded(); calls == 0 {
			break // served entirely from the restarted Redis
		}
		if time.Now().After(deadline) {
			t.Fatal("cache not used again within 10s of Redis restarting")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n, err := client.DBSize(ctx).Result(); err != nil || n == 0 {
		t.Errorf("restarted Redis holds %d keys (%v), want the refilled buckets", n, err)
	}
}

// TestLookupRedisStalled freezes a private Redis (SIGSTOP): connections stay
// open but nothing answers. Lookup must give up after the per-call timeout
// and answer from the source of truth.
func TestLookupRedisStalled(t *testing.T) {
	srv := startRedis(t)
	client := newClient(t, srv.Addr())
	reg := prometheus.NewRegistry()
	c := ownercache.New(client, ownercache.Options{Timeout: 50 * time.Millisecond, Registerer: reg})
	ctx := context.Background()

	pins, truth := realisticPairs(5, 100)
	l := &mapLoader{truth: truth}
	if _, err := c.Lookup(ctx, pins, l.load); err != nil { // fill, warm the pool
		t.Fatal(err)
	}

	srv.Pause()
	defer srv.Resume()
	start := time.Now()
	got, err := c.Lookup(ctx, pins, l.load)
	d := time.Since(start)
	if err != nil || len(got) != len(pins) {
		t.Fatalf("Lookup with Redis stalled = %d pins, %v", len(got), err)
	}
	t.Logf("Lookup of %d pins with Redis stalled answered from load in %v", len(pins), d)
	if d > 500*time.Millisecond {
		t.Errorf("Lookup with Redis stalled took %v, want about the 50ms timeout", d)
	}
	if n := counter(t, reg, "pinstore_owner_cache_errors_total", "op", "get"); n != 1 {
		t.Errorf("errors_total{op=get} = %v, want 1", n)
	}
}

// TestListpackEncoding checks on a server configured as pinstore requires
// that a full bucket stays a listpack, and how much it costs.
func TestListpackEncoding(t *testing.T) {
	srv := startRedis(t, "--hash-max-listpack-entries", "1024")
	client := newClient(t, srv.Addr())
	c := ownercache.New(client, ownercache.Options{Timeout: time.Second})
	ctx := context.Background()

	pairs := map[uint64]uint64{}
	base := pinID(3429, 1) / 1000 * 1000
	for i := uint64(0); i < ownercache.BucketSize; i++ {
		pairs[base+i] = userID(uint32(i*4), 1_000_000+i*7_919)
	}
	if err := c.Set(ctx, pairs); err != nil {
		t.Fatal(err)
	}
	keys, err := client.Keys(ctx, "*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys = %q, %v; want one bucket", keys, err)
	}
	if n := client.HLen(ctx, keys[0]).Val(); n != ownercache.BucketSize {
		t.Errorf("HLEN = %d, want %d", n, ownercache.BucketSize)
	}
	if enc := client.ObjectEncoding(ctx, keys[0]).Val(); enc != "listpack" {
		t.Errorf("OBJECT ENCODING = %q, want listpack", enc)
	}
	usage := client.MemoryUsage(ctx, keys[0]).Val()
	t.Logf("full bucket %q: MEMORY USAGE %d bytes = %.1f bytes/pair", keys[0], usage, float64(usage)/ownercache.BucketSize)
	if usage > 12*ownercache.BucketSize {
		t.Errorf("a full bucket uses %d bytes, want ≤ %d", usage, 12*ownercache.BucketSize)
	}
}

func TestCheckConfig(t *testing.T) {
	srv := startRedis(t, "--hash-max-listpack-entries", "512")
	client := newClient(t, srv.Addr())
	ctx := context.Background()

	tests := []struct {
		name     string
		set      string
		bucket   int
		wantWarn bool
	}{
		{"512 is below 1000", "512", 0, true},
		{"999 is below 1000", "999", ownercache.BucketSize, true},
		{"1000 is enough", "1000", ownercache.BucketSize, false},
		{"1024 is enough", "1024", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := client.ConfigSet(ctx, "hash-max-listpack-entries", tt.set).Err(); err != nil {
				t.Fatal(err)
			}
			warn, err := ownercache.CheckConfig(ctx, client, tt.bucket)
			if err != nil {
				t.Fatalf("CheckConfig: %v", err)
			}
			if got := warn != ""; got != tt.wantWarn {
				t.Fatalf("CheckConfig at %s = %q, want warning %v", tt.set, warn, tt.wantWarn)
			}
			if tt.wantWarn && (!strings.Contains(warn, tt.set) || !strings.Contains(warn, "5x") || !strings.Contains(warn, srv.Addr())) {
				t.Errorf("warning %q should name the value, the address and the ~5x cost", warn)
			}
		})
	}

	srv.Stop()
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if _, err := ownercache.CheckConfig(ctx, client, 0); !model.IsCode(err, model.EUnavailable) {
		t.Errorf("CheckConfig with Redis down = %v, want code %s", err, model.EUnavailable)
	}
}

// TestNewTwice checks that two caches can share a registry or use their own.
func TestNewTwice(t *testing.T) {
	client := sharedClient(t)
	prefix := uniquePrefix(t, client)
	shared := prometheus.NewRegistry()
	a := ownercache.New(client, ownercache.Options{Prefix: prefix, Registerer: shared})
	b := ownercache.New(client, ownercache.Options{Prefix: prefix, Registerer: shared})
	own := prometheus.NewRegistry()
	d := ownercache.New(client, ownercache.Options{Prefix: prefix, Registerer: own})
	ownercache.New(client, ownercache.Options{Prefix: prefix}) // no registry

	ctx := context.Background()
	pin := pinID(9, 9)
	if err := a.Set(ctx, map[uint64]uint64{pin: userID(9, 9)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*ownercache.Cache{a, b, d} {
		if _, err := c.Get(ctx, []uint64{pin}); err != nil {
			t.Fatal(err)
		}
	}
	if h := counter(t, shared, "pinstore_owner_cache_hits_total"); h != 2 {
		t.Errorf("shared registry hits = %v, want 2", h)
	}
	if h := counter(t, own, "pinstore_owner_cache_hits_total"); h != 1 {
		t.Errorf("own registry hits = %v, want 1", h)
	}
}

var _ redis.Hook = (*countHook)(nil)

// TestDocExample checks the layout example in the package documentation
// against what Redis really holds.
func TestDocExample(t *testing.T) {
	client := sharedClient(t)
	prefix := uniquePrefix(t, client)
	c := ownercache.New(client, ownercache.Options{Prefix: prefix})
	ctx := context.Background()
	const pin, owner = 241294492511762325, 241294629943640797
	if err := c.Set(ctx, map[uint64]uint64{pin: owner}); err != nil {
		t.Fatal(err)
	}
	got, err := client.HGet(ctx, prefix+"-qrI-VmsH", "325").Result()
	if err != nil || got != "\x02\xdd\x0de" {
		t.Errorf("HGET %s-qrI-VmsH 325 = %q, %v; want %q", prefix, got, err, "\x02\xdd\x0de")
	}
}
