package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/metrics"
	"github.com/pinstore/pinstore/model"
)

// The home feed is materialised ("fan-out on write"): user_feed, on the
// follower's shard, holds (follower, pin, sequence, author) for the pins of
// the users the follower follows, so a feed page is one index range scan,
// like any list, whatever the number of followees.
//
//   - Creating a pin writes it to feed_outbox in the same transaction and
//     queues it. Background lanes (by author) read the author's followers
//     and insert one row per follower, one transaction per host per batch.
//     Each insert is guarded by the follower's user_following row, read
//     under a shared lock, so an unfollow that commits first is never
//     undone.
//   - Following copies the followee's newest FeedBackfill pins, in the
//     follow call and after both sides of the pair are written: a pin
//     created meanwhile is seen either by that copy or by its own fan-out,
//     which reads the followers after the pin committed.
//   - Unfollowing deletes the followee's rows from the follower's feed,
//     unless the follow was made again meanwhile.
//   - Deleting a pin marks its outbox row as a removal and queues the
//     removal of its rows and of its owner-cache entry; until that runs,
//     reads skip the deleted pin like every list does.
//
// A pin's outbox row goes once its rows are written (or removed). Queued
// work survives a host that is down (it is retried every second); what a
// dead process left is redone by the next sweep of feed_outbox, at any
// server's start-up and every FeedSweep. RepairFeeds checks everything.

// DefaultFeedSweep is how often a server redoes fan-out that feed_outbox
// says is unfinished, when PINSTORE_FEED_SWEEP does not say otherwise.
const DefaultFeedSweep = 5 * time.Minute

// FeedSweepFromEnv reads PINSTORE_FEED_SWEEP (a Go duration; "0" turns the
// sweep off), defaulting to DefaultFeedSweep.
func FeedSweepFromEnv(getenv func(string) string) (time.Duration, error) {
	return durationFromEnv(getenv, "PINSTORE_FEED_SWEEP", DefaultFeedSweep, true)
}

// defaultFeedBackfill is how many of a followee's newest pins a follow
// copies into the follower's feed.
const defaultFeedBackfill = 1000

const (
	feedTable      = "user_feed"
	maxFeedBatch   = 1000    // jobs the worker takes at once
	maxFeedBacklog = 1 << 20 // jobs parked for a retry; past it, jobs are dropped (and logged)
	feedChunk      = 500     // rows per statement
	followersPage  = 5000    // followers read per statement
)

// feedJob is one pin to add to (or remove from) its author's followers'
// feeds.
type feedJob struct {
	pin, author uint64
	seq         int64
	remove      bool
	outbox      bool // the pin's feed_outbox row is deleted once its rows are written (or removed)
	cacheOnly   bool // a removal whose feed rows are gone: only the owner-cache delete is left
}

// fanout is the feed's background writer: feedLanes workers, each taking
// the pins of its share of authors (by author id), so one author's adds
// and removes are written in order while authors proceed in parallel.
type fanout struct {
	s       *Store
	lanes   []*feedLane
	backlog atomic.Int64
	stop    context.CancelFunc
	done    chan struct{}

	failures prometheus.Counter
	dropped  prometheus.Counter
}

// feedLinger is how long a lane waits for more pins after the first, so
// that pins created together share one transaction (and one commit) per
// host. 20 ms instead of 5 took create-pin from 0.61-0.63 to 0.73-0.76 of
// the raw-MySQL baseline (BENCHMARKS.md); a new pin still reaches feeds
// within a few tens of milliseconds.
const feedLinger = 20 * time.Millisecond

// feedLanes is how many fan-out workers run. One was not enough: under
// the chaos harness's mixed load its backlog grew by ~50 pins a second.
// Eight, with 5 ms batches, committed more often than needed; four with
// 20 ms batches measured the same as two.
const feedLanes = 4

// feedLane is one fan-out worker and its queue.
type feedLane struct {
	f      *fanout
	in     chan feedJob
	mu     sync.Mutex
	parked []feedJob // failed or overflowed; retried on the next tick
}

