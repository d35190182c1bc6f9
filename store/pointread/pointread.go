// Package pointread coalesces reads of one object by id on one MySQL host.
//
// A Queue serves one host: one pool, which carries it beside its queue of
// edge checks (topology.Pool). At most Lanes statements of reads are out to
// the host at once; a read that finds a lane free goes alone and at once,
// so a lightly loaded server never waits. Reads that arrive while every
// lane is busy queue, and when a lane comes free the whole queue (up to
// maxBatch) goes as one statement (shardsql.ReadObjects). One round trip
// and one statement for many rows costs the driver and MariaDB a fraction
// of what one statement per row does, which is what a busy server is
// short of. A statement the server refuses (a shard's table missing) is
// redone one read at a time, so only the reads that depend on the fault
// fail. The lanes and the queue are package lanes'.
package pointread

import (
	"context"
	"database/sql"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/lanes"
	"github.com/pinstore/pinstore/store/shardsql"
)

// DefaultLanes is the statements of reads out to a host at once when
// Config.Lanes is not set.
const DefaultLanes = lanes.DefaultLanes

// maxBatch bounds the reads of one statement.
const maxBatch = 100

// Read is one read by id and, once done, its result.
type Read struct {
	DB    shardsql.DB
	Type  idcodec.Type
	Local uint64
	// Count, when set, also reads the length of the object's list Count
	// (a list checks its owner and reads its length this way); the lengths
	// of the lists it carries (model.Counted) come in Row.Counts.
	Count model.Mapping

	Row shardsql.Row // the row read, with its counts
	N   int64        // the length of list Count

	err error // sql.ErrNoRows when there is no such row
}

// Config tunes every host's queue: lanes, batch deadline, counters, the
// shape edgeread's queues take too.
type Config = lanes.Tuning

// Queue is one host's reads by id.
type Queue struct {
	lanes *lanes.Queue[*Read]
}

// NewQueue returns the queue of the host behind db.
func NewQueue(db *sqlx.DB, cfg Config) *Queue {
	return &Queue{lanes: lanes.NewTuned(cfg, maxBatch, lanes.Ops[*Read]{
		Alone: func(ctx context.Context, r *Read) { r.readAlone(ctx, db) },
		Batch: func(ctx context.Context, rs []*Read) error { return readBatch(ctx, db, rs) },
		Fail:  func(r *Read, err error) { r.err = err },
	})}
}

// Do reads r's row (and count), alone or with the reads queued behind it,
// into r.Row and r.N. A missing row is sql.ErrNoRows; other errors are the
// driver's, unclassified. A caller whose ctx ends while its read waits in
// the queue leaves it with ctx.Err().
func (q *Queue) Do(ctx context.Context, r *Read) error {
	if err := q.lanes.Do(ctx, r); err != nil {
		return err
	}
	return r.err
}

// part is the select that reads r: its count makes it a part of its own.
func (r *Read) part() shardsql.ObjectSelect {
	return shardsql.ObjectSelect{DB: r.DB, Type: r.Type, Locals: []uint64{r.Local}, Count: r.Count}
}

// readAlone reads r with a statement of its own: the plain primary-key
// select, which costs the driver and the server less than a batch's.
func (r *Read) readAlone(ctx context.Context, db *sqlx.DB) {
	r.Row, r.N, r.err = shardsql.ReadObjectCounted(ctx, db, r.DB, r.Type, r.Local, r.Count, shardsql.NoLock)
}

// key names a read across the shards of one host: a row, and which list
// count with it.
type key struct {
	shard int
	typ   idcodec.Type
	local uint64
	count model.Mapping
}

func (r *Read) key() key { return key{r.DB.N, r.Type, r.Local, r.Count} }

// readBatch reads batch, all on one host, with one statement: a part per
// shard table and list count asked for (their locals in one IN list).
// Readers of a missing row get sql.ErrNoRows.
func readBatch(ctx context.Context, db *sqlx.DB, batch []*Read) error {
	var parts []shardsql.ObjectSelect
	seen := make(map[key]bool, len(batch))
	for _, r := range batch {
		k := r.key()
		if seen[k] {
			continue
		}
		seen[k] = true
		if i := partOf(parts, r); i >= 0 {
			parts[i].Locals = append(parts[i].Locals, r.Local)
			continue
		}
		parts = append(parts, r.part())
	}
	type result struct {
		row shardsql.Row
		n   int64
	}
	got := make(map[key]result, len(seen))
	err := shardsql.ReadObjects(ctx, db, parts, func(i int, row shardsql.Row, n int64) {
		p := parts[i]
		got[key{p.DB.N, p.Type, row.Local, p.Count}] = result{row, n}
	})
	if err != nil {
		return err
	}
	for _, r := range batch {
		if res, ok := got[r.key()]; ok {
			r.Row, r.N = res.row, res.n
		} else {
			r.Row, r.err = shardsql.Row{Local: r.Local}, sql.ErrNoRows
		}
	}
	return nil
}

// partOf is the index of the part that reads r's shard table with r's
// list count, or -1.
func partOf(parts []shardsql.ObjectSelect, r *Read) int {
	for i, p := range parts {
		if p.Count == r.Count && p.DB.N == r.DB.N && p.Type == r.Type {
			return i
		}
	}
	return -1
}

// Stats counts reads by id and the statements that ran them (Jobs,
// Statements).
type Stats = lanes.Stats

// NewStats registers the counters on reg (nil: a private registry).
func NewStats(reg prometheus.Registerer) *Stats {
	return lanes.NewStats(reg, "pinstore_point_read", "Objects read by id (Get)")
}
