package fanout

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/tracing"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

const op = "fanout"

// followersPage is how many followers one statement reads.
const followersPage = 5000

// shardRows are the feed rows one batch writes to (or removes from) one
// shard, each with the index of its job in the batch.
type shardRows struct {
	add, remove, pull []feedRow
}

type feedRow struct {
	shardsql.FeedRow
	job int
}

// process writes one batch: the followers of each author, then per host
// one transaction over its shards. Jobs that fail anywhere are parked and
// redone whole (every write is idempotent).
func (l *lane) process(batch []Job) {
	f := l.f
	ctx, cancel := context.WithTimeout(context.Background(), 2*f.cfg.QueryTimeout)
	defer cancel()
	ctx, span := batchSpan(ctx, batch)
	t, release := f.r.Enter() // a move waits for the batch before it relies on its source
	defer release()
	failed := make([]bool, len(batch))
	var firstErr error
	// A deleted pin also leaves the owner cache here: until the cache takes
	// the delete, its job and feed_outbox row stay (retried every second,
	// and by any server's sweep after a crash), so a process dying while
	// Redis is away cannot leave the cache vouching for a deleted pin.
	var gone []uint64
	for _, j := range batch {
		if j.Remove {
			gone = append(gone, j.Pin)
		}
	}
	cacheHeld := false
	if len(gone) > 0 {
		if err := f.cfg.DropOwners(ctx, gone...); err != nil {
			cacheHeld, firstErr = true, fmt.Errorf("redis did not take the owner-cache deletes: %w", err)
		}
	}
	byAuthor := map[uint64][]int{}
	for i, j := range batch {
		if !j.cacheOnly {
			byAuthor[j.Author] = append(byAuthor[j.Author], i)
		}
	}
	rows := map[int]*shardRows{}
	for author, jobs := range byAuthor {
		followers, err := followersOf(ctx, t, author)
		if err != nil {
			for _, i := range jobs {
				failed[i] = true
			}
			firstErr = err
			continue
		}
		for _, fl := range followers {
			p, err := idcodec.Decode(fl)
			if err != nil || int(p.Shard) >= t.Len() {
				continue // not a user this map routes: nothing to write
			}
			r := rows[int(p.Shard)]
			if r == nil {
				r = &shardRows{}
				rows[int(p.Shard)] = r
			}
			for _, i := range jobs {
				fr := feedRow{shardsql.FeedRow{Follower: fl, Pin: batch[i].Pin, Author: author, Seq: batch[i].Seq}, i}
				switch {
				case batch[i].Pull:
					r.pull = append(r.pull, fr)
				case batch[i].Remove:
					r.remove = append(r.remove, fr)
				default:
					r.add = append(r.add, fr)
				}
			}
		}
	}
	byHost := map[*topology.Host][]topology.Shard{}
	for n, r := range rows {
		sh, _ := t.Shard(n)
		if sh.ReadOnly { // being moved: after the move
			for _, fr := range r.all() {
				failed[fr.job] = true
			}
			continue
		}
		byHost[sh.Host] = append(byHost[sh.Host], sh)
	}
	for _, shards := range byHost {
		// In one order, shard by shard, so two transactions writing rows
		// of the same shards (a lane and the sweep redoing its pins) take
		// their locks in the same order and queue instead of deadlocking.
		slices.SortFunc(shards, func(a, b topology.Shard) int { return a.N - b.N })
	}
	clears, inTx := f.clearsInTx(t, batch, rows, byHost, failed, cacheHeld)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for h, shards := range byHost {
		wg.Go(func() {
			hctx, hs := hostSpan(ctx, h, shards, rows)
			err := writeHost(hctx, h, shards, rows, clears[h])
			if hs != nil {
				tracing.Fail(hs, err)
				hs.End()
			}
			if err == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			firstErr = shardsql.Classify(op, h.Name, err)
			for _, sh := range shards {
				for _, fr := range rows[sh.N].all() {
					failed[fr.job] = true
				}
			}
		})
	}
	wg.Wait()
	var retry []Job
	var added, removed, told []uint64
	for i, j := range batch {
		switch {
		case failed[i]:
			retry = append(retry, j)
		case j.Pull:
			told = append(told, j.Author)
		case j.Remove && cacheHeld:
			j.cacheOnly = true // its feed rows are gone; do not redo them every second
			retry = append(retry, j)
		case inTx[i]:
		case j.Outbox && j.Remove:
			removed = append(removed, j.Pin)
		case j.Outbox:
			added = append(added, j.Pin)
		}
	}
	if len(added) > 0 {
		f.clearOutbox(ctx, t, added, false)
	}
	if len(removed) > 0 {
		f.clearOutbox(ctx, t, removed, true)
	}
	for _, a := range told {
		if err := markTold(ctx, t, a); err != nil {
			f.log.Warn("pulled author not marked told; the next sweep tells their followers again", "err", model.ErrorMessage(err))
		}
	}
	endBatch(span, rows, len(byHost), len(retry), firstErr)
	f.backlog.Add(-int64(len(batch) - len(retry)))
	if len(retry) > 0 {
		f.failures.Inc()
		f.log.Warn("feed fan-out failed; retrying", "pins", len(retry), "err", model.ErrorMessage(firstErr))
		l.park(retry)
	}
}