func (s *Store) startFanout() {
	ctx, stop := context.WithCancel(context.Background())
	f := &fanout{s: s, stop: stop, done: make(chan struct{})}
	f.failures = metrics.Register(s.cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pinstore_feed_fanout_failures_total",
		Help: "Feed fan-out batches that failed on a host and were queued for a retry.",
	}))
	f.dropped = metrics.Register(s.cfg.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pinstore_feed_fanout_dropped_total",
		Help: "Feed fan-out jobs dropped because the retry backlog was full (run pinstore repair).",
	}))
	// A second store on the same registry keeps the first's gauge.
	metrics.Register(s.cfg.Registerer, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pinstore_feed_fanout_backlog",
		Help: "Pins whose feed fan-out is queued, running or waiting for a retry.",
	}, func() float64 { return float64(f.backlog.Load()) }))
	for range feedLanes {
		f.lanes = append(f.lanes, &feedLane{f: f, in: make(chan feedJob, maxFeedBatch)})
	}
	s.feed = f // before any worker starts: the sweep enqueues through it
	var wg sync.WaitGroup
	for _, l := range f.lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.run(ctx)
		}()
	}
	if every := s.cfg.FeedSweep; every > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.sweepLoop(ctx, every)
		}()
	}
	go func() {
		wg.Wait()
		close(f.done)
	}()
}

