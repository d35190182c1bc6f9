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

// waiter is what a queued job waits on; a job that went at once has none.
type waiter struct{ done chan struct{} }

func (w *waiter) waiting() *waiter { return w }

// job is one caller's request to a coalescer: it says how many keys it
// reads, and carries its own results, which the coalescer's run sets.
type job interface {
	waiting() *waiter
	size() int
}

// coalescer runs jobs alone when a lane is free, and the jobs queued
// while every lane is busy together (run) when one comes free.
type coalescer[J job] struct {
	lanes int
	run   func(ctx context.Context, batch []J)
	mu    sync.Mutex
	busy  int
	queue []J
}

// do runs j, alone or in one batch with the jobs queued behind it. Every
// round trip is bounded by c's timeout (Cache.roundTrip); a caller waiting
// for a lane stops waiting when ctx is done, and then must not read j.
func (q *coalescer[J]) do(ctx context.Context, c *Cache, j J) error {
	q.mu.Lock()
	if q.busy < q.lanes {
		q.busy++
		q.mu.Unlock()
		q.run(c.roundTrip(ctx), []J{j})
		q.drain(ctx, c)
		return nil
	}
	w := j.waiting()
	w.done = make(chan struct{})
	q.queue = append(q.queue, j)
	q.mu.Unlock()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		// The lane that took it (or will) still delivers; this caller stops
		// waiting.
		return ctx.Err()
	}
}

// drain runs the queued jobs in batches until the queue is empty, then
// frees the lane.
func (q *coalescer[J]) drain(ctx context.Context, c *Cache) {
	for {
		q.mu.Lock()
		if len(q.queue) == 0 {
			q.busy--
			q.mu.Unlock()
			return
		}
		n, keys := 0, 0
		for n < len(q.queue) && (n == 0 || keys+q.queue[n].size() <= maxBatchKeys) {
			keys += q.queue[n].size()
			n++
		}
		batch := append([]J(nil), q.queue[:n]...)
		q.queue = append(q.queue[:0], q.queue[n:]...)
		q.mu.Unlock()
		q.run(c.roundTrip(ctx), batch) // other callers' jobs: never cancelled, bounded by the timeout
		for _, j := range batch {
			close(j.waiting().done)
		}
	}
}

// readReq is one caller's keys and, once read, their values (nil: none).
type readReq struct {
	waiter
	keys []string
	vals [][]byte
	err  error
}

func (r *readReq) size() int { return len(r.keys) }

// reader coalesces reads of entries.
type reader struct {
	client redis.UniversalClient
	coalescer[*readReq]
}

func newReader(client redis.UniversalClient) *reader {
	r := &reader{client: client}
	r.coalescer = coalescer[*readReq]{lanes: defaultLanes, run: r.run}
	return r
}

// read returns the values of keys (nil for a missing key), alone or in
// one command with the reads queued behind it.
func (r *reader) read(ctx context.Context, c *Cache, keys []string) ([][]byte, error) {
	req := &readReq{keys: keys}
	if err := r.do(ctx, c, req); err != nil {
		return nil, err
	}
	return req.vals, req.err
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