// all is every row of r.
func (r *shardRows) all() []feedRow {
	return append(append(append([]feedRow(nil), r.add...), r.remove...), r.pull...)
}

// insertPulled writes the feed_pulled rows of pull (author and follower
// of each), in chunks per author.
func insertPulled(ctx context.Context, tx shardsql.Ext, db shardsql.DB, pull []feedRow) error {
	byAuthor := map[uint64][]uint64{}
	for _, r := range pull {
		byAuthor[r.Author] = append(byAuthor[r.Author], r.Follower)
	}
	for author, followers := range byAuthor {
		for start := 0; start < len(followers); start += shardsql.FeedChunk {
			if err := shardsql.InsertPulledFollowers(ctx, tx, db, author, followers[start:min(start+shardsql.FeedChunk, len(followers))]); err != nil {
				return err
			}
		}
	}
	return nil
}

// markTold records that every follower of the pulled author has a
// feed_pulled row.
func markTold(ctx context.Context, t *topology.Topology, author uint64) error {
	sh, _, err := t.Route(author, idcodec.TypeUser)
	if err != nil {
		return shardsql.Classify(op, "", err)
	}
	if sh.ReadOnly {
		return nil // being moved: the sweep after the move does it again
	}
	return shardsql.Classify(op, sh.Host.Name, shardsql.MarkTold(ctx, sh.Host.DB, sh.DB, []uint64{author}))
}

// outboxClear is a feed_outbox row to delete in a host's fan-out
// transaction.
type outboxClear struct {
	db     shardsql.DB
	pin    uint64
	remove bool
}

// clearsInTx picks the jobs whose feed rows all go to their pin's host (or
// that have none): they clear their outbox row in that host's transaction,
// with no commit of their own. The others clear theirs once every host
// has committed.
func (f *Fanout) clearsInTx(t *topology.Topology, batch []Job, rows map[int]*shardRows, byHost map[*topology.Host][]topology.Shard, failed []bool, cacheHeld bool) (map[*topology.Host][]outboxClear, []bool) {
	hostsOf := make([]map[*topology.Host]bool, len(batch))
	for n, r := range rows {
		sh, _ := t.Shard(n)
		for _, fr := range r.all() {
			if hostsOf[fr.job] == nil {
				hostsOf[fr.job] = map[*topology.Host]bool{}
			}
			hostsOf[fr.job][sh.Host] = true
		}
	}
	inTx := make([]bool, len(batch))
	clears := map[*topology.Host][]outboxClear{}
	for i, j := range batch {
		if !j.Outbox || failed[i] || j.Remove && cacheHeld {
			continue
		}
		sh, err := t.Shard(int(idcodec.ShardOf(j.Pin)))
		if err != nil || sh.ReadOnly {
			continue
		}
		h := sh.Host
		if _, ok := byHost[h]; !ok || len(hostsOf[i]) > 1 || len(hostsOf[i]) == 1 && !hostsOf[i][h] {
			continue
		}
		inTx[i] = true
		clears[h] = append(clears[h], outboxClear{db: sh.DB, pin: j.Pin, remove: j.Remove})
	}
	return clears, inTx
}