// sweepLoop redoes the fan-out that feed_outbox says is unfinished: all of
// it at start-up (a server that died left it there; a live peer's rows are
// merely written twice, which is harmless), then every interval the rows
// older than the interval.
func (s *Store) sweepLoop(ctx context.Context, every time.Duration) {
	olderThan := time.Duration(0)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if n, err := s.SweepFeedOutbox(ctx, olderThan); err != nil {
			s.log.Warn("feed outbox sweep incomplete; the next one retries", "err", model.ErrorMessage(err))
		} else if n > 0 {
			s.log.Info("feed outbox sweep: redoing unfinished fan-out", "pins", n)
		}
		olderThan = every
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SweepFeedOutbox queues the fan-out of every pin whose feed_outbox row is
// older than olderThan (up to 10,000 per shard per call) and returns how
// many it queued. Shards on a host that is down are skipped (and named in
// the error); shards being moved are left for the next sweep.
func (s *Store) SweepFeedOutbox(ctx context.Context, olderThan time.Duration) (int, error) {
	const op = "store.SweepFeedOutbox"
	t := s.topo.Load()
	cutoff := now().Add(-olderThan)
	queued := 0
	var errs []error
	down := map[*host]bool{}
	for n := range t.shards {
		sh, _ := t.route(n)
		if sh.ro || down[sh.host] {
			continue
		}
		c, cancel := s.deadline(ctx)
		rows, err := sh.host.db.QueryContext(c, "SELECT pin_id, author_id, sequence, remove FROM "+sh.db+".feed_outbox WHERE created_at <= ? LIMIT 10000", cutoff)
		if err != nil {
			cancel()
			down[sh.host] = true
			errs = append(errs, classify(op, sh.host, err))
			continue
		}
		for rows.Next() {
			j := feedJob{outbox: true}
			if err := rows.Scan(&j.pin, &j.author, &j.seq, &j.remove); err != nil {
				break
			}
			s.feed.enqueue(j)
			queued++
		}
		err = rows.Err()
		rows.Close()
		cancel()
		if err != nil {
			errs = append(errs, classify(op, sh.host, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	return queued, errors.Join(errs...)
}

// clearOutbox deletes the feed_outbox rows of pins whose fan-out (or, with
// remove, whose removal) is written, one transaction per host. A row that
// changed kind meanwhile (the pin was deleted) stays for its own job. A
// failure only means the next sweep does those pins again.
func (s *Store) clearOutbox(ctx context.Context, pins []uint64, remove bool) {
	const op = "store.feed"
	groups, err := s.groupByHost(op, pins, idcodec.TypePin)
	if err != nil {
		return
	}
	t := s.topo.Load()
	err = eachHost(groups, func(b *hostBatch) error {
		tx, err := b.host.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return classify(op, b.host, err)
		}
		defer tx.Rollback()
		for _, n := range b.order {
			if t.ro[n] {
				continue // being moved: no writes; the rows wait for a sweep after the move
			}
			if err := deleteOutbox(ctx, tx, t.names[n], b.shards[n], remove); err != nil {
				return classify(op, b.host, err)
			}
		}
		return classify(op, b.host, tx.Commit())
	})
	if err != nil {
		s.log.Warn("feed outbox not cleared; the next sweep redoes those pins", "pins", len(pins), "err", model.ErrorMessage(err))
	}
}

// FeedBacklog is the number of pins whose feed fan-out has not been
// written yet (queued, running, or waiting for a host to come back).
func (s *Store) FeedBacklog() int64 { return s.feed.backlog.Load() }

// enqueue never blocks the caller: when the author's lane is full the job
// waits for the next retry tick.
func (f *fanout) enqueue(j feedJob) {
	f.backlog.Add(1)
	l := f.lanes[j.author%uint64(len(f.lanes))]
	select {
	case l.in <- j:
	default:
		l.park([]feedJob{j})
	}
}

func (l *feedLane) park(jobs []feedJob) {
	l.mu.Lock()
	defer l.mu.Unlock()
	room := max(0, maxFeedBacklog/feedLanes-len(l.parked))
	if len(jobs) > room {
		lost := len(jobs) - room
		l.f.dropped.Add(float64(lost))
		l.f.backlog.Add(-int64(lost))
		l.f.s.log.Error("feed fan-out backlog is full; pins dropped from followers' feeds until pinstore repair runs", "dropped", lost)
		jobs = jobs[:room]
	}
	l.parked = append(l.parked, jobs...)
}

func (l *feedLane) run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		var batch []feedJob
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
		linger := time.NewTimer(feedLinger)
	more:
		for len(batch) < maxFeedBatch {
			select {
			case j := <-l.in:
				batch = append(batch, j)
			case <-linger.C:
				break more
			}
		}
		linger.Stop()
		for len(batch) > 0 {
			n := min(len(batch), maxFeedBatch)
			l.process(batch[:n])
			batch = batch[n:]
		}
	}
}

// finish makes one last attempt at everything queued when the store
// closes; what still fails stays in feed_outbox for the next sweep.
func (l *feedLane) finish() {
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
		l.f.s.log.Warn("feed fan-out unfinished at shutdown; feed_outbox keeps it for the next server's start-up sweep", "pins", n)
	}
}

// feedRow is one row of user_feed to write (or delete).
type feedRow struct {
	follower, pin, author uint64
	seq                   int64
	job                   int // index in the batch
}

// process writes one batch: the followers of each author, then per host
// one transaction over its shards. Jobs that fail anywhere are parked and
// redone whole (every write is idempotent).
func (l *feedLane) process(batch []feedJob) {
	f := l.f
	s := f.s
	ctx, cancel := context.WithTimeout(context.Background(), 2*s.cfg.QueryTimeout)
	defer cancel()
	failed := make([]bool, len(batch))
	var firstErr error
	// A deleted pin also leaves the owner cache here: until Redis takes
	// the delete, its job and feed_outbox row stay (retried every second,
	// and by any server's sweep after a crash), so a process dying while
	// Redis is away cannot leave the cache vouching for a deleted pin.
	var gone []uint64
	for _, j := range batch {
		if j.remove {
			gone = append(gone, j.pin)
		}
	}
	cacheHeld := false
	if len(gone) > 0 {
		if err := s.owners.drop(ctx, gone...); err != nil {
			cacheHeld, firstErr = true, fmt.Errorf("redis did not take the owner-cache deletes: %w", err)
		}
	}
	byAuthor := map[uint64][]int{}
	for i, j := range batch {
		if !j.cacheOnly {
			byAuthor[j.author] = append(byAuthor[j.author], i)
		}
	}
	t := s.topo.Load()
	type shardRows struct{ add, remove []feedRow }
	rows := map[int]*shardRows{}
	for author, jobs := range byAuthor {
		followers, err := s.followersOf(ctx, author)
		if err != nil {
			for _, i := range jobs {
				failed[i] = true
			}
			firstErr = err
			continue
		}
		for _, fl := range followers {
			p, err := idcodec.Decode(fl)
			if err != nil || int(p.Shard) >= len(t.shards) {
				continue // not a user this map routes: nothing to write
			}
			r := rows[int(p.Shard)]
			if r == nil {
				r = &shardRows{}
				rows[int(p.Shard)] = r
			}
			for _, i := range jobs {
				fr := feedRow{follower: fl, pin: batch[i].pin, author: author, seq: batch[i].seq, job: i}
				if batch[i].remove {
					r.remove = append(r.remove, fr)
				} else {
					r.add = append(r.add, fr)
				}
			}
		}
	}
	byHost := map[*host][]int{}
	for n := range rows {
		if t.ro[n] { // being moved: after the move
			for _, r := range append(rows[n].add, rows[n].remove...) {
				failed[r.job] = true
			}
			continue
		}
		byHost[t.shards[n]] = append(byHost[t.shards[n]], n)
	}
	// A job whose feed rows all go to its pin's host (or that has none)
	// clears its outbox row in that host's transaction: no commit of its
	// own. The others clear theirs once every host has committed.
	hostsOf := make([]map[*host]bool, len(batch))
	for n, r := range rows {
		for _, fr := range append(r.add, r.remove...) {
			if hostsOf[fr.job] == nil {
				hostsOf[fr.job] = map[*host]bool{}
			}
			hostsOf[fr.job][t.shards[n]] = true
		}
	}
	inTx := make([]bool, len(batch))
	clears := map[*host][]outboxClear{}
	for i, j := range batch {
		if !j.outbox || failed[i] || j.remove && cacheHeld {
			continue
		}
		n := int(idcodec.ShardOf(j.pin))
		if n >= len(t.shards) || t.ro[n] {
			continue
		}
		h := t.shards[n]
		if _, ok := byHost[h]; !ok || len(hostsOf[i]) > 1 || len(hostsOf[i]) == 1 && !hostsOf[i][h] {
			continue
		}
		inTx[i] = true
		clears[h] = append(clears[h], outboxClear{db: t.names[n], pin: j.pin, remove: j.remove})
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for h, shards := range byHost {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := writeFeedHost(ctx, h, shards, func(n int) string { return t.names[n] }, func(n int) ([]feedRow, []feedRow) {
				return rows[n].add, rows[n].remove
			}, clears[h])
			if err == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			firstErr = classify("store.feed", h, err)
			for _, n := range shards {
				for _, r := range append(rows[n].add, rows[n].remove...) {
					failed[r.job] = true
				}
			}
		}()
	}
	wg.Wait()
	var retry []feedJob
	var added, removed []uint64
	for i, j := range batch {
		switch {
		case failed[i]:
			retry = append(retry, j)
		case j.remove && cacheHeld:
			j.cacheOnly = true // its feed rows are gone; do not redo them every second
			retry = append(retry, j)
		case inTx[i]:
		case j.outbox && j.remove:
			removed = append(removed, j.pin)
		case j.outbox:
			added = append(added, j.pin)
		}
	}
	if len(added) > 0 {
		s.clearOutbox(ctx, added, false)
	}
	if len(removed) > 0 {
		s.clearOutbox(ctx, removed, true)
	}
	f.backlog.Add(-int64(len(batch) - len(retry)))
	if len(retry) > 0 {
		f.failures.Inc()
		s.log.Warn("feed fan-out failed; retrying", "pins", len(retry), "err", model.ErrorMessage(firstErr))
		l.park(retry)
	}
}

// outboxClear is a feed_outbox row to delete in a host's fan-out
// transaction.
type outboxClear struct {
	db     string
	pin    uint64
	remove bool
}

// deleteOutbox deletes the feed_outbox rows of pins in database db that
// are of the given kind (a row that became a removal stays for its own job).
func deleteOutbox(ctx context.Context, tx *sqlx.Tx, db string, pins []uint64, remove bool) error {
	q, args, err := sqlx.In("DELETE FROM "+db+".feed_outbox WHERE pin_id IN (?) AND remove = ?", pins, remove)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, q, args...)
	return err
}

