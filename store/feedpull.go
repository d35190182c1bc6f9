package store

import (
	"context"
	"slices"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// The hybrid feed (Instagram's answer to celebrity authors). An author is
// pushed (fan-out on write, package fanout) or pulled (their pins merged
// into their followers' feeds at read time):
//
//   - Each pin decides at creation, in its own transaction, from its
//     author's follower count (mapping_counts, on the author's shard like
//     the pin): below Config.FeedPullThreshold it is fanned out as before;
//     at or above, it writes no feed row and the author is recorded in
//     feed_pull_authors. The first such pin queues a Pull job that writes
//     one feed_pulled row per follower, once; a follow of a pulled author
//     writes that row instead of copying their pins.
//   - A feed page merges user_feed with the pins (user_pins) of every
//     pulled author in feed_pulled, each source read from the cursor's
//     (sequence, to_id) position with a keyset predicate and limit+1 rows,
//     de-duplicated by pin id.
//   - Up: rows an author's earlier pins left in feeds stay and are merged
//     with their pin list (de-duplicated). Down: an author whose count
//     falls below the threshold has their new pins pushed again, and stays
//     in feed_pulled, so every pin of theirs made while pulled is still
//     merged: the merge covers all of a pulled author's pins, whenever
//     made, and a pin pushed as well appears once.
//
// So a follower's feed holds, for a pushed author, the pins made since
// the follow plus the newest FeedBackfill at the follow, and for an author
// ever pulled, every live pin of theirs.

// pullOrPush records, in a new pin's create transaction on its author's
// shard, how the pin (the object tx inserted) reaches feeds: pushed (its
// feed_outbox row) or pulled (the author in feed_pull_authors; newly
// reports that this pin made the record, so its followers must be told).
// n is the author's follower count as the transaction read it without a
// lock (with the pin's board: shardsql.ReadBoardOwnerCounted).
func (s *Feeds) pullOrPush(ctx context.Context, tx *shardsql.Tx, sh topology.Shard, author uint64, n, seq int64, at time.Time) (pulled, newly bool, err error) {
	if n >= s.cfg.FeedPullThreshold {
		// Pulled: read it again under a shared lock, so a follow counted
		// meanwhile either commits first (and this pin's Pull job, which
		// reads the followers after this commit, tells them) or waits for
		// this commit (and its settle then reads the record).
		n, err = shardsql.CountLocked(ctx, tx, sh.DB, model.UserFollowers, author, shardsql.ShareLock)
	}
	if err != nil {
		return false, false, err
	}
	if n < s.cfg.FeedPullThreshold {
		return false, false, shardsql.InsertOutbox(ctx, tx, sh.DB, author, seq, at)
	}
	newly, err = shardsql.MarkPulled(ctx, tx, sh.DB, author, seq)
	return true, newly, err
}

// pulledPins reads the first q.Limit pins, in the feed's order from q's
// position, of the pulled authors follower follows: one statement for
// their list, then one per host holding their pins, concurrently.
func (s *Feeds) pulledPins(ctx context.Context, op string, fsh topology.Shard, follower uint64, q shardsql.Page) ([]model.Entry, error) {
	authors, err := shardsql.PulledAuthors(ctx, s.reader(ctx, fsh).DB, fsh.DB, follower) // replica hook
	if err != nil || len(authors) == 0 {
		return nil, classify(op, fsh, err)
	}
	byHost := map[*topology.Host][]shardsql.AuthorAt{}
	for _, a := range authors {
		ash, _, err := s.route(op, a, idcodec.TypeUser)
		if err != nil {
			continue // not a user this map routes: no pins to merge
		}
		byHost[ash.Host] = append(byHost[ash.Host], shardsql.AuthorAt{DB: ash.DB, Author: a})
	}
	var out []model.Entry
	results := make(chan []model.Entry, len(byHost))
	err = eachHost(byHost, func(h *topology.Host, as []shardsql.AuthorAt) error {
		e, err := shardsql.ReadPulledPins(ctx, s.hostReader(ctx, h).DB, as, q) // replica hook
		if err != nil {
			return shardsql.Classify(op, h.Name, err)
		}
		results <- e
		return nil
	})
	close(results)
	for e := range results {
		out = append(out, e...)
	}
	return out, err
}

// mergeFeed merges the materialised page with the pulled pins, newest
// first by (sequence, to_id), drops a pin both hold (same sequence, so
// adjacent), and keeps at most limit entries.
func mergeFeed(materialised, pulled []model.Entry, limit int) []model.Entry {
	if len(pulled) == 0 {
		return materialised
	}
	all := append(slices.Clip(materialised), pulled...)
	slices.SortFunc(all, func(a, b model.Entry) int {
		if a.Sequence != b.Sequence {
			if a.Sequence > b.Sequence {
				return -1
			}
			return 1
		}
		switch {
		case a.To > b.To:
			return -1
		case a.To < b.To:
			return 1
		}
		return 0
	})
	all = slices.CompactFunc(all, func(a, b model.Entry) bool { return a.To == b.To })
	return all[:min(len(all), limit)]
}

// unfollowFeed takes a followee out of the follower's feed, in the
// transaction on the follower's shard: their rows and their feed_pulled
// row. It returns how many rows went.
func unfollowFeed(ctx context.Context, tx *shardsql.Tx, fsh topology.Shard, follower, followee uint64) (int64, error) {
	n, err := shardsql.DeleteFeedAuthor(ctx, tx, fsh.DB, follower, followee)
	if err != nil {
		return 0, err
	}
	k, err := shardsql.DeletePulled(ctx, tx, fsh.DB, follower, followee)
	return n + k, err
}
