package store

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/metrics"
	"github.com/pinstore/pinstore/model"
)

// Reads of one object by id (Get, a list's owner check with its count, the
// feed's reader check) are coalesced per host. At most
// Config.PointReadLanes statements of them are out to a host at once; a
// read that finds a lane free goes alone and at once, so a lightly loaded
// server never waits. Reads that arrive while every lane is busy queue, and
// when a lane comes free the whole queue (up to maxPointBatch) goes as one
// UNION ALL statement. One round trip and one statement for many rows costs
// the driver and MariaDB a fraction of what one statement per row does
// (BENCHMARKS.md), which is what a busy server is short of.
const (
	defaultPointReadLanes = 2
	maxPointBatch         = 100
)

// pointRead is one read and, once done, its result.
type pointRead struct {
	sh    shard
	typ   idcodec.Type
	local uint64
	// withCount also reads the length of the object's list in count (List
	// checks its owner and reads its count this way).
	count     model.Mapping
	withCount bool

	r   row
	n   int64 // the count
	err error // sql.ErrNoRows when there is no such row

	taken bool         // guarded by pointReads.mu: in a statement, so it can no longer leave the queue
	lead  []*pointRead // set before done fires when this reader is to run the statement for them
	done  chan struct{}
}

// pointReads is one host's queue of point reads.
type pointReads struct {
	mu    sync.Mutex
	lanes int
	busy  int // statements out
	queue []*pointRead
}

func newPointReads(lanes int) *pointReads {
	if lanes <= 0 {
		lanes = defaultPointReadLanes
	}
	return &pointReads{lanes: lanes}
}

// pointRead reads p's row (and count) from p.sh, alone or with the reads
// queued behind it, into p.r and p.n. A missing row is sql.ErrNoRows; other
// errors are unclassified.
func (s *Store) pointRead(ctx context.Context, p *pointRead) error {
	q := p.sh.host.reads
	q.mu.Lock()
	if q.busy < q.lanes {
		q.busy++
		q.mu.Unlock()
		s.readStats.add(1)
		p.readAlone(ctx)
		s.nextPointBatch(q)
		return p.err
	}
	p.done = make(chan struct{}, 1)
	q.queue = append(q.queue, p)
	q.mu.Unlock()
	select {
	case <-p.done:
	case <-ctx.Done():
		q.mu.Lock()
		if !p.taken {
			for i, w := range q.queue {
				if w == p {
					q.queue = append(q.queue[:i], q.queue[i+1:]...)
					break
				}
			}
			q.mu.Unlock()
			return ctx.Err()
		}
		// Already in a statement (perhaps as the one to run it): see it through.
		q.mu.Unlock()
		<-p.done
	}
	if p.lead != nil {
		s.runPointBatch(p.lead, p)
		s.nextPointBatch(q)
	}
	return p.err
}

// readAlone reads p with a statement of its own.
func (p *pointRead) readAlone(ctx context.Context) {
	if !p.withCount {
		p.r, p.err = readRow(ctx, p.sh.host.db, p.sh, p.typ, p.local, "")
		return
	}
	p.r.local = p.local
	p.err = p.sh.host.db.QueryRowContext(ctx, "SELECT o.doc, o.version, o.created_at, o.updated_at, "+countColumn(p)+" FROM "+
		p.sh.db+"."+objectTables[p.typ]+" o WHERE o.local_id = ?", p.local).Scan(&p.r.doc, &p.r.version, &p.r.created, &p.r.updated, &p.n)
}

// countColumn is the sub-select of p's list length.
func countColumn(p *pointRead) string {
	id := idcodec.MustEncode(uint32(p.sh.n), p.typ, p.local)
	return "COALESCE((SELECT c.n FROM " + p.sh.db + ".mapping_counts c WHERE c.from_id = " + strconv.FormatUint(id, 10) +
		" AND c.mapping = " + strconv.Itoa(int(p.count)) + "), 0)"
}

// nextPointBatch is called when a statement of q is done: it hands the
// lane to the first queued reader, with the queue as its batch, or frees it.
func (s *Store) nextPointBatch(q *pointReads) {
	q.mu.Lock()
	if len(q.queue) == 0 {
		q.busy--
		q.mu.Unlock()
		return
	}
	n := min(len(q.queue), maxPointBatch)
	batch := make([]*pointRead, n)
	copy(batch, q.queue)
	q.queue = append(q.queue[:0], q.queue[n:]...)
	for _, p := range batch {
		p.taken = true
	}
	q.mu.Unlock()
	batch[0].lead = batch
	batch[0].done <- struct{}{}
}

