package store

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

func TestOwners(t *testing.T) {
	s, _ := openTest(t)
	a, b := mustUser(t, s, "a"), mustUser(t, s, "b")
	pa, pb := mustPin(t, s, mustBoard(t, s, a)), mustPin(t, s, mustBoard(t, s, b))
	gone := mustPin(t, s, mustBoard(t, s, a))
	if err := s.Delete(ctx, gone, idcodec.TypePin, 0); err != nil {
		t.Fatal(err)
	}
	// Written through on create: the cache already holds pa and pb.
	cached, err := s.ownerCache.Get(ctx, []uint64{pa, pb, gone})
	if err != nil || cached[0] != a || cached[1] != b || cached[2] != 0 {
		t.Fatalf("cache after create = %v, %v", cached, err)
	}
	// A miss is read through from MySQL and filled.
	if err := s.ownerCache.Delete(ctx, pb); err != nil {
		t.Fatal(err)
	}
	got, err := s.Owners(ctx, []uint64{pa, pb, gone})
	if err != nil || len(got) != 2 || got[pa] != a || got[pb] != b {
		t.Fatalf("Owners = %v, %v", got, err)
	}
	if cached, _ := s.ownerCache.Get(ctx, []uint64{pb}); cached[0] != b {
		t.Fatalf("miss not filled: %v", cached)
	}
	if _, err := s.Owners(ctx, []uint64{pa, a}); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("a user id in an owner look-up: %v", err)
	}
}

func TestOwnersWithoutRedis(t *testing.T) {
	s, m := openTest(t)
	u := mustUser(t, s, "solo")
	p := mustPin(t, s, mustBoard(t, s, u))
	// A second store on the same shards whose Redis is a closed port.
	dead := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	s2, err := Open(context.Background(), Config{Map: m, CursorSecret: []byte("x"), Redis: RedisConfig{Addrs: []string{dead}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got, err := s2.Owners(ctx, []uint64{p})
	if err != nil || got[p] != u {
		t.Fatalf("Owners with Redis down = %v, %v", got, err)
	}
	if _, err := s2.CreatePin(ctx, model.PinDoc{BoardID: model.ID(mustBoard(t, s2, u))}, 0); err != nil {
		t.Fatalf("create with Redis down: %v", err)
	}
	ready := map[string]bool{}
	for _, h := range s2.Ready(ctx) {
		ready[h.Name] = h.OK
	}
	if ready["redis"] || !ready["mysql:h0"] {
		t.Fatalf("ready = %v", ready)
	}
}

// cutProxy forwards TCP connections to target until cut, which closes
// them all and refuses new ones until restored: Redis going away and
// coming back, its data intact.
type cutProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
	target string
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// A pin deleted while Redis is unreachable is not vouched for once Redis
// is back with the stale entry: the delete is retried, and until it lands
// the pin bypasses the cache. Found by bench/chaos.
func TestOwnersDeleteWhileRedisIsAway(t *testing.T) {
	s0, s, _, proxy, pin, _ := deleteWhileRedisIsAway(t)
	proxy.setCut(false)
	if got, err := s.Owners(ctx, []uint64{pin}); err != nil || len(got) != 0 {
		t.Fatalf("owners of the deleted pin with Redis back: %v %v", got, err)
	}
	// The retry removes the entry from Redis itself.
	waitUncached(t, s0, pin)
}

// waitUncached waits up to 10s for Redis (read through s) to lose pin.
func waitUncached(t *testing.T, s *Store, pin uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cached, err := s.ownerCache.Get(ctx, []uint64{pin})
		if err == nil && cached[0] == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stale entry still in Redis after 10s: %v %v", cached, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// deleteWhileRedisIsAway opens a store whose Redis is behind a proxy,
// creates a pin (its owner cached), cuts the proxy and deletes the pin.
// It returns a store on the same shards talking to Redis directly, the
// proxied store, the proxy, the pin and its owner.
func deleteWhileRedisIsAway(t *testing.T) (s0, s *Store, m *shardmap.Map, proxy *cutProxy, pin, owner uint64) {
	t.Helper()
	s0, m = openTest(t)
	owner = mustUser(t, s0, "o")
	board := mustBoard(t, s0, owner)
	proxy = startCutProxy(t, testenv.RedisAddr(t))
	s, err := Open(context.Background(), Config{Map: m, CursorSecret: []byte("x"), Redis: RedisConfig{Addrs: []string{proxy.ln.Addr().String()}, Prefix: s0.cfg.Redis.Prefix}, ObjectCache: s0.cfg.ObjectCache})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	pin = mustPin(t, s, board)
	if got, err := s.Owners(ctx, []uint64{pin}); err != nil || got[pin] != owner {
		t.Fatalf("owners %v %v", got, err)
	}
	proxy.setCut(true)
	if err := s.Delete(ctx, pin, idcodec.TypePin, 0); err != nil {
		t.Fatal(err)
	}
	// Redis still holds the pair (the HDEL never reached it).
	if cached, _ := s0.ownerCache.Get(ctx, []uint64{pin}); cached[0] != owner {
		t.Fatalf("setup: the cache lost the entry already: %v", cached)
	}
	return s0, s, m, proxy, pin, owner
}

// A pin deleted while Redis is away, by a process that then goes away
// itself (its in-memory retry with it), still leaves the cache once Redis
// is back: its feed_outbox row stays until Redis takes the delete, and the
// next server's start-up sweep sends it.
func TestDeletedPinLeavesTheCacheAfterItsServerIsGone(t *testing.T) {
	s0, s, m, _, pin, _ := deleteWhileRedisIsAway(t)
	s.Close() // with Redis still out of its reach
	prefix := s0.cfg.Redis.Prefix
	s1, err := Open(context.Background(), Config{Map: m, CursorSecret: []byte("x"), FeedSweep: time.Hour, Redis: RedisConfig{Addrs: []string{testenv.RedisAddr(t)}, Prefix: prefix}, ObjectCache: s0.cfg.ObjectCache})
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	waitUncached(t, s0, pin)
	if got, err := s1.Owners(ctx, []uint64{pin}); err != nil || len(got) != 0 {
		t.Fatalf("owners of the deleted pin: %v %v", got, err)
	}
	waitFeed(t, s1)
	var left int
	sh, _, _ := s1.route("test", pin, idcodec.TypePin)
	if err := sh.Host.DB.QueryRow("SELECT COUNT(*) FROM "+sh.Name+".feed_outbox WHERE pin_id = ?", pin).Scan(&left); err != nil || left != 0 {
		t.Fatalf("feed_outbox rows of the pin left: %d %v", left, err)
	}
}
