package store

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// The home feed is hybrid (feedpull.go): user_feed, on the follower's
// shard, holds (follower, pin, sequence, author) for the pins of the
// pushed users the follower follows (package fanout writes it), and a page
// merges it with the pin lists of the pulled users they follow. The
// request-path parts live here:
//
//   - Feed reads a page: one index range scan of user_feed, one of
//     feed_pulled, and one statement per host holding pulled authors'
//     pins, merged.
//   - Following copies the followee's newest FeedBackfill pins, in the
//     follow call and after both sides of the pair are written: a pin
//     created meanwhile is seen either by that copy or by its own fan-out,
//     which reads the followers after the pin committed.
//   - Unfollowing deletes the followee's rows from the follower's feed,
//     unless the follow was made again meanwhile.
//   - RepairFeeds checks every follow's rows against the followee's pins.

// Feeds is the home feed: reading a page, the fan-out backlog and its
// outbox sweep, and repairing follows' feed rows. Follows and pins reach
// it through the pair and create paths (backfillRows, pullOrPush).
type Feeds struct{ *core }

// FeedBacklog is the number of pins whose feed fan-out has not been
// written yet (queued, running, or waiting for a host to come back).
func (s *Feeds) FeedBacklog() int64 { return s.feed.Backlog() }

// SweepFeedOutbox queues the fan-out of every pin whose feed_outbox row is
// older than olderThan and returns how many it queued (fanout.Sweep).
func (s *Feeds) SweepFeedOutbox(ctx context.Context, olderThan time.Duration) (int, error) {
	return s.feed.Sweep(ctx, olderThan)
}