// runPointBatch reads every row of batch in one statement and hands each
// reader its result; self, the reader running it, is not signalled. The
// statement runs under its own deadline: the reads of other requests hang
// on it, so one caller's cancellation must not fail them.
func (s *Store) runPointBatch(batch []*pointRead, self *pointRead) {
	s.readStats.add(len(batch))
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.QueryTimeout)
	defer cancel()
	defer func() {
		for _, p := range batch {
			if p != self {
				p.done <- struct{}{}
			}
		}
	}()
	if len(batch) == 1 {
		batch[0].readAlone(ctx)
		return
	}
	err := readPointBatch(ctx, batch)
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		// The server answered but refused the statement, e.g. a table of
		// one shard missing: read each row alone, so only the reads that
		// depend on the fault fail.
		var wg sync.WaitGroup
		for _, p := range batch {
			wg.Go(func() { p.readAlone(ctx) })
		}
		wg.Wait()
		return
	}
	if err != nil {
		for _, p := range batch {
			p.err = err
		}
	}
}

// pointKey names a read across the shards of one host: a row, and which
// list count with it (0 none, else mapping + 1).
type pointKey struct {
	shard int
	typ   idcodec.Type
	local uint64
	count int
}

func (p *pointRead) key() pointKey {
	k := pointKey{shard: p.sh.n, typ: p.typ, local: p.local}
	if p.withCount {
		k.count = int(p.count) + 1
	}
	return k
}

// readPointBatch reads batch, all on one host, with one statement joined
// by UNION ALL: a SELECT … WHERE local_id IN (…) per shard table for plain
// reads, and one SELECT per read with a count. Readers of a missing row get
// sql.ErrNoRows.
func readPointBatch(ctx context.Context, batch []*pointRead) error {
	type group struct {
		first  *pointRead
		locals []uint64
	}
	var groups []*group
	seen := make(map[pointKey]bool, len(batch))
	for _, p := range batch {
		k := p.key()
		if seen[k] {
			continue
		}
		seen[k] = true
		var g *group
		if !p.withCount {
			for _, h := range groups {
				if !h.first.withCount && h.first.sh.n == p.sh.n && h.first.typ == p.typ {
					g = h
					break
				}
			}
		}
		if g == nil {
			g = &group{first: p}
			groups = append(groups, g)
		}
		g.locals = append(g.locals, p.local)
	}
	var b strings.Builder
	args := make([]any, 0, len(seen))
	for i, g := range groups {
		p := g.first
		if i > 0 {
			b.WriteString(" UNION ALL ")
		}
		k := p.key()
		b.WriteString("SELECT ")
		b.WriteString(strconv.Itoa(k.shard))
		b.WriteString(", ")
		b.WriteString(strconv.Itoa(int(k.typ)))
		b.WriteString(", ")
		b.WriteString(strconv.Itoa(k.count))
		b.WriteString(", o.local_id, o.doc, o.version, o.created_at, o.updated_at, ")
		if p.withCount {
			b.WriteString(countColumn(p))
		} else {
			b.WriteByte('0')
		}
		b.WriteString(" FROM ")
		b.WriteString(p.sh.db)
		b.WriteByte('.')
		b.WriteString(objectTables[p.typ])
		b.WriteString(" o WHERE o.local_id IN (")
		for j, l := range g.locals {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('?')
			args = append(args, l)
		}
		b.WriteByte(')')
	}
	rows, err := batch[0].sh.host.db.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	type result struct {
		r row
		n int64
	}
	got := make(map[pointKey]result, len(seen))
	for rows.Next() {
		var k pointKey
		var res result
		if err := rows.Scan(&k.shard, &k.typ, &k.count, &res.r.local, &res.r.doc, &res.r.version, &res.r.created, &res.r.updated, &res.n); err != nil {
			return err
		}
		k.local = res.r.local
		got[k] = res
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, p := range batch {
		if res, ok := got[p.key()]; ok {
			p.r, p.n = res.r, res.n
		} else {
			p.r, p.err = row{local: p.local}, sql.ErrNoRows
		}
	}
	return nil
}

// pointReadStats counts Get's rows and the statements that read them.
type pointReadStats struct {
	reads, statements prometheus.Counter
}

func newPointReadStats(reg prometheus.Registerer) pointReadStats {
	return pointReadStats{
		reads: metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pinstore_point_reads_total",
			Help: "Objects read by id (Get), alone or batched.",
		})),
		statements: metrics.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pinstore_point_read_statements_total",
			Help: "Statements that read them: reads per statement is the batching factor.",
		})),
	}
}

func (st pointReadStats) add(reads int) {
	st.statements.Inc()
	st.reads.Add(float64(reads))
}
