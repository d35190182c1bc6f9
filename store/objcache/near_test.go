package objcache

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/pinstore/pinstore/internal/testenv"
)

const testFresh = 200 * time.Millisecond

// nearPair returns two servers' caches with near copies on one Redis
// (each with its own client), both members, past the membership's first
// Wait.
func nearPair(t testing.TB) (a, b *Cache, client redis.UniversalClient) {
	t.Helper()
	addr := testenv.RedisAddr(t)
	prefix := testenv.UniquePrefix(t, "near")
	t.Cleanup(func() { testenv.DropKeys(t, addr, prefix) })
	open := func() *Cache {
		client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { client.Close() })
		c := New(client, Options{Prefix: prefix + ":c:", Timeout: 2 * time.Second, Near: 100, NearFresh: testFresh})
		t.Cleanup(c.Close)
		return c
	}
	a, b = open(), open()
	waitServing(t, a)
	waitServing(t, b)
	time.Sleep(a.near.wait) // the membership is Wait old: a write waits for acknowledgements only
	return a, b, a.client
}

func waitServing(t testing.TB, c *Cache) {
	t.Helper()
	for start := time.Now(); !c.near.serving(); time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the near copy never began to serve")
		}
	}
}

// intoNear caches pin local in c's near copy (its second read answers
// from it) and returns its id.
func intoNear(t *testing.T, c *Cache, local uint64) uint64 {
	t.Helper()
	id := fillPins(t, c, local, 1)[0]
	if nearHit(t, c, id, 1) {
		t.Fatal("the first read from Redis was answered by the near copy")
	}
	if !nearHit(t, c, id, 1) {
		t.Fatal("the second read of a cached pin did not come from the near copy")
	}
	return id
}

// nearHit reports whether c answers id from its near copy, and asserts
// the version it answers.
func nearHit(t *testing.T, c *Cache, id uint64, version int64) bool {
	t.Helper()
	before := c.stats.NearHits.Load()
	o, hit, _, err := c.GetOne(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if c.stats.NearHits.Load() == before {
		return false
	}
	if !hit || o.Version != version {
		t.Fatalf("near copy answered v%d (hit %v), want v%d", o.Version, hit, version)
	}
	return true
}

// A write on one server has reached every server's near copy by the time
// its invalidation returns, and the other servers acknowledged it: the
// writer did not wait them out.
func TestNearWriteReachesEveryServerBeforeItReturns(t *testing.T) {
	a, b, _ := nearPair(t)
	ids := fillPins(t, a, 1, 3)
	for _, id := range ids {
		if nearHit(t, a, id, 1) {
			t.Fatal("the first read from Redis was answered by the near copy")
		}
		if !nearHit(t, a, id, 1) {
			t.Fatal("the second read of a cached pin did not come from the near copy")
		}
	}
	hits, _, err := a.Get(ctx, ids)
	if err != nil || len(hits) != 3 || a.stats.NearHits.Load() != 6 {
		t.Fatalf("Get of the near pins: %d hits, %d from the near copy (%v)", len(hits), a.stats.NearHits.Load(), err)
	}
	start := time.Now()
	if err := b.Invalidate(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if nearHit(t, a, ids[0], 0) {
		t.Fatal("another server's near copy answered an object whose invalidation had returned")
	}
	if !nearHit(t, a, ids[1], 1) {
		t.Fatal("an invalidation dropped another object from the near copy")
	}
	if n := testutil.ToFloat64(b.near.lapsed); n != 0 || took >= b.near.wait {
		t.Fatalf("the writer waited %v (%v waits out): the member's acknowledgement did not reach it", took, n)
	}
	// The writer's own copy goes too.
	id := intoNear(t, b, 10)
	if err := b.Invalidate(ctx, id); err != nil {
		t.Fatal(err)
	}
	if nearHit(t, b, id, 0) {
		t.Fatal("the writer's near copy answered what it had just invalidated")
	}
}

// A member that stops hearing Redis (its receive loop held, as a paused
// process or a partition would) stops serving its copy before the writer
// stops waiting for it.
func TestNearStoppedMemberStopsServingBeforeTheWriterGoesOn(t *testing.T) {
	a, b, _ := nearPair(t)
	id := intoNear(t, a, 1)
	a.near.pause.Lock()
	start := time.Now()
	if err := b.Invalidate(ctx, id); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if a.near.serving() {
		t.Fatalf("the writer went on after %v while the member that missed its invalidation still serves", took)
	}
	if nearHit(t, a, id, 0) {
		t.Fatal("the stopped member answered from its near copy")
	}
	if n := testutil.ToFloat64(b.near.lapsed); n != 1 || took < testFresh {
		t.Fatalf("the writer took %v and waited out %v members; want one wait of at least %v", took, n, testFresh)
	}
	a.near.pause.Unlock()
	waitServing(t, a)
	if _, ok := a.near.get(id); ok {
		t.Fatal("the member serves again with the invalidated pin in its copy")
	}
}

// A membership Redis has just begun (restarted, or the keys evicted) may
// have forgotten members that still serve: a write waits until it is
// Wait old.
func TestNearForgottenMembershipIsWaitedOut(t *testing.T) {
	a, b, client := nearPair(t)
	id := fillPins(t, a, 1, 1)[0]
	if err := client.Del(ctx, b.near.members, b.near.epoch).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := b.Invalidate(ctx, id); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < b.near.wait-10*time.Millisecond || testutil.ToFloat64(b.near.lapsed) != 1 {
		t.Fatalf("after the membership was lost the writer waited %v, want about %v", took, b.near.wait)
	}
}

// A read that began before an invalidation was applied does not put what
// it read into the copy.
func TestNearFillAfterAnInvalidationIsRefused(t *testing.T) {
	a, _, _ := nearPair(t)
	id := pin(1, 1, 0).ID
	gen := a.near.snapshot()
	a.near.drop([]uint64{pin(2, 1, 0).ID}) // any invalidation
	a.near.put(id, encode(pin(1, 1, 0)), gen)
	if _, ok := a.near.get(id); ok {
		t.Fatal("a read older than an invalidation filled the near copy")
	}
	a.near.put(id, encode(pin(1, 1, 0)), a.near.snapshot())
	if _, ok := a.near.get(id); !ok {
		t.Fatal("a read after every invalidation did not fill the near copy")
	}
}

// A member whose subscription is cut (what a Redis restart does) empties
// its copy: what was published meanwhile is lost to it.
func TestNearLostSubscriptionEmptiesTheCopy(t *testing.T) {
	a, _, client := nearPair(t)
	id := intoNear(t, a, 1)
	gen := a.near.snapshot()
	if err := client.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); a.near.snapshot() == gen; time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the member did not notice its subscription was cut")
		}
	}
	if _, ok := a.near.get(id); ok {
		t.Fatal("the copy kept an entry across a lost subscription")
	}
	waitServing(t, a)
}

