package topology

import (
	"fmt"
	"time"

	"github.com/pinstore/pinstore/model"
)

// The topology lease. A server that follows the topology in etcd may
// acknowledge a write only while it knows that the map it routes by is
// the one in force: a server cut off from etcd cannot see a failover or a
// move, and the operators' tools stop waiting for it once its
// registration's lease has expired in etcd. So the follower renews a
// lease of its own here (SetLease) with every answer from etcd, for less
// than the registration's TTL, counted from before it asked; while that
// lease is lapsed,
//
//   - no write enters (EnterShard waits for the lease as for a read-only
//     range, then fails with EUnavailable), and
//   - a write that entered before is not acknowledged (Acknowledge): its
//     commit may have reached a host that a move or failover has since
//     left, so the client is told it is in doubt instead.
//
// A Router whose SetLease was never called (a map file) has no lease and
// refuses nothing.

// SetLease records that the map in force was current as of a moment from
// which writes may be acknowledged until until. When the lease it renews
// had lapsed, writes that entered before now are no longer acknowledged.
func (r *Router) SetLease(until time.Time) {
	now := time.Now()
	r.mu.Lock()
	lapsed := r.leaseOn && !now.Before(r.leaseUntil)
	if lapsed || !r.leaseOn {
		r.lapseEnd = now
	}
	r.leaseOn, r.leaseUntil = true, until
	if lapsed {
		// Wake the writes that wait for the lease.
		close(r.changed)
		r.changed = make(chan struct{})
	}
	r.mu.Unlock()
}

// LeaseLapsed is how long ago the lease ran out (0 while it holds, or
// when there is none).
func (r *Router) LeaseLapsed() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.leaseOn {
		return 0
	}
	return max(0, time.Since(r.leaseUntil))
}

// leaseHeld reports whether a write may enter now.
func (r *Router) leaseHeld() bool { return r.LeaseLapsed() == 0 }

// Acknowledge returns nil when a write that entered at since (or later)
// may be acknowledged: the lease holds now and has not lapsed since.
// Otherwise it returns EUnavailable saying the write is in doubt: it may
// have committed.
func (r *Router) Acknowledge(op string, since time.Time) error {
	r.mu.Lock()
	on, until, end := r.leaseOn, r.leaseUntil, r.lapseEnd
	r.mu.Unlock()
	if !on {
		return nil
	}
	now := time.Now()
	if now.Before(until) && end.Before(since) {
		return nil
	}
	return &model.Error{Code: model.EUnavailable, Op: op,
		Message: "this server lost the topology while the write ran: it may or may not have committed; retry it (with its Idempotency-Key or If-Match) and read it back"}
}

func lapsedErr(op string, lapsed time.Duration) error {
	return &model.Error{Code: model.EUnavailable, Op: op,
		Message: fmt.Sprintf("this server's lease on the topology (etcd) ran out %v ago: it takes no writes until etcd answers it again; retry shortly, or through another server", lapsed.Round(100*time.Millisecond))}
}
