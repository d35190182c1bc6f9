// Package edgeread coalesces edge checks (is each of these ids on this
// user's list?) on one MySQL host, the way pointread coalesces reads by
// id, through package lanes.
//
// A Queue serves one host: one pool, which carries it beside its queue of
// reads by id (topology.Pool), so both are made, tuned (Config, the same
// lanes.Tuning) and kept with the pool. At most Lanes statements of
// checks are out to the host at once; a check that finds a lane free goes
// alone and at once, so a lightly loaded server never waits. Checks that arrive while every
// lane is busy queue, and when a lane comes free the whole queue (up to
// maxBatch) goes as one statement (shardsql.ListedAmongEach). A check that
// joins a queue joins a statement not yet sent, so what it reads is never
// older than what was committed before it began. A statement the server
// refuses (a shard's table missing) is redone one check at a time, so only
// the checks that depend on the fault fail.
package edgeread

import (
	"context"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/store/lanes"
	"github.com/pinstore/pinstore/store/shardsql"
)

// DefaultLanes is the statements of checks out to a host at once when
// Config.Lanes is not set.
const DefaultLanes = lanes.DefaultLanes

// maxBatch bounds the checks of one statement.
const maxBatch = 64

// Check is one edge check and, once done, its result.
type Check struct {
	shardsql.Listed

	Found map[uint64]bool // the ids of Tos on the list

	err error
}

// Config tunes every host's queue: lanes, batch deadline, counters, the
// shape pointread's queues take too.
type Config = lanes.Tuning

// Queue is one host's edge checks.
type Queue struct {
	lanes *lanes.Queue[*Check]
}

// NewQueue returns the queue of the host behind db.
func NewQueue(db *sqlx.DB, cfg Config) *Queue {
	return &Queue{lanes: lanes.NewTuned(cfg, maxBatch, lanes.Ops[*Check]{
		Alone: func(ctx context.Context, c *Check) { c.runAlone(ctx, db) },
		Batch: func(ctx context.Context, cs []*Check) error { return runBatch(ctx, db, cs) },
		Fail:  func(c *Check, err error) { c.Found, c.err = nil, err },
	})}
}

// Do runs c, alone or with the checks queued behind it, into c.Found.
// Errors are the driver's, unclassified. A caller whose ctx ends while its
// check waits in the queue leaves it with ctx.Err().
func (q *Queue) Do(ctx context.Context, c *Check) error {
	if err := q.lanes.Do(ctx, c); err != nil {
		return err
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

// runBatch runs every check of batch in one statement.
func runBatch(ctx context.Context, db *sqlx.DB, batch []*Check) error {
	checks := make([]shardsql.Listed, len(batch))
	for i, c := range batch {
		checks[i] = c.Listed
		c.Found = make(map[uint64]bool)
	}
	return shardsql.ListedAmongEach(ctx, db, checks, func(i int, to uint64) { batch[i].Found[to] = true })
}

// Stats counts edge checks and the statements that ran them (Jobs,
// Statements).
type Stats = lanes.Stats

// NewStats registers the counters on reg (nil: a private registry).
func NewStats(reg prometheus.Registerer) *Stats {
	return lanes.NewStats(reg, "pinstore_edge_check", "Edge checks run on MySQL (HasMany)")
}