// The copy holds at most its size.
func TestNearCopyHoldsAtMostItsSize(t *testing.T) {
	a, _, _ := nearPair(t)
	for i := range uint64(250) {
		a.near.put(pin(i+1, 1, 0).ID, encode(pin(i+1, 1, 0)), a.near.snapshot())
	}
	if n := len(a.near.m); n != a.near.max {
		t.Fatalf("the near copy holds %d entries, its size is %d", n, a.near.max)
	}
}

// The cache's protocol holds with a near copy in front of Redis.
func TestProtocolWithANearCopy(t *testing.T) {
	for _, p := range protocol {
		t.Run(p.name, func(t *testing.T) {
			p.test(t, func(t testing.TB, opts Options) (*Cache, redis.UniversalClient) {
				opts.Near, opts.NearFresh = 1000, testFresh
				c, client := newCache(t, opts)
				waitServing(t, c)
				return c, client
			})
		})
	}
}

// BenchmarkInvalidate is what a write's invalidation costs its writer:
// without a near copy, with one and no other member, and with another
// member whose acknowledgement it waits for.
func BenchmarkInvalidate(b *testing.B) {
	id := pin(1, 1, 0).ID
	run := func(b *testing.B, c *Cache) {
		for b.Loop() {
			if err := c.Invalidate(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("no-near-copy", func(b *testing.B) {
		c, _ := newCache(b, Options{})
		run(b, c)
	})
	b.Run("near-copy-alone", func(b *testing.B) {
		c, _ := newCache(b, Options{Near: 100, NearFresh: testFresh})
		waitServing(b, c)
		time.Sleep(c.near.wait) // past the membership's first Wait
		run(b, c)
	})
	b.Run("near-copy-and-another-member", func(b *testing.B) {
		_, c, _ := nearPair(b)
		run(b, c)
		if n := testutil.ToFloat64(c.near.lapsed); n != 0 {
			b.Fatalf("%v invalidations waited the member out", n)
		}
	})
}

// failBeats fails the near copy's beats (the script call whose last
// argument is "b <seq>") while on is set, as a Redis that does not
// answer in time would.
type failBeats struct{ on *atomic.Bool }

func (h failBeats) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h failBeats) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h failBeats) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if last, ok := args[len(args)-1].(string); ok && h.on.Load() && strings.HasPrefix(last, "b ") {
			err := errors.New("i/o timeout (injected)")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// A beat that fails now and then is not an operator's business: nothing
// is logged above debug. A membership that lapses is warned about once,
// saying what it costs and what to check, and its return is logged.
func TestNearOnlyALapsedMembershipIsWarned(t *testing.T) {
	addr := testenv.RedisAddr(t)
	prefix := testenv.UniquePrefix(t, "near")
	t.Cleanup(func() { testenv.DropKeys(t, addr, prefix) })
	var fail atomic.Bool
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	client.AddHook(failBeats{&fail})
	t.Cleanup(func() { client.Close() })
	var logs syncBuffer
	c := New(client, Options{Prefix: prefix + ":c:", Timeout: 100 * time.Millisecond, Near: 100, NearFresh: testFresh,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	t.Cleanup(c.Close)
	waitServing(t, c)
	lapse := 2 * c.near.wait

	// Beats fail for well under the lapse, as on a busy machine.
	fail.Store(true)
	time.Sleep(lapse / 3)
	fail.Store(false)
	waitServing(t, c)
	time.Sleep(lapse)
	if s := logs.String(); s != "" {
		t.Fatalf("beats that failed for %s, under the lapse of %s, were logged:\n%s", lapse/3, lapse, s)
	}

	// Beats fail for longer than the lapse: one warning, then the return.
	fail.Store(true)
	time.Sleep(3 * lapse)
	fail.Store(false)
	waitServing(t, c)
	for start := time.Now(); !strings.Contains(logs.String(), "renews its membership again"); time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("no line saying the membership is back:\n%s", logs.String())
		}
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"level":"WARN"`) || !strings.Contains(lines[0], "lapsed") ||
		!strings.Contains(lines[0], "reads from Redis instead of its near copy") || !strings.Contains(lines[0], "check Redis") {
		t.Fatalf("a lapsed membership's log:\n%s", logs.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
