package reshard

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/internal/progress"
	"github.com/pinstore/pinstore/store/shardmap"
)

// meter is what a step over the move's shards (eachShard) has done so
// far, for its progress lines.
type meter struct {
	what   string
	shards int
	start  time.Time

	done  atomic.Int64 // shards finished
	rows  atomic.Int64 // rows written (or changes applied) so far
	bytes atomic.Int64 // bytes of the rows written, where counted
	total atomic.Int64 // the sources' estimate of the rows to copy; 0: not known (yet)
}

// line is the progress line: "copy: 1/4 shards, 12,345 of about 50,000
// rows (3.1 MB), 4,100 rows/s, about 9s left". The time left is by rows
// when the sources gave an estimate (and it has not fallen short), by
// shards otherwise.
func (mt *meter) line() string {
	el := time.Since(mt.start)
	done, rows, total := mt.done.Load(), mt.rows.Load(), mt.total.Load()
	if rows >= total {
		total = 0 // the estimate fell short: go by shards
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d/%d shards, %s", mt.what, done, mt.shards, progress.Count(rows))
	if total > 0 {
		fmt.Fprintf(&b, " of about %s", progress.Count(total))
	}
	b.WriteString(" rows")
	if n := mt.bytes.Load(); n > 0 {
		fmt.Fprintf(&b, " (%s)", progress.Bytes(n))
	}
	if r := progress.PerSecond(rows, el, func(n int64) string { return progress.Count(n) + " rows" }); r != "" {
		b.WriteString(", " + r)
	}
	if total > 0 {
		b.WriteString(", " + progress.Left(rows, total, el))
	} else {
		b.WriteString(", " + progress.Left(done, int64(mt.shards), el))
	}
	return b.String()
}

// record is the meter's progress as the move's state records it: rows
// per second since the pass began, and the time left by rows when the
// sources' estimate holds, by shards otherwise.
func (mt *meter) record() *moveProgress {
	el := time.Since(mt.start)
	done, rows, total := mt.done.Load(), mt.rows.Load(), mt.total.Load()
	if rows >= total {
		total = 0
	}
	p := &moveProgress{Pass: mt.what, ShardsDone: done, Shards: int64(mt.shards), Rows: rows, RowsTotal: total, Updated: time.Now().UTC()}
	if s := el.Seconds(); s > 0 {
		p.RowsPerSec = float64(rows) / s
	}
	left := func(done, total int64) {
		if done > 0 && total >= done {
			v := el.Seconds() * float64(total-done) / float64(done)
			p.SecondsLeft = &v
		}
	}
	if total > 0 {
		left(rows, total)
	} else {
		left(done, int64(mt.shards))
	}
	return p
}

// tally counts one shard's rows as its work writes them, into the
// step's meter. Its work runs in one goroutine; a nil tally counts
// nothing.
type tally struct {
	m    *meter
	rows int64 // this shard's rows counted so far
}

func (t *tally) add(rows, bytes int64) {
	if t == nil {
		return
	}
	t.rows += rows
	t.m.rows.Add(rows)
	t.m.bytes.Add(bytes)
}

// rowBytes is about how many bytes rows hold: their strings and byte
// strings, 8 for anything else.
func rowBytes(rows [][]any) int64 {
	var n int64
	for _, r := range rows {
		for _, v := range r {
			switch v := v.(type) {
			case []byte:
				n += int64(len(v))
			case string:
				n += int64(len(v))
			default:
				n += 8
			}
		}
	}
	return n
}

// estimate asks each source host how many rows the move's shards hold
// (information_schema's estimate, which InnoDB keeps without counting)
// and puts the sum in mt.total. It gives up quietly: the progress lines
// then go by shards.
func (mv *mover) estimate(ctx context.Context, m *shardmap.Map, mt *meter) {
	st := mv.lock.state
	bySource := map[string][]any{}
	for sh := st.first; sh <= st.last; sh++ {
		h := st.source(sh)
		bySource[h] = append(bySource[h], m.DBName(sh))
	}
	var total int64
	for h, names := range bySource {
		db, err := mv.hosts.db(m, h)
		if err != nil {
			return
		}
		var n int64
		q := "SELECT COALESCE(SUM(TABLE_ROWS), 0) FROM information_schema.TABLES WHERE TABLE_NAME <> '" + logTable + "' AND TABLE_SCHEMA IN (?" + strings.Repeat(",?", len(names)-1) + ")"
		if err := sqlx.GetContext(ctx, db, &n, q, names...); err != nil {
			return
		}
		total += n
	}
	mt.total.Store(total)
}
