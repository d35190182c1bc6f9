package topology

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/pinstore/pinstore/model"
)

// Writes and map changes. A move holds writes to a range by marking it
// read-only in the map, and relies on two promises of the Router:
//
//   - Every write runs pinned to the topology in force when it began
//     (Enter, EnterShard): Drain returns only once no write pinned to an
//     older topology is still running, so after Drain nothing routed by an
//     older map can reach a source host.
//   - A write to a read-only range waits in the server (EnterShard's
//     buffer) for a map in which the range is writable again, on its new
//     host, instead of failing: a move's switch is invisible to clients if
//     it takes less than the buffer window, and fails with EMoving as
//     before when it takes longer (or when too many writes wait already).
//   - A write waits the same way while the server's topology lease is
//     lapsed (lease.go), and fails with EUnavailable after the window.

// DefaultWriteBuffer is how long a write to a range being switched waits
// for the new map before it is refused with EMoving: WriteBufferFor the
// default map poll and query timeout, so that a move at default settings
// with a map file is not seen by clients (TestWriteBufferOutlastsMoveHold).
const DefaultWriteBuffer = 15 * time.Second

// DefaultFailoverHold is how long, unless PINSTORE_WRITE_BUFFER says
// otherwise, a server holds a request that a failed master refused, for a
// failover to name a new one.
const DefaultFailoverHold = 5 * time.Second

// DefaultQueryTimeout bounds each statement of a server (store.Config's
// QueryTimeout) and so how long a write routed on an old map may still
// run after the map changed.
const DefaultQueryTimeout = 5 * time.Second

// moveSettleMargin is what a move's settle adds to the map poll and the
// query timeout, for a server that reads the file late.
const moveSettleMargin = 2 * time.Second

// finalPassAllowance is what the write buffer allows a move's final pass
// and map rewrite, between the end of its settle and the switched map.
const finalPassAllowance = 4 * time.Second

// MoveSettle is how long a move with a map file, servers polling it every
// poll, waits after each map change before relying on every server having
// it and on writes routed on the old map having ended (each statement
// takes at most queryTimeout).
func MoveSettle(poll, queryTimeout time.Duration) time.Duration {
	return poll + queryTimeout + moveSettleMargin
}

// WriteBufferFor is the write buffer that outlasts a move's hold at its
// default settle with a map file polled every poll: a write to the range
// may arrive as soon as its server loads the read-only map, and waits for
// the settle, the final pass and its server's poll of the switched map.
func WriteBufferFor(poll, queryTimeout time.Duration) time.Duration {
	return MoveSettle(poll, queryTimeout) + finalPassAllowance + poll
}

// DefaultWriteBufferMax is how many writes may wait at once per server;
// one more is refused at once.
const DefaultWriteBufferMax = 2000

// BufferStats counts what the write buffer did.
type BufferStats struct {
	Waited  atomic.Int64 // writes that waited for a map change
	Expired atomic.Int64 // of which refused after the window (or over the limit)
	waiting atomic.Int64
}

// Waiting is how many writes wait now.
func (b *BufferStats) Waiting() int64 { return b.waiting.Load() }

// Hold counts a write that waits in the buffer for a reason of its own
// (a failover: the store's writes whose master failed them) and returns
// the function that ends its wait, with false when max writes wait
// already (it then counts it as expired; release anyway).
func (b *BufferStats) Hold(max int64) (release func(), ok bool) {
	if b.waiting.Add(1) > max {
		b.waiting.Add(-1)
		b.Expired.Add(1)
		return func() {}, false
	}
	b.Waited.Add(1)
	return func() { b.waiting.Add(-1) }, true
}

// AwaitChange returns once the next map is put in force, or after d, or
// when ctx ends.
func (r *Router) AwaitChange(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.changes():
	case <-t.C:
	case <-ctx.Done():
	}
}

// Enter pins the topology in force for a write (or a batch of writes) and
// returns it with the function that ends the pin, which must be called
// once the writes have committed or rolled back. Route the writes by the
// returned topology only.
func (r *Router) Enter() (*Topology, func()) {
	for {
		t := r.cur.Load()
		t.inflight.Add(1)
		if r.cur.Load() == t {
			return t, func() { r.leave(t) }
		}
		r.leave(t) // replaced meanwhile: pin the new one
	}
}

func (r *Router) leave(t *Topology) {
	if t.inflight.Add(-1) == 0 && r.cur.Load() != t {
		select {
		case r.drained <- struct{}{}:
		default:
		}
	}
}