// writeFeedHost writes the rows of several shards of one host in one
// transaction, with the outbox rows it clears, at READ COMMITTED: without
// gap locks its outbox deletes do not hold up the creates inserting next
// to them (at REPEATABLE READ they cut create-pin throughput by a third).
// A follow made while this runs is not missed: its own copy of the
// followee's pins, taken after it commits, sees the pin. Added rows are
// kept only where the follower still follows the author, read under a
// shared lock.
func writeFeedHost(ctx context.Context, h *host, shards []int, dbName func(int) string, rowsOf func(int) (add, remove []feedRow), clears []outboxClear) error {
	tx, err := h.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	type group struct {
		db     string
		remove bool
	}
	byGroup := map[group][]uint64{}
	for _, c := range clears {
		g := group{c.db, c.remove}
		byGroup[g] = append(byGroup[g], c.pin)
	}
	for g, pins := range byGroup {
		if err := deleteOutbox(ctx, tx, g.db, pins, g.remove); err != nil {
			return err
		}
	}
	for _, n := range shards {
		db := dbName(n)
		add, remove := rowsOf(n)
		for start := 0; start < len(add); start += feedChunk {
			if err := insertFeedRows(ctx, tx, db, add[start:min(start+feedChunk, len(add))]); err != nil {
				return err
			}
		}
		// Removals by pin: point deletes on the primary key (from_id, to_id).
		byPin := map[uint64][]uint64{}
		var pins []uint64
		for _, r := range remove {
			if _, ok := byPin[r.pin]; !ok {
				pins = append(pins, r.pin)
			}
			byPin[r.pin] = append(byPin[r.pin], r.follower)
		}
		for _, pin := range pins {
			followers := byPin[pin]
			for start := 0; start < len(followers); start += feedChunk {
				q, args, err := sqlx.In("DELETE FROM "+db+"."+feedTable+" WHERE from_id IN (?) AND to_id = ?", followers[start:min(start+feedChunk, len(followers))], pin)
				if err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, q, args...); err != nil {
					return err
				}
			}
		}
	}
	return tx.Commit()
}

