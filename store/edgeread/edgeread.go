// Package edgeread coalesces edge checks (is each of these ids on this
// user's list?) on one MySQL host, the way pointread coalesces reads by
// id.
//
// A Queue serves one host. At most Lanes statements of checks are out to
// the host at once; a check that finds a lane free goes alone and at once,
// so a lightly loaded server never waits. Checks that arrive while every
// lane is busy queue, and when a lane comes free the whole queue (up to
// maxBatch) goes as one statement (shardsql.ListedAmongEach). A check that
// joins a queue joins a statement not yet sent, so what it reads is never
// older than what was committed before it began. A statement the server
// refuses (a shard's table missing) is redone one check at a time, so only
// the checks that depend on the fault fail.
package edgeread

import (
	"context"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/internal/metrics"
	"github.com/pinstore/pinstore/store/shardsql"
)

// DefaultLanes is the statements of checks out to a host at once when
// Config.Lanes is not set.
const DefaultLanes = 2

// maxBatch bounds the checks of one statement.
const maxBatch = 64

// Check is one edge check and, once done, its result.
type Check struct {
	shardsql.Listed

	Found map[uint64]bool // the ids of Tos on the list

	err   error
	taken bool     // guarded by Queue.mu: in a statement, so it can no longer leave the queue
	lead  []*Check // set before done fires when this check is to run the statement for them
	done  chan struct{}
}

// Config tunes every host's queue.
type Config struct {
	Lanes   int           // statements out to a host at once; default DefaultLanes
	Timeout time.Duration // deadline of a batch statement, which serves many callers; default 5s
	Stats   *Stats        // counters shared by every host; nil counts nothing
}

// Queue is one host's edge checks.
type Queue struct {
	db    *sqlx.DB
	cfg   Config
	mu    sync.Mutex
	busy  int // statements out
	queue []*Check
}

// NewQueue returns the queue of the host behind db.
func NewQueue(db *sqlx.DB, cfg Config) *Queue {
	if cfg.Lanes <= 0 {
		cfg.Lanes = DefaultLanes
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	return &Queue{db: db, cfg: cfg}
}

// Do runs c, alone or with the checks queued behind it, into c.Found.
// Errors are the driver's, unclassified. A caller whose ctx ends while its
// check waits in the queue leaves it with ctx.Err().
func (q *Queue) Do(ctx context.Context, c *Check) error {
	q.mu.Lock()
	if q.busy < q.cfg.Lanes {
		q.busy++
		q.mu.Unlock()
		q.cfg.Stats.add(1)
		c.runAlone(ctx, q.db)
		q.next()
		return c.err
	}
	c.done = make(chan struct{}, 1)
	q.queue = append(q.queue, c)
	q.mu.Unlock()
	select {
	case <-c.done:
	case <-ctx.Done():
		q.mu.Lock()
		if !c.taken {
			for i, w := range q.queue {
				if w == c {
					q.queue = append(q.queue[:i], q.queue[i+1:]...)
					break
				}
			}
			q.mu.Unlock()
			return ctx.Err()
		}
		// Already in a statement (perhaps as the one to run it): see it through.
		q.mu.Unlock()
		<-c.done
	}
	if c.lead != nil {
		q.runBatch(c.lead, c)
		q.next()
	}
	return c.err
}

// runAlone runs c with a statement of its own (none for no ids).
func (c *Check) runAlone(ctx context.Context, db *sqlx.DB) {
	if len(c.Tos) == 0 {
		c.Found = map[uint64]bool{}
		return
	}
	c.Found, c.err = shardsql.ListedAmong(ctx, db, c.DB, c.M, c.From, c.Tos)
}

// next is called when a statement is done: it hands the lane to the first
// queued check, with the queue as its batch, or frees it.
func (q *Queue) next() {
	q.mu.Lock()
	if len(q.queue) == 0 {
		q.busy--
		q.mu.Unlock()
		return
	}
	n := min(len(q.queue), maxBatch)
	batch := make([]*Check, n)
	copy(batch, q.queue)
	q.queue = append(q.queue[:0], q.queue[n:]...)
	for _, c := range batch {
		c.taken = true
	}
	q.mu.Unlock()
	batch[0].lead = batch
	batch[0].done <- struct{}{}
}

// runBatch runs every check of batch in one statement and hands each its
// result; self, the check running it, is not signalled. The statement
// runs under its own deadline: the checks of other requests hang on it, so
// one caller's cancellation must not fail them.
func (q *Queue) runBatch(batch []*Check, self *Check) {
	q.cfg.Stats.add(len(batch))
	ctx, cancel := context.WithTimeout(context.Background(), q.cfg.Timeout)
	defer cancel()
	defer func() {
		for _, c := range batch {
			if c != self {
				c.done <- struct{}{}
			}
		}
	}()
	if len(batch) == 1 {
		batch[0].runAlone(ctx, q.db)
		return
	}
	checks := make([]shardsql.Listed, len(batch))
	for i, c := range batch {
		checks[i] = c.Listed
		c.Found = make(map[uint64]bool)
	}
	err := shardsql.ListedAmongEach(ctx, q.db, checks, func(i int, to uint64) { batch[i].Found[to] = true })
	if shardsql.Refused(err) {
		// The server answered but refused the statement, e.g. a table of
		// one shard missing: run each check alone, so only the checks that
		// depend on the fault fail.
		var wg sync.WaitGroup
		for _, c := range batch {
			wg.Go(func() { c.runAlone(ctx, q.db) })
		}
		wg.Wait()
		return
	}
	if err != nil {
		for _, c := range batch {
			c.Found, c.err = nil, err
		}
	}
}

// Stats counts edge checks and the statements that ran them.
type Stats struct {
	Checks, Statements prometheus.Counter
}

// NewStats registers the counters on reg (nil: a private registry).
func NewStats(reg prometheus.Registerer) *Stats {
	return &Stats{
		Checks: metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pinstore_edge_checks_total",
			Help: "Edge checks run on MySQL (HasMany), alone or batched.",
		})),
		Statements: metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pinstore_edge_check_statements_total",
			Help: "Statements that ran them: checks per statement is the batching factor.",
		})),
	}
}

func (st *Stats) add(checks int) {
	if st == nil {
		return
	}
	st.Statements.Inc()
	st.Checks.Add(float64(checks))
}