// Feed returns one page of a user's home feed: the pins of the users they
// follow, newest first (ties on the pin id), paged by cursor: the
// cursor is the (sequence, pin) position every source is read after, so a
// page costs the same at any depth. ENotFound when the user is not
// live; EInvalid for an offset or a cursor of another list.
func (s *Feeds) Feed(ctx context.Context, user uint64, p model.Page) (model.List, error) {
	const op = "store.Feed"
	p.Desc = true
	if p.Offset != 0 {
		return model.List{}, model.Wrap(op, model.EInvalid, "the feed is paged by cursor only", nil)
	}
	if err := p.Normalize(); err != nil {
		return model.List{}, err
	}
	sh, local, err := s.route(op, user, idcodec.TypeUser)
	if err != nil {
		return model.List{}, err
	}
	q, err := s.pageOf(p, kindFeed, user)
	if err != nil {
		return model.List{}, err
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	if _, err := s.readPoint(ctx, op, sh, idcodec.TypeUser, local, 0); err != nil {
		return model.List{}, err
	}
	entries, err := shardsql.ReadPage(ctx, s.reader(ctx, sh).DB, sh.DB, shardsql.FeedTable, user, q) // replica hook
	if err != nil {
		return model.List{}, classify(op, sh, err)
	}
	pulled, err := s.pulledPins(ctx, op, sh, user, q)
	if err != nil {
		return model.List{}, err
	}
	return s.page(mergeFeed(entries, pulled, q.Limit), p, kindFeed, user), nil
}

// backfillRows reads the followee's newest FeedBackfill pins as the feed
// rows a follow copies into the follower's feed. It runs inside the
// follower's transaction but on the followee's host, so under a deadline
// of its own.
func (s *Feeds) backfillRows(ctx context.Context, op string, follower, followee uint64) ([]shardsql.FeedRow, error) {
	ash, _, err := s.route(op, followee, idcodec.TypeUser)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	pins, err := shardsql.ReadPage(ctx, ash.Host.DB, ash.DB, model.UserPins.Table(), followee, shardsql.Page{Limit: s.cfg.FeedBackfill, Desc: true})
	if err != nil {
		return nil, classify(op, ash, err)
	}
	rows := make([]shardsql.FeedRow, len(pins))
	for i, e := range pins {
		rows[i] = shardsql.FeedRow{Follower: follower, Pin: e.To, Author: followee, Seq: e.Sequence}
	}
	return rows, nil
}

// insertFeedRows inserts rows in chunks (shardsql.InsertFeedRows).
func insertFeedRows(ctx context.Context, tx *shardsql.Tx, sh topology.Shard, rows []shardsql.FeedRow) error {
	for start := 0; start < len(rows); start += shardsql.FeedChunk {
		if err := shardsql.InsertFeedRows(ctx, tx, sh.DB, rows[start:min(start+shardsql.FeedChunk, len(rows))]); err != nil {
			return err
		}
	}
	return nil
}

// dropFeedAuthor deletes a followee's pins from the follower's feed after
// an unfollow, unless the follow exists again (its row is read under a
// shared lock, so a follow made meanwhile waits and then backfills).
func (s *Feeds) dropFeedAuthor(ctx context.Context, op string, follower, followee uint64) (int64, error) {
	sh, _, err := s.route(op, follower, idcodec.TypeUser)
	if err != nil {
		return 0, err
	}
	var n int64
	err = s.inRetryTx(ctx, op, sh, func(tx *shardsql.Tx) error {
		again, err := shardsql.Follows(ctx, tx, sh.DB, follower, followee, shardsql.ShareLock)
		if err != nil || again {
			return err
		}
		n, err = unfollowFeed(ctx, tx, sh, follower, followee)
		return err
	})
	return n, err
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
func (s *Feeds) RepairFeeds(ctx context.Context, dryRun bool, progress io.Writer) (FeedRepairReport, error) {
	const op = "store.RepairFeeds"
	var rep FeedRepairReport
	t := s.router.Current()
	for n := range t.Len() {
		sh, _ := t.Shard(n)
		// Rows whose author the follower no longer follows.
		gone, err := shardsql.UnfollowedFeedAuthors(ctx, sh.Host.DB, sh.DB)
		if err != nil {
			return rep, classify(op, sh, err)
		}
		// feed_pulled rows of authors no longer followed.
		unpulled, err := shardsql.UnfollowedPulled(ctx, sh.Host.DB, sh.DB)
		if err != nil {
			return rep, classify(op, sh, err)
		}
		if dryRun {
			rep.Stale += len(unpulled)
			unpulled = nil
		}
		for _, g := range append(gone, unpulled...) {
			if dryRun {
				k, err := shardsql.CountFeedAuthor(ctx, sh.Host.DB, sh.DB, g[0], g[1])
				if err != nil {
					return rep, classify(op, sh, err)
				}
				rep.Stale += k
				continue
			}
			k, err := s.dropFeedAuthor(ctx, op, g[0], g[1])
			if err != nil {
				return rep, err
			}
			rep.Stale += int(k)
		}
		// Every follow of this shard against its followee's pins.
		err = s.scanTable(ctx, sh, model.UserFollowing.Table(), 500, func(follows []shardsql.PairRow) error {
			for _, f := range follows {
				if err := s.repairFollowFeed(ctx, sh, f, dryRun, &rep); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return rep, classify(op, sh, err)
		}
	}
	if progress != nil {
		fmt.Fprintf(progress, "repair: %s: checked %d follows and %d rows, %d missing, %d stale\n", shardsql.FeedTable, rep.Follows, rep.Rows, rep.Missing, rep.Stale)
	}
	return rep, nil
}

// scanTable reads every row of one of sh's mapping tables in batches of n,
// in primary-key order, and hands each batch to fn.
func (s *core) scanTable(ctx context.Context, sh topology.Shard, table string, n int, fn func([]shardsql.PairRow) error) error {
	var last shardsql.PairRow
	for {
		if err := s.pace(ctx, sh.Host.Name); err != nil {
			return err
		}
		rows, err := shardsql.ScanPairs(ctx, sh.Host.DB, sh.DB, table, last.From, last.To, n)
		if err != nil {
			return err
		}
		if err := fn(rows); err != nil {
			return err
		}
		if len(rows) < n {
			return nil
		}
		last = rows[len(rows)-1]
	}
}

// repairFollowFeed settles one follow (f.From follows f.To since f.Seq).
func (s *Feeds) repairFollowFeed(ctx context.Context, fsh topology.Shard, f shardsql.PairRow, dryRun bool, rep *FeedRepairReport) error {
	const op = "store.RepairFeeds"
	rep.Follows++
	ash, _, err := s.route(op, f.To, idcodec.TypeUser)
	if err != nil {
		return nil // the followee is on no configured shard: nothing to copy
	}
	want, err := shardsql.PinsSince(ctx, ash.Host.DB, ash.DB, f.To, s.cfg.FeedBackfill, f.Seq)
	if err != nil {
		return classify(op, ash, err)
	}
	// A pulled followee's pins are merged at read time: what the feed
	// needs is their feed_pulled row, not rows of their pins.
	pulled, err := shardsql.IsPulled(ctx, ash.Host.DB, ash.DB, f.To, shardsql.NoLock)
	if err != nil {
		return classify(op, ash, err)
	}
	tell := false
	if pulled {
		has, err := shardsql.HasPulled(ctx, fsh.Host.DB, fsh.DB, f.From, f.To)
		if err != nil {
			return classify(op, fsh, err)
		}
		tell, want = !has, nil
	}
	have, err := shardsql.FeedOfAuthor(ctx, fsh.Host.DB, fsh.DB, f.From, f.To)
	if err != nil {
		return classify(op, fsh, err)
	}
	rep.Rows += len(have)
	held := make(map[uint64]bool, len(have))
	for _, e := range have {
		held[e.To] = true
	}
	wanted := make(map[uint64]bool, len(want))
	var add []shardsql.FeedRow
	for _, e := range want {
		wanted[e.To] = true
		if !held[e.To] {
			add = append(add, shardsql.FeedRow{Follower: f.From, Pin: e.To, Author: f.To, Seq: e.Sequence})
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
	for start := 0; start < len(check); start += shardsql.FeedChunk {
		chunk := check[start:min(start+shardsql.FeedChunk, len(check))]
		live, err := shardsql.ListedAmong(ctx, ash.Host.DB, ash.DB, model.UserPins, f.To, chunk)
		if err != nil {
			return classify(op, ash, err)
		}
		for _, id := range chunk {
			if !live[id] {
				stale = append(stale, id)
			}
		}
	}
	if tell {
		rep.Missing++
	}
	rep.Missing += len(add)
	rep.Stale += len(stale)
	if dryRun || len(add)+len(stale) == 0 && !tell {
		return nil
	}
	return s.inTx(ctx, op, fsh, func(tx *shardsql.Tx) error {
		if tell {
			if err := shardsql.InsertPulledFollowers(ctx, tx, fsh.DB, f.To, []uint64{f.From}); err != nil {
				return err
			}
		}
		if err := insertFeedRows(ctx, tx, fsh, add); err != nil {
			return err
		}
		for start := 0; start < len(stale); start += shardsql.FeedChunk {
			if err := shardsql.DeleteFeedPins(ctx, tx, fsh.DB, f.From, stale[start:min(start+shardsql.FeedChunk, len(stale))]); err != nil {
				return err
			}
		}
		return nil
	})
}