// insertFeedRows inserts rows (at most feedChunk) whose (follower, author)
// pair is still a follow, locking those follow rows in share mode so an
// unfollow waits for this transaction and then removes what it wrote.
func insertFeedRows(ctx context.Context, tx *sqlx.Tx, db string, rows []feedRow) error {
	type pair struct{ follower, author uint64 }
	byAuthor := map[uint64][]uint64{}
	seen := map[pair]bool{}
	for _, r := range rows {
		p := pair{r.follower, r.author}
		if _, ok := seen[p]; !ok {
			seen[p] = false
			byAuthor[r.author] = append(byAuthor[r.author], r.follower)
		}
	}
	for author, followers := range byAuthor {
		// Point look-ups on the primary key (from_id, to_id).
		q, args, err := sqlx.In("SELECT from_id FROM "+db+".user_following WHERE from_id IN (?) AND to_id = ? LOCK IN SHARE MODE", followers, author)
		if err != nil {
			return err
		}
		res, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		for res.Next() {
			var f uint64
			if err := res.Scan(&f); err != nil {
				res.Close()
				return err
			}
			seen[pair{f, author}] = true
		}
		res.Close()
		if err := res.Err(); err != nil {
			return err
		}
	}
	var q strings.Builder
	var args []any
	for _, r := range rows {
		if !seen[pair{r.follower, r.author}] {
			continue
		}
		if len(args) == 0 {
			q.WriteString("INSERT IGNORE INTO " + db + "." + feedTable + " (from_id, to_id, sequence, author_id) VALUES ")
		} else {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?)")
		args = append(args, r.follower, r.pin, r.seq, r.author)
	}
	if len(args) == 0 {
		return nil
	}
	_, err := tx.ExecContext(ctx, q.String(), args...)
	return err
}

