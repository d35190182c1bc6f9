package objcache

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Reads of entries are coalesced: at most lanes round trips of reads are
// out to Redis at once; a read that finds a lane free goes at once (an
// idle server never waits), and the reads that arrive while every lane is
// busy go together as one command when a lane comes free. Under load that
// turns one write and one read system call per request on each side into
// a fraction of one, which is most of what a cache hit costs.

const (
	defaultLanes = 1
	maxBatchKeys = 500
)

// readReq is one caller's keys and, once read, their values (nil: none).
type readReq struct {
	keys []string
	vals [][]byte
	err  error
	done chan struct{}
}

// reader coalesces reads of entries.
type reader struct {
	client redis.UniversalClient
	lanes  int
	mu     sync.Mutex
	busy   int
	queue  []*readReq
}

// read returns the values of keys (nil for a missing key), alone or in
// one command with the reads queued behind it. Every round trip is bounded
// by c's timeout (Cache.roundTrip); a caller waiting for a lane stops
// waiting when ctx is done.
func (r *reader) read(ctx context.Context, c *Cache, keys []string) ([][]byte, error) {
	req := &readReq{keys: keys}
	r.mu.Lock()
	if r.busy < r.lanes {
		r.busy++
		r.mu.Unlock()
		r.run(c.roundTrip(ctx), []*readReq{req})
		r.drain(ctx, c)
		return req.vals, req.err
	}
	req.done = make(chan struct{})
	r.queue = append(r.queue, req)
	r.mu.Unlock()
	select {
	case <-req.done:
		return req.vals, req.err
	case <-ctx.Done():
		// The lane that took it (or will) still delivers; this caller stops
		// waiting.
		return nil, ctx.Err()
	}
}

// drain runs the queued reads in batches until the queue is empty, then
// frees the lane.
func (r *reader) drain(ctx context.Context, c *Cache) {
	for {
		r.mu.Lock()
		if len(r.queue) == 0 {
			r.busy--
			r.mu.Unlock()
			return
		}
		n, keys := 0, 0
		for n < len(r.queue) && (n == 0 || keys+len(r.queue[n].keys) <= maxBatchKeys) {
			keys += len(r.queue[n].keys)
			n++
		}
		batch := append([]*readReq(nil), r.queue[:n]...)
		r.queue = append(r.queue[:0], r.queue[n:]...)
		r.mu.Unlock()
		r.run(c.roundTrip(ctx), batch) // other callers' reads: never cancelled, bounded by the timeout
		for _, req := range batch {
			close(req.done)
		}
	}
}

// run reads every key of batch with one command (MGET), or with a
// pipeline of GETs on a Redis Cluster (one round trip per node).
func (r *reader) run(ctx context.Context, batch []*readReq) {
	keys := batch[0].keys
	if len(batch) > 1 {
		keys = nil
		for _, req := range batch {
			keys = append(keys, req.keys...)
		}
	}
	vals, err := r.fetch(ctx, keys)
	i := 0
	for _, req := range batch {
		req.err = err
		if err == nil {
			req.vals = vals[i : i+len(req.keys)]
		}
		i += len(req.keys)
	}
}

func (r *reader) fetch(ctx context.Context, keys []string) ([][]byte, error) {
	out := make([][]byte, len(keys))
	if _, cluster := r.client.(*redis.ClusterClient); !cluster {
		res, err := r.client.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, err
		}
		for i, v := range res {
			if s, ok := v.(string); ok {
				out[i] = []byte(s)
			}
		}
		return out, nil
	}
	pipe := r.client.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		gets[i] = pipe.Get(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	for i, g := range gets {
		if b, err := g.Bytes(); err == nil {
			out[i] = b
		}
	}
	return out, nil
}
