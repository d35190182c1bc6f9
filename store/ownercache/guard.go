package ownercache

import (
	"context"
	"sync"
	"time"
)

// maxUnsent bounds the deletes a Guard keeps retrying; past it, deletes
// are not remembered (the feed fan-out's durable removal still retries
// them, see Guard.Drop).
const maxUnsent = 1 << 20

// Guard wraps a Cache so that this process never vouches for a deleted
// pin: a delete Redis did not take (it was down or slow) is retried every
// second in the background, and until Redis takes it, look-ups of that pin
// skip the cache and go to the source of truth. A nil *Guard is no cache:
// every look-up loads, and writes do nothing.
type Guard struct {
	cache  *Cache
	stop   context.CancelFunc
	mu     sync.Mutex
	unsent map[uint64]struct{}
}

// NewGuard guards cache and starts its retry loop (until Close).
func NewGuard(cache *Cache) *Guard {
	ctx, stop := context.WithCancel(context.Background())
	g := &Guard{cache: cache, stop: stop, unsent: map[uint64]struct{}{}}
	go g.retry(ctx, time.Second)
	return g
}

// Close stops the retry loop; the Redis client is its creator's to close.
func (g *Guard) Close() {
	if g != nil {
		g.stop()
	}
}

// Drop removes deleted pins from the cache and reports whether Redis
// failed to take the deletes; those are retried in the background and
// bypass the cache meanwhile. A caller that must not lose the delete
// across a crash keeps its own durable record until Drop succeeds.
func (g *Guard) Drop(ctx context.Context, pins ...uint64) error {
	if g == nil {
		return nil
	}
	err := g.cache.Delete(ctx, pins...)
	if err == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range pins {
		if len(g.unsent) < maxUnsent {
			g.unsent[p] = struct{}{}
		}
	}
	return err
}

// retry sends the unsent deletes every interval until Redis takes them.
func (g *Guard) retry(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		g.mu.Lock()
		pins := make([]uint64, 0, len(g.unsent))
		for p := range g.unsent {
			pins = append(pins, p)
		}
		g.mu.Unlock()
		for start := 0; start < len(pins); start += BucketSize {
			batch := pins[start:min(start+BucketSize, len(pins))]
			if g.cache.Delete(ctx, batch...) != nil {
				break // still down: next tick
			}
			g.mu.Lock()
			for _, p := range batch {
				delete(g.unsent, p)
			}
			g.mu.Unlock()
		}
	}
}

// bypass splits pins into those the cache may answer and those with an
// unsent delete, which must be loaded.
func (g *Guard) bypass(pins []uint64) (cached, direct []uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.unsent) == 0 {
		return pins, nil
	}
	for _, p := range pins {
		if _, ok := g.unsent[p]; ok {
			direct = append(direct, p)
		} else {
			cached = append(cached, p)
		}
	}
	return cached, direct
}

// Lookup is Cache.Lookup, loading the pins with an unsent delete directly.
func (g *Guard) Lookup(ctx context.Context, pins []uint64, load LoadFunc) (map[uint64]uint64, error) {
	if g == nil {
		return load(ctx, pins)
	}
	cached, direct := g.bypass(pins)
	if len(direct) == 0 {
		return g.cache.Lookup(ctx, pins, load)
	}
	out, err := load(ctx, direct)
	if err != nil || len(cached) == 0 {
		return out, err
	}
	if out == nil {
		out = map[uint64]uint64{}
	}
	more, err := g.cache.Lookup(ctx, cached, load)
	for p, owner := range more {
		out[p] = owner
	}
	return out, err
}