// followersOf reads all of a user's followers, by primary key, in pages.
// A deleted user has none (its followers are drained on delete).
func (s *Store) followersOf(ctx context.Context, user uint64) ([]uint64, error) {
	const op = "store.feed"
	sh, _, err := s.resolve(op, user, idcodec.TypeUser)
	if err != nil {
		return nil, err
	}
	var out []uint64
	var after uint64
	for {
		rows, err := sh.host.db.QueryContext(ctx, "SELECT to_id FROM "+sh.db+".user_followers WHERE from_id = ? AND to_id > ? ORDER BY to_id LIMIT ?", user, after, followersPage)
		if err != nil {
			return nil, classify(op, sh.host, err)
		}
		n := 0
		for rows.Next() {
			if err := rows.Scan(&after); err != nil {
				rows.Close()
				return nil, classify(op, sh.host, err)
			}
			out = append(out, after)
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, classify(op, sh.host, err)
		}
		if n < followersPage {
			return out, nil
		}
	}
}

// newestPins reads a user's newest n pins (user_pins lives on the user's
// shard), newest first.
func (s *Store) newestPins(ctx context.Context, op string, user uint64, n int) ([]model.Entry, error) {
	sh, _, err := s.resolve(op, user, idcodec.TypeUser)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	e, err := scanEntries(ctx, sh.host.db, "SELECT to_id, sequence FROM "+sh.db+".user_pins WHERE from_id = ? ORDER BY sequence DESC, to_id DESC LIMIT ?", user, n)
	return e, classify(op, sh.host, err)
}

