// Package fanout writes the home feed ahead of reading ("fan-out on
// write"): for every new pin, one user_feed row per follower of its
// author, on the follower's shard, so that a feed page is one index range
// scan whatever the number of followees.
//
//   - Creating a pin writes it to feed_outbox in the same transaction and
//     queues a Job. Background lanes (by author, so one author's adds and
//     removes stay in order) read the author's followers and insert one row
//     per follower, one transaction per host per batch. Each insert is
//     guarded by the follower's user_following row, read under a shared
//     lock, so an unfollow that commits first is never undone.
//   - Deleting a pin marks its outbox row as a removal and queues the
//     removal of its rows and of its owner-cache entry (Config.DropOwners).
//   - A pin's outbox row goes once its rows are written (or removed).
//     Queued work survives a host that is down (retried every second);
//     what a dead process left is redone by the next sweep of feed_outbox,
//     at start-up and every Config.Sweep, by any server.
//
// Authors at or above the pull threshold are not fanned out (package store
// decides when a pin is created): their pins are merged into feeds at read
// time. When an author first becomes pulled, a Pull job writes one
// feed_pulled row per follower, once, guarded like a feed row; the sweep
// redoes it (feed_pull_authors.told = 0) after a crash.
//
// A job keeps the request that queued it (Job.From), and a traced batch's
// span is linked to those requests (trace.go); jobs found by the sweep
// have none.
//
// The request-path parts of the feed (reading a page, a follow's backfill,
// an unfollow's removal, repair) belong to package store.
package fanout

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/internal/metrics"
	"github.com/pinstore/pinstore/internal/tracing"
	"github.com/pinstore/pinstore/store/topology"
)

// Router is what fan-out needs of the topology: the version in force, and
// the version in force pinned for a batch of writes (topology.Router).
type Router interface {
	Current() *topology.Topology
	Enter() (*topology.Topology, func())
}

// Config tunes a Fanout.
type Config struct {
	QueryTimeout time.Duration // a batch gets twice this; default 5s
	// Sweep is how often feed_outbox is swept for work a dead process
	// left (also once at Start); 0 never sweeps (operator commands).
	Sweep time.Duration
	// DropOwners removes deleted pins from the owner cache; a removal's
	// job (and outbox row) stays until it succeeds. nil: no cache.
	DropOwners func(ctx context.Context, pins ...uint64) error
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Job is one pin to add to (or remove from) its author's followers' feeds.
type Job struct {
	Pin, Author uint64
	Seq         int64
	Remove      bool
	Outbox      bool // the pin's feed_outbox row is deleted once its rows are written (or removed)
	// Pull tells every follower of Author that the author is pulled (a
	// feed_pulled row each), then marks feed_pull_authors told; Pin is 0.
	Pull bool
	// From is the span of the request that queued the job (tracing.Origin):
	// the batch that writes it is linked to it. A job the sweep found in
	// feed_outbox has none.
	From      tracing.Link
	cacheOnly bool // a removal whose feed rows are gone: only the owner-cache delete is left
}

const (
	maxBatch   = 1000    // jobs a lane takes at once
	maxBacklog = 1 << 20 // jobs parked for a retry; past it, jobs are dropped (and logged)
)

// linger is how long a lane waits for more pins after the first, so that
// pins created together share one transaction (and one commit) per host.
// 20 ms instead of 5 took create-pin from 0.61-0.63 to 0.73-0.76 of the
// raw-MySQL baseline (BENCHMARKS.md, "Feed fan-out"); a new pin still reaches feeds within
// a few tens of milliseconds.
const linger = 20 * time.Millisecond

// lanes is how many fan-out workers run. One was not enough: under the
// chaos harness's mixed load its backlog grew by ~50 pins a second. Eight,
// with 5 ms batches, committed more often than needed; four with 20 ms
// batches measured the same as two.
const lanes = 4

// Fanout is the feed's background writer.
type Fanout struct {
	r       Router
	cfg     Config
	log     *slog.Logger
	lanes   []*lane
	backlog atomic.Int64
	stop    context.CancelFunc
	done    chan struct{}

	failures prometheus.Counter
	dropped  prometheus.Counter
}

// lane is one fan-out worker and its queue.
type lane struct {
	f      *Fanout
	in     chan Job
	mu     sync.Mutex
	parked []Job // failed or overflowed; retried on the next tick
}

// Start starts the workers and, with cfg.Sweep, the outbox sweep.
func Start(r Router, cfg Config) *Fanout {
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.DropOwners == nil {
		cfg.DropOwners = func(context.Context, ...uint64) error { return nil }
	}
	ctx, stop := context.WithCancel(context.Background())
	f := &Fanout{r: r, cfg: cfg, log: cfg.Logger, stop: stop, done: make(chan struct{})}
	f.failures = metrics.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pinstore_feed_fanout_failures_total",
		Help: "Feed fan-out batches that failed on a host and were queued for a retry.",
	}))
	f.dropped = metrics.Register(cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pinstore_feed_fanout_dropped_total",
		Help: "Feed fan-out jobs dropped because the retry backlog was full (run pinstore repair).",
	}))
	// A second store on the same registry keeps the first's gauge.
	metrics.Register(cfg.Registerer, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pinstore_feed_fanout_backlog",
		Help: "Pins whose feed fan-out is queued, running or waiting for a retry.",
	}, func() float64 { return float64(f.backlog.Load()) }))
	for range lanes {
		f.lanes = append(f.lanes, &lane{f: f, in: make(chan Job, maxBatch)})
	}
	var wg sync.WaitGroup
	for _, l := range f.lanes {
		wg.Go(func() { l.run(ctx) })
	}
	if cfg.Sweep > 0 {
		wg.Go(func() { f.sweepLoop(ctx, cfg.Sweep) })
	}
	go func() {
		wg.Wait()
		close(f.done)
	}()
	return f
}

