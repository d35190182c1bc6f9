// Package lanes coalesces the statements of one MySQL host's reads: the
// mechanism behind pointread (reads by id) and edgeread (edge checks).
//
// A Queue serves one host. At most its lanes' statements are out to the
// host at once; a job that finds a lane free runs alone and at once, so a
// lightly loaded server never waits. Jobs that arrive while every lane is
// busy queue, and when a lane comes free the whole queue (up to a batch's
// bound) runs as one statement. A queued job joins only a statement not
// yet sent, so it reads nothing older than what was committed before it
// began. A statement the server refuses (a shard's table missing) is redone
// one job at a time, so only the jobs that depend on the fault fail.
package lanes

import (
	"context"
	"sync"
	"time"

	"github.com/pinstore/pinstore/store/shardsql"
)

// Ops is what a queue does with its jobs; each job carries its own result.
type Ops[J any] struct {
	// Alone runs one job with a statement of its own.
	Alone func(ctx context.Context, j J)
	// Batch runs two or more jobs with one statement. Its error, unless
	// the server refused the statement, is every job's (Fail).
	Batch func(ctx context.Context, js []J) error
	// Fail records err as j's result.
	Fail func(j J, err error)
	// Count, when set, is told of every statement and how many jobs it ran.
	Count func(jobs int)
}

// Config bounds a queue.
type Config struct {
	Lanes    int           // statements out at once; at least 1
	Timeout  time.Duration // deadline of a batch statement, which serves many callers
	MaxBatch int           // jobs in one statement
}

// Queue is one host's jobs of one kind.
type Queue[J any] struct {
	ops   Ops[J]
	cfg   Config
	mu    sync.Mutex
	busy  int // statements out
	queue []*slot[J]
}

// slot is a queued job.
type slot[J any] struct {
	job   J
	taken bool       // guarded by Queue.mu: in a statement, so it can no longer leave the queue
	lead  []*slot[J] // set before done fires when this job is to run the statement for them
	done  chan struct{}
}

// New returns a queue; cfg's zero fields take 1 lane, 5 s and 100 jobs.
func New[J any](cfg Config, ops Ops[J]) *Queue[J] {
	if cfg.Lanes <= 0 {
		cfg.Lanes = 1
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 100
	}
	return &Queue[J]{ops: ops, cfg: cfg}
}

// Do runs j, alone or with the jobs queued behind it; its result is in j.
// A caller whose ctx ends while j waits in the queue leaves it with
// ctx.Err(); Do returns nil otherwise.
func (q *Queue[J]) Do(ctx context.Context, j J) error {
	q.mu.Lock()
	if q.busy < q.cfg.Lanes {
		q.busy++
		q.mu.Unlock()
		q.count(1)
		q.ops.Alone(ctx, j)
		q.next()
		return nil
	}
	s := &slot[J]{job: j, done: make(chan struct{}, 1)}
	q.queue = append(q.queue, s)
	q.mu.Unlock()
	select {
	case <-s.done:
	case <-ctx.Done():
		q.mu.Lock()
		if !s.taken {
			for i, w := range q.queue {
				if w == s {
					q.queue = append(q.queue[:i], q.queue[i+1:]...)
					break
				}
			}
			q.mu.Unlock()
			return ctx.Err()
		}
		// Already in a statement (perhaps as the one to run it): see it through.
		q.mu.Unlock()
		<-s.done
	}
	if s.lead != nil {
		q.runBatch(s.lead, s)
		q.next()
	}
	return nil
}

// next is called when a statement is done: it hands the lane to the first
// queued job, with the queue as its batch, or frees it.
func (q *Queue[J]) next() {
	q.mu.Lock()
	if len(q.queue) == 0 {
		q.busy--
		q.mu.Unlock()
		return
	}
	n := min(len(q.queue), q.cfg.MaxBatch)
	batch := make([]*slot[J], n)
	copy(batch, q.queue)
	q.queue = append(q.queue[:0], q.queue[n:]...)
	for _, s := range batch {
		s.taken = true
	}
	q.mu.Unlock()
	batch[0].lead = batch
	batch[0].done <- struct{}{}
}

// runBatch runs batch's jobs and hands each its result; self, the job
// running it, is not signalled.
func (q *Queue[J]) runBatch(batch []*slot[J], self *slot[J]) {
	defer func() {
		for _, s := range batch {
			if s != self {
				s.done <- struct{}{}
			}
		}
	}()
	js := make([]J, len(batch))
	for i, s := range batch {
		js[i] = s.job
	}
	q.Run(js)
}

// Run runs jobs now as one statement (one alone), outside the lanes,
// under the queue's batch deadline: the jobs of other requests hang on
// it, so no one caller's cancellation may fail them.
func (q *Queue[J]) Run(jobs []J) {
	q.count(len(jobs))
	ctx, cancel := context.WithTimeout(context.Background(), q.cfg.Timeout)
	defer cancel()
	if len(jobs) == 1 {
		q.ops.Alone(ctx, jobs[0])
		return
	}
	err := q.ops.Batch(ctx, jobs)
	if shardsql.Refused(err) {
		// The server answered but refused the statement, e.g. a table of
		// one shard missing: run each job alone, so only the jobs that
		// depend on the fault fail.
		var wg sync.WaitGroup
		for _, j := range jobs {
			wg.Go(func() { q.ops.Alone(ctx, j) })
		}
		wg.Wait()
		return
	}
	if err != nil {
		for _, j := range jobs {
			q.ops.Fail(j, err)
		}
	}
}

func (q *Queue[J]) count(jobs int) {
	if q.ops.Count != nil {
		q.ops.Count(jobs)
	}
}