// backfillFeed copies the followee's newest pins into the follower's feed.
// It runs after both sides of the follow are written; if the follow is gone
// by then it writes nothing.
func (s *Store) backfillFeed(ctx context.Context, op string, follower, followee uint64) error {
	pins, err := s.newestPins(ctx, op, followee, s.cfg.FeedBackfill)
	if err != nil || len(pins) == 0 {
		return err
	}
	sh, _, err := s.resolve(op, follower, idcodec.TypeUser)
	if err != nil {
		return err
	}
	rows := make([]feedRow, len(pins))
	for i, e := range pins {
		rows[i] = feedRow{follower: follower, pin: e.To, author: followee, seq: e.Sequence}
	}
	return retryDeadlock(func() error {
		return s.inTx(ctx, op, sh, func(tx *sqlx.Tx) error {
			for start := 0; start < len(rows); start += feedChunk {
				if err := insertFeedRows(ctx, tx, sh.db, rows[start:min(start+feedChunk, len(rows))]); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// retryDeadlock runs fn again, up to three times in all, when InnoDB chose
// it as a deadlock victim: a follow's or an unfollow's feed write takes the
// same locks as the fan-out, in another order, and is idempotent.
func retryDeadlock(fn func() error) error {
	var err error
	for range 3 {
		var me *mysql.MySQLError
		if err = fn(); !errors.As(err, &me) || me.Number != 1213 {
			return err
		}
	}
	return err
}

// dropFeedAuthor deletes a followee's pins from the follower's feed after
// an unfollow, unless the follow exists again (its row is read under a
// shared lock, so a follow made meanwhile waits and then backfills).
func (s *Store) dropFeedAuthor(ctx context.Context, op string, follower, followee uint64) (int64, error) {
	sh, _, err := s.resolve(op, follower, idcodec.TypeUser)
	if err != nil {
		return 0, err
	}
	var n int64
	err = retryDeadlock(func() error {
		return s.inTx(ctx, op, sh, func(tx *sqlx.Tx) error {
			var one int
			err := tx.QueryRowContext(ctx, "SELECT 1 FROM "+sh.db+".user_following WHERE from_id = ? AND to_id = ? LOCK IN SHARE MODE", follower, followee).Scan(&one)
			if err == nil {
				return nil // followed again
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			res, err := tx.ExecContext(ctx, "DELETE FROM "+sh.db+"."+feedTable+" WHERE from_id = ? AND author_id = ?", follower, followee)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
	})
	return n, err
}

// Feed returns one page of a user's home feed: the pins of the users they
// follow, newest first, paged by cursor. ENotFound when the user is not
// live.
func (s *Store) Feed(ctx context.Context, user uint64, p model.Page) (model.List, error) {
	const op = "store.Feed"
	p.Desc = true
	if p.Offset != 0 {
		return model.List{}, model.Wrap(op, model.EInvalid, "the feed is paged by cursor only", nil)
	}
	if err := p.Normalize(); err != nil {
		return model.List{}, err
	}
	sh, local, err := s.resolve(op, user, idcodec.TypeUser)
	if err != nil {
		return model.List{}, err
	}
	var pos *cursorPos
	if p.Cursor != "" {
		c, err := s.cursor.decode(p.Cursor, kindFeed, user, true)
		if err != nil {
			return model.List{}, err
		}
		pos = &c
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	reader := pointRead{sh: sh, typ: idcodec.TypeUser, local: local}
	err = s.pointRead(ctx, &reader)
	if errors.Is(err, sql.ErrNoRows) || err == nil && !model.ActiveOf(reader.r.doc) {
		return model.List{}, notFound(op, idcodec.TypeUser)
	}
	if err != nil {
		return model.List{}, classify(op, sh.host, err)
	}
	q := "SELECT to_id, sequence FROM " + sh.db + "." + feedTable + " WHERE from_id = ?"
	args := []any{user}
	if pos != nil {
		q += " AND sequence <= ? AND (sequence < ? OR to_id < ?)"
		args = append(args, pos.seq, pos.seq, pos.to)
	}
	q += " ORDER BY sequence DESC, to_id DESC LIMIT ?"
	args = append(args, p.Limit+1)
	entries, err := scanEntries(ctx, sh.host.db, q, args...)
	if err != nil {
		return model.List{}, classify(op, sh.host, err)
	}
	return s.page(entries, p, kindFeed, user), nil
}

// FeedRepairReport counts what RepairFeeds found.
type FeedRepairReport struct {
	Follows int `json:"follows"` // follow pairs checked
	Rows    int `json:"rows"`    // feed rows read
	Missing int `json:"missing"` // rows that should have been there (added)
	Stale   int `json:"stale"`   // rows of a deleted pin or of a user no longer followed (removed)
}

// RepairFeeds makes every feed hold what fan-out should have written: for
// each follow, the followee's pins made since the follow plus their newest
// FeedBackfill pins; and nothing for a deleted pin or an author no longer
// followed. It restores what a crash during fan-out left out, and builds
// the feeds of a store that had none. With dryRun it only counts. It is
// safe to run while clients write.
func (s *Store) RepairFeeds(ctx context.Context, dryRun bool, progress io.Writer) (FeedRepairReport, error) {
	const op = "store.RepairFeeds"
	var rep FeedRepairReport
	t := s.topo.Load()
	for n := range t.shards {
		sh, _ := t.route(n)
		// Rows whose author the follower no longer follows.
		gone, err := feedPairs(ctx, sh, "SELECT DISTINCT f.from_id, f.author_id FROM "+sh.db+"."+feedTable+" f LEFT JOIN "+sh.db+
			".user_following g ON g.from_id = f.from_id AND g.to_id = f.author_id WHERE g.from_id IS NULL")
		if err != nil {
			return rep, err
		}
		for _, g := range gone {
			if dryRun {
				var k int
				if err := sh.host.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+sh.db+"."+feedTable+" WHERE from_id = ? AND author_id = ?", g.from, g.to).Scan(&k); err != nil {
					return rep, classify(op, sh.host, err)
				}
				rep.Stale += k
				continue
			}
			k, err := s.dropFeedAuthor(ctx, op, g.from, g.to)
			if err != nil {
				return rep, err
			}
			rep.Stale += int(k)
		}
		// Every follow of this shard against its followee's pins.
		var last pairRow
		for {
			follows, err := feedPairs(ctx, sh, "SELECT from_id, to_id, sequence FROM "+sh.db+".user_following WHERE from_id > ? OR (from_id = ? AND to_id > ?) ORDER BY from_id, to_id LIMIT 500",
				last.from, last.from, last.to)
			if err != nil {
				return rep, err
			}
			for _, f := range follows {
				if err := s.repairFollowFeed(ctx, sh, f, dryRun, &rep); err != nil {
					return rep, err
				}
			}
			if len(follows) < 500 {
				break
			}
			last = follows[len(follows)-1]
		}
	}
	if progress != nil {
		fmt.Fprintf(progress, "repair: %s: checked %d follows and %d rows, %d missing, %d stale\n", feedTable, rep.Follows, rep.Rows, rep.Missing, rep.Stale)
	}
	return rep, nil
}

// feedPairs runs a query returning (from, to[, sequence]) rows.
func feedPairs(ctx context.Context, sh shard, q string, args ...any) ([]pairRow, error) {
	rows, err := sh.host.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, classify("store.RepairFeeds", sh.host, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []pairRow
	for rows.Next() {
		var r pairRow
		dst := []any{&r.from, &r.to, &r.seq}[:len(cols)]
		if err := rows.Scan(dst...); err != nil {
			return nil, classify("store.RepairFeeds", sh.host, err)
		}
		out = append(out, r)
	}
	return out, classify("store.RepairFeeds", sh.host, rows.Err())
}

// repairFollowFeed settles one follow (f.from follows f.to since f.seq).
func (s *Store) repairFollowFeed(ctx context.Context, fsh shard, f pairRow, dryRun bool, rep *FeedRepairReport) error {
	const op = "store.RepairFeeds"
	rep.Follows++
	ash, _, err := s.resolve(op, f.to, idcodec.TypeUser)
	if err != nil {
		return nil // the followee is on no configured shard: nothing to copy
	}
	want, err := scanEntries(ctx, ash.host.db, "(SELECT to_id, sequence FROM "+ash.db+".user_pins WHERE from_id = ? ORDER BY sequence DESC, to_id DESC LIMIT ?)"+
		" UNION (SELECT to_id, sequence FROM "+ash.db+".user_pins WHERE from_id = ? AND sequence >= ?)", f.to, s.cfg.FeedBackfill, f.to, f.seq)
	if err != nil {
		return classify(op, ash.host, err)
	}
	have, err := scanEntries(ctx, fsh.host.db, "SELECT to_id, sequence FROM "+fsh.db+"."+feedTable+" WHERE from_id = ? AND author_id = ?", f.from, f.to)
	if err != nil {
		return classify(op, fsh.host, err)
	}
	rep.Rows += len(have)
	held := make(map[uint64]bool, len(have))
	for _, e := range have {
		held[e.To] = true
	}
	wanted := make(map[uint64]bool, len(want))
	var add []feedRow
	for _, e := range want {
		wanted[e.To] = true
		if !held[e.To] {
			add = append(add, feedRow{follower: f.from, pin: e.To, author: f.to, seq: e.Sequence})
		}
	}
	// Rows not wanted may be older pins a backfill copied; only those no
	// longer in the followee's pins (deleted) are stale.
	var check []uint64
	for _, e := range have {
		if !wanted[e.To] {
			check = append(check, e.To)
		}
	}
	var stale []uint64
	for start := 0; start < len(check); start += feedChunk {
		chunk := check[start:min(start+feedChunk, len(check))]
		q, args, err := sqlx.In("SELECT to_id FROM "+ash.db+".user_pins WHERE from_id = ? AND to_id IN (?)", f.to, chunk)
		if err != nil {
			return model.Wrap(op, model.EInternal, "build query", err)
		}
		live := map[uint64]bool{}
		var ids []uint64
		if err := sqlx.SelectContext(ctx, ash.host.db, &ids, q, args...); err != nil {
			return classify(op, ash.host, err)
		}
		for _, id := range ids {
			live[id] = true
		}
		for _, id := range chunk {
			if !live[id] {
				stale = append(stale, id)
			}
		}
	}
	rep.Missing += len(add)
	rep.Stale += len(stale)
	if dryRun || len(add)+len(stale) == 0 {
		return nil
	}
	return s.inTx(ctx, op, fsh, func(tx *sqlx.Tx) error {
		for start := 0; start < len(add); start += feedChunk {
			if err := insertFeedRows(ctx, tx, fsh.db, add[start:min(start+feedChunk, len(add))]); err != nil {
				return err
			}
		}
		for start := 0; start < len(stale); start += feedChunk {
			q, args, err := sqlx.In("DELETE FROM "+fsh.db+"."+feedTable+" WHERE from_id = ? AND to_id IN (?)", f.from, stale[start:min(start+feedChunk, len(stale))])
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return err
			}
		}
		return nil
	})
}