// writeHost writes the rows of several shards of one host in one
// transaction, with the outbox rows it clears, at READ COMMITTED: without
// gap locks its outbox deletes do not hold up the creates inserting next
// to them (at REPEATABLE READ they cut create-pin throughput by a third).
// A follow made while this runs is not missed: its own copy of the
// followee's pins, taken after it commits, sees the pin. Added rows are
// kept only where the follower still follows the author, read under a
// shared lock (shardsql.InsertFeedRows).
func writeHost(ctx context.Context, h *topology.Host, shards []topology.Shard, rows map[int]*shardRows, clears []outboxClear) error {
	// A shardsql.Tx: its START, the outbox deletes, each shard's insert
	// and the COMMIT go to the server as one text. Feed rows are no
	// object: nothing is touched.
	tx, err := shardsql.BeginOn(ctx, h.DB, sql.LevelReadCommitted)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	type group struct {
		db     shardsql.DB
		remove bool
	}
	byGroup := map[group][]uint64{}
	for _, c := range clears {
		g := group{c.db, c.remove}
		byGroup[g] = append(byGroup[g], c.pin)
	}
	groups := slices.Collect(maps.Keys(byGroup))
	slices.SortFunc(groups, func(a, b group) int { // in one order, as the shards
		if a.db.N != b.db.N {
			return a.db.N - b.db.N
		}
		return cmp.Compare(b2i(a.remove), b2i(b.remove))
	})
	for _, g := range groups {
		pins := byGroup[g]
		slices.Sort(pins)
		if err := shardsql.DeleteOutbox(ctx, tx, g.db, pins, g.remove); err != nil {
			return err
		}
	}
	for _, sh := range shards {
		add := rows[sh.N].add
		for start := 0; start < len(add); start += shardsql.FeedChunk {
			chunk := add[start:min(start+shardsql.FeedChunk, len(add))]
			plain := make([]shardsql.FeedRow, len(chunk))
			for i, fr := range chunk {
				plain[i] = fr.FeedRow
			}
			if err := shardsql.InsertFeedRows(ctx, tx, sh.DB, plain); err != nil {
				return err
			}
		}
		if err := insertPulled(ctx, tx, sh.DB, rows[sh.N].pull); err != nil {
			return err
		}
		// Removals by pin: point deletes on the primary key (from_id, to_id).
		byPin := map[uint64][]uint64{}
		var pins []uint64
		for _, r := range rows[sh.N].remove {
			if _, ok := byPin[r.Pin]; !ok {
				pins = append(pins, r.Pin)
			}
			byPin[r.Pin] = append(byPin[r.Pin], r.Follower)
		}
		for _, pin := range pins {
			followers := byPin[pin]
			for start := 0; start < len(followers); start += shardsql.FeedChunk {
				if err := shardsql.DeletePinFromFeeds(ctx, tx, sh.DB, pin, followers[start:min(start+shardsql.FeedChunk, len(followers))]); err != nil {
					return err
				}
			}
		}
	}
	return tx.Commit(ctx)
}

// clearOutbox deletes the feed_outbox rows of pins whose fan-out (or, with
// remove, whose removal) is written, one transaction per host. A row that
// changed kind meanwhile (the pin was deleted) stays for its own job. A
// failure only means the next sweep does those pins again.
func (f *Fanout) clearOutbox(ctx context.Context, t *topology.Topology, pins []uint64, remove bool) {
	byHost := map[*topology.Host]map[shardsql.DB][]uint64{}
	for _, pin := range pins {
		sh, err := t.Shard(int(idcodec.ShardOf(pin)))
		if err != nil || sh.ReadOnly {
			continue // being moved: no writes; the rows wait for a sweep after the move
		}
		if byHost[sh.Host] == nil {
			byHost[sh.Host] = map[shardsql.DB][]uint64{}
		}
		byHost[sh.Host][sh.DB] = append(byHost[sh.Host][sh.DB], pin)
	}
	var wg sync.WaitGroup
	for h, dbs := range byHost {
		wg.Go(func() {
			err := clearHost(ctx, h, dbs, remove)
			if err != nil {
				f.log.Warn("feed outbox not cleared; the next sweep redoes those pins", "pins", len(pins), "err", model.ErrorMessage(shardsql.Classify(op, h.Name, err)))
			}
		})
	}
	wg.Wait()
}

func clearHost(ctx context.Context, h *topology.Host, dbs map[shardsql.DB][]uint64, remove bool) error {
	tx, err := shardsql.BeginOn(ctx, h.DB, sql.LevelReadCommitted) // one text, as writeHost's
	if err != nil {
		return err
	}
	defer tx.Rollback()
	order := slices.Collect(maps.Keys(dbs))
	slices.SortFunc(order, func(a, b shardsql.DB) int { return a.N - b.N }) // in one order, as writeHost
	for _, db := range order {
		if err := shardsql.DeleteOutbox(ctx, tx, db, dbs[db], remove); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// followersOf reads all of a user's followers, by primary key, in pages.
// A deleted user has none (its followers are drained on delete).
func followersOf(ctx context.Context, t *topology.Topology, user uint64) ([]uint64, error) {
	sh, _, err := t.Route(user, idcodec.TypeUser)
	if err != nil {
		return nil, shardsql.Classify(op, "", err)
	}
	var out []uint64
	var after uint64
	for {
		ids, err := shardsql.ReadIDsAfter(ctx, sh.Host.DB, sh.DB, model.UserFollowers, user, after, followersPage)
		if err != nil {
			return nil, shardsql.Classify(op, sh.Host.Name, err)
		}
		out = append(out, ids...)
		if len(ids) < followersPage {
			return out, nil
		}
		after = ids[len(ids)-1]
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