// EnterShard pins the topology in force for a write to shard n and returns
// the shard's route in it. While the shard's range is read-only (a move
// is switching it), it waits for a map in which it is writable, for up to
// window (0: no wait), then fails with EMoving; it fails at once when max
// writes wait already, and when ctx ends. A shard outside the map is
// EInvalid.
func (r *Router) EnterShard(ctx context.Context, op string, n int, window time.Duration, max int64) (Shard, func(), error) {
	var sh Shard
	release, err := r.enter(ctx, op, window, max, func(t *Topology) (int, error) {
		var err error
		sh, err = t.Shard(n)
		if err != nil || !sh.ReadOnly {
			return -1, err
		}
		return n, nil
	})
	return sh, release, err
}

// EnterShards is EnterShard for a write that spans shards a and b (two
// transactions, one nested in the other): it waits, holding nothing, for a
// map in which both are writable and pins it once, so that no transaction
// is ever open while the other shard's write waits in the buffer.
func (r *Router) EnterShards(ctx context.Context, op string, a, b int, window time.Duration, max int64) (Shard, Shard, func(), error) {
	var sa, sb Shard
	release, err := r.enter(ctx, op, window, max, func(t *Topology) (int, error) {
		var err error
		if sa, err = t.Shard(a); err != nil {
			return -1, err
		}
		if sb, err = t.Shard(b); err != nil {
			return -1, err
		}
		switch {
		case sa.ReadOnly:
			return a, nil
		case sb.ReadOnly:
			return b, nil
		}
		return -1, nil
	})
	return sa, sb, release, err
}

// enter pins the topology in force once route finds in it no read-only
// shard (-1), waiting for a new map as EnterShard describes while route
// names one; route's error ends the wait.
func (r *Router) enter(ctx context.Context, op string, window time.Duration, max int64, route func(*Topology) (int, error)) (func(), error) {
	var deadline time.Time
	waited := false
	defer func() {
		if waited {
			r.buffer.waiting.Add(-1)
		}
	}()
	for {
		t, release := r.Enter()
		n, err := route(t)
		if err != nil {
			release()
			return nil, err
		}
		lapsed := false
		if n < 0 {
			if r.leaseHeld() {
				return release, nil
			}
			lapsed = true
		}
		release()
		changed := r.changes()
		if r.cur.Load() != t {
			continue // a new map came meanwhile: look at it
		}
		refuse := func() error {
			if lapsed {
				return lapsedErr(op, r.LeaseLapsed())
			}
			return moving(op, n)
		}
		if !waited {
			if window <= 0 || r.buffer.waiting.Add(1) > max {
				if window > 0 {
					r.buffer.waiting.Add(-1)
					r.buffer.Expired.Add(1)
				}
				return nil, refuse()
			}
			waited = true
			r.buffer.Waited.Add(1)
			deadline = time.Now().Add(window)
		}
		timer := time.NewTimer(time.Until(deadline))
		select {
		case <-changed:
			timer.Stop()
		case <-timer.C:
			r.buffer.Expired.Add(1)
			return nil, refuse()
		case <-ctx.Done():
			timer.Stop()
			if lapsed {
				return nil, model.Wrap(op, model.EUnavailable, refuse().(*model.Error).Message, ctx.Err())
			}
			return nil, model.Wrap(op, model.EMoving, fmt.Sprintf("shard %d is being moved; retry shortly", n), ctx.Err())
		}
	}
}

func moving(op string, n int) error {
	return &model.Error{Code: model.EMoving, Op: op, Message: fmt.Sprintf("shard %d is being moved; retry shortly", n)}
}

// changes returns a channel closed when the next topology is put in force.
func (r *Router) changes() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// install puts t in force, wakes the writes waiting for a map change and
// keeps the topology it replaced until its pinned writes have ended.
func (r *Router) install(t *Topology) { r.installIf(nil, t) }

// installIf is install if the topology in force is still old (nil: any).
func (r *Router) installIf(old, t *Topology) bool {
	r.mu.Lock()
	if old != nil && r.cur.Load() != old {
		r.mu.Unlock()
		return false
	}
	old = r.cur.Swap(t)
	r.countMasterChanges(old, t)
	r.nameMeters(t)
	if old != nil {
		r.retired = append(r.retired, old)
	}
	kept := r.retired[:0]
	for _, o := range r.retired {
		if o.inflight.Load() > 0 {
			kept = append(kept, o)
		}
	}
	r.retired = kept
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	return true
}

// Drain returns once no write pinned to a topology older than the one in
// force is still running (or ctx ends, with its error).
func (r *Router) Drain(ctx context.Context) error {
	for {
		r.mu.Lock()
		kept := r.retired[:0]
		for _, o := range r.retired {
			if o.inflight.Load() > 0 {
				kept = append(kept, o)
			}
		}
		r.retired = kept
		busy := len(kept) > 0
		r.mu.Unlock()
		if !busy {
			return nil
		}
		select {
		case <-r.drained:
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Buffer is what the write buffer did so far.
func (r *Router) Buffer() *BufferStats { return &r.buffer }