// Close gives everything queued one last try, then stops the workers;
// what still fails stays in feed_outbox for the next server's sweep.
func (f *Fanout) Close() {
	f.stop()
	<-f.done
}

// Backlog is the number of pins whose feed fan-out has not been written
// yet (queued, running, or waiting for a host to come back).
func (f *Fanout) Backlog() int64 { return f.backlog.Load() }

// Enqueue queues j and never blocks: when its lane is full the job waits
// for the next retry tick.
func (f *Fanout) Enqueue(j Job) {
	f.backlog.Add(1)
	l := f.lanes[j.Author%uint64(len(f.lanes))]
	select {
	case l.in <- j:
	default:
		l.park([]Job{j})
	}
}

func (l *lane) park(jobs []Job) {
	l.mu.Lock()
	defer l.mu.Unlock()
	room := max(0, maxBacklog/lanes-len(l.parked))
	if len(jobs) > room {
		lost := len(jobs) - room
		l.f.dropped.Add(float64(lost))
		l.f.backlog.Add(-int64(lost))
		l.f.log.Error("feed fan-out backlog is full; pins dropped from followers' feeds until pinstore repair runs", "dropped", lost)
		jobs = jobs[:room]
	}
	l.parked = append(l.parked, jobs...)
}

func (l *lane) run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		var batch []Job
		select {
		case j := <-l.in:
			batch = append(batch, j)
		case <-tick.C:
			l.mu.Lock()
			batch, l.parked = l.parked, nil
			l.mu.Unlock()
		case <-ctx.Done():
			l.finish()
			return
		}
		// Linger a moment for more: a batch shares its commits.
		wait := time.NewTimer(linger)
	more:
		for len(batch) < maxBatch {
			select {
			case j := <-l.in:
				batch = append(batch, j)
			case <-wait.C:
				break more
			}
		}
		wait.Stop()
		for len(batch) > 0 {
			n := min(len(batch), maxBatch)
			l.process(batch[:n])
			batch = batch[n:]
		}
	}
}

// finish makes one last attempt at everything queued when the fan-out
// stops; what still fails stays in feed_outbox for the next sweep.
func (l *lane) finish() {
	l.mu.Lock()
	batch := l.parked
	l.parked = nil
	l.mu.Unlock()
	for {
		select {
		case j := <-l.in:
			batch = append(batch, j)
			continue
		default:
		}
		break
	}
	if len(batch) == 0 {
		return
	}
	l.process(batch)
	l.mu.Lock()
	n := len(l.parked)
	l.mu.Unlock()
	if n > 0 {
		l.f.log.Warn("feed fan-out unfinished at shutdown; feed_outbox keeps it for the next server's start-up sweep", "pins", n)
	}
}
