package store

import (
	"context"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// A pair (a follow, a like) has two sides on two shards, so writing it is
// two transactions. The forward side's transaction also marks the pair in
// its shard's pair_outbox, and settle then makes the inverse side (and a
// follow's feed rows) match the forward row while holding the mark's lock,
// and deletes the mark. A server that dies in between leaves the mark, and
// any server's sweep (heal.go) settles the pair: every pair is whole again
// within seconds, with no command run. Every writer of a forward row takes
// the mark's lock first, so settles of one pair queue, and each makes the
// inverse match a forward row that cannot change under it.

// pairRoute validates a mapping call: m must be known and, for writes, be
// one that clients may write (an inverse pair); from and to must be of
// m's types. The pair is returned forward side first.
func (s *Lists) pairRoute(op string, m model.Mapping, from, to uint64) (shardsql.Pair, error) {
	if !m.Valid() {
		return shardsql.Pair{}, model.Wrap(op, model.EInvalid, "unknown mapping", nil)
	}
	inv, ok := m.Inverse()
	if !ok || m == model.PinSavedFrom || m == model.PinSaves {
		return shardsql.Pair{}, model.Wrap(op, model.EInvalid, m.String()+" is kept by creating and deleting objects", nil)
	}
	if _, _, err := s.route(op, from, m.From()); err != nil {
		return shardsql.Pair{}, err
	}
	if _, _, err := s.route(op, to, m.To()); err != nil {
		return shardsql.Pair{}, err
	}
	if m.Forward() {
		return shardsql.Pair{M: m, From: from, To: to}, nil
	}
	return shardsql.Pair{M: inv, From: to, To: from}, nil
}

// AddMapping adds from→to and its inverse: the forward side first, then
// the inverse, each idempotent. A follow also copies the followee's newest
// pins into the follower's feed. ENotFound when either object is not live
// (a target deleted meanwhile leaves no pair behind).
func (s *Lists) AddMapping(ctx context.Context, m model.Mapping, from, to uint64) error {
	const op = "store.AddMapping"
	p, err := s.pairRoute(op, m, from, to)
	if err != nil {
		return err
	}
	if p.M.From() == p.M.To() && p.From == p.To {
		return model.Wrap(op, model.EInvalid, "an object cannot be linked to itself", nil)
	}
	target, err := s.objectByID(ctx, p.To, p.M.To())
	if err != nil {
		return err
	}
	if p.M == model.UserLikes && target.Flags.Secret() {
		// A pin on a secret board is as absent to others as a missing one.
		if d, err := model.DecodeDoc(target.Type, target.Doc); err != nil || d.Ref(1) != model.ID(p.From) {
			return notFound(op, p.M.To())
		}
	}
	fsh, fLocal, _ := s.route(op, p.From, p.M.From())
	at := shardsql.Now()
	err = s.inRetryTx(ctx, op, fsh, func(tx *shardsql.Tx) error {
		if err := shardsql.MarkPair(ctx, tx, fsh.DB, p, at); err != nil {
			return err
		}
		if _, _, err := readLive(ctx, tx, op, fsh, p.M.From(), fLocal, shardsql.ShareLock); err != nil {
			return err
		}
		_, err := shardsql.AddEdge(ctx, tx, fsh.DB, p.M, p.From, p.To, shardsql.Sequence(at))
		return err
	})
	if err != nil {
		return err
	}
	return s.settle(ctx, op, p)
}

// RemoveMapping removes from→to and its inverse, forward side first.
// Removing an absent pair is a no-op. The objects need not be live.
func (s *Lists) RemoveMapping(ctx context.Context, m model.Mapping, from, to uint64) error {
	const op = "store.RemoveMapping"
	p, err := s.pairRoute(op, m, from, to)
	if err != nil {
		return err
	}
	return s.removePair(ctx, op, p)
}

// removePair removes p's forward row (an unfollow takes the followee's
// pins out of the follower's feed in the same transaction), then settles
// the pair (its inverse goes).
func (s *Lists) removePair(ctx context.Context, op string, p shardsql.Pair) error {
	fsh, _, err := s.route(op, p.From, p.M.From())
	if err != nil {
		return err
	}
	err = s.inRetryTx(ctx, op, fsh, func(tx *shardsql.Tx) error {
		if err := shardsql.MarkPair(ctx, tx, fsh.DB, p, shardsql.Now()); err != nil {
			return err
		}
		if _, err := shardsql.RemoveEdge(ctx, tx, fsh.DB, p.M, p.From, p.To); err != nil {
			return err
		}
		if p.M == model.UserFollowing {
			// The feed is on the follower's shard, like the forward row:
			// the followee's pins leave it now, even when the other side's
			// host is down and the settle has to wait for it.
			_, err := unfollowFeed(ctx, tx, fsh, p.From, p.To)
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.settle(ctx, op, p)
}

// heal marks p and settles it: the inverse comes to match the forward row,
// whatever either holds now.
func (s *Lists) heal(ctx context.Context, op string, p shardsql.Pair) error {
	fsh, _, err := s.route(op, p.From, p.M.From())
	if err != nil {
		return err
	}
	if err := s.inRetryTx(ctx, op, fsh, func(tx *shardsql.Tx) error {
		return shardsql.MarkPair(ctx, tx, fsh.DB, p, shardsql.Now())
	}); err != nil {
		return err
	}
	return s.settle(ctx, op, p)
}

// settle makes p's inverse side match its forward row, under the lock of
// p's pair_outbox mark, and deletes the mark; a pair with no mark was
// settled after its last change and is left alone. A forward row whose
// target is no longer live is removed instead (the target's delete has
// drained, or will drain, its other pairs): then settle returns ENotFound.
// A follow's feed follows the forward row: the followee's newest pins are
// copied in, or all of them taken out.
func (s *Lists) settle(ctx context.Context, op string, p shardsql.Pair) error {
	fsh, _, err := s.route(op, p.From, p.M.From())
	if err != nil {
		return err
	}
	inv, _ := p.M.Inverse()
	tsh, tLocal, err := s.route(op, p.To, inv.From())
	if err != nil {
		return err
	}
	// Both routes are pinned before the forward transaction opens: while a
	// move holds either shard, the settle waits in the write buffer with
	// no transaction open and no lock held, and then both transactions run
	// on the map in force.
	fsh, tsh, release, err := s.enterShards(ctx, op, fsh.N, tsh.N)
	if err != nil {
		return err
	}
	defer release()
	gone, pulled := false, false
	err = s.retryTxOn(ctx, op, fsh, func(tx *shardsql.Tx) error {
		gone, pulled = false, false
		marked, err := shardsql.LockPair(ctx, tx, fsh.DB, p)
		if err != nil || !marked {
			return err
		}
		seq, present, err := shardsql.ReadEdge(ctx, tx, fsh.DB, p.M, p.From, p.To)
		if err != nil {
			return err
		}
		if present {
			err = s.retryTxOn(ctx, op, tsh, func(itx *shardsql.Tx) error {
				// The target's row lock orders this with a delete of the
				// target: either the inverse row commits before the delete
				// does, and the delete's drain removes the pair, or the
				// target is seen deleted.
				if _, _, err := readLive(ctx, itx, op, tsh, p.M.To(), tLocal, shardsql.ShareLock); err != nil {
					return err
				}
				if _, err := shardsql.AddEdge(ctx, itx, tsh.DB, inv, p.To, p.From, seq); err != nil || p.M != model.UserFollowing {
					return err
				}
				// After the follower is counted: a pin that makes the
				// followee pulled either sees this follower (its Pull job
				// tells them) or has its record read here, waited for under
				// the shared lock.
				pulled, err = shardsql.IsPulled(ctx, itx, tsh.DB, p.To, shardsql.ShareLock)
				return err
			})
			if model.IsCode(err, model.ENotFound) {
				gone, present = true, false
				_, err = shardsql.RemoveEdge(ctx, tx, fsh.DB, p.M, p.From, p.To)
			}
			if err != nil {
				return err
			}
		}
		if !present {
			err = s.retryTxOn(ctx, op, tsh, func(itx *shardsql.Tx) error {
				_, err := shardsql.RemoveEdge(ctx, itx, tsh.DB, inv, p.To, p.From)
				return err
			})
		}
		if err != nil {
			return err
		}
		if p.M == model.UserFollowing {
			if err := s.settleFeed(ctx, op, tx, fsh, p, present, pulled); err != nil {
				return err
			}
		}
		return shardsql.UnmarkPair(ctx, tx, fsh.DB, p)
	})
	if err == nil && gone {
		return notFound(op, p.M.To())
	}
	return err
}

// settleFeed makes the follower's feed match a settled follow (the feed is
// on the follower's shard, like the forward row, so it is written in the
// settle's own transaction): followed, the followee's newest FeedBackfill
// pins are copied in (a pin created meanwhile is seen either by this copy
// or by its own fan-out, which reads the followers after the pin and this
// follow's inverse committed), or, for a pulled followee, a feed_pulled
// row is written; not followed, every pin of theirs goes.
func (s *Lists) settleFeed(ctx context.Context, op string, tx *shardsql.Tx, fsh topology.Shard, p shardsql.Pair, followed, pulled bool) error {
	if !followed {
		_, err := unfollowFeed(ctx, tx, fsh, p.From, p.To)
		return err
	}
	if pulled {
		return shardsql.InsertPulled(ctx, tx, fsh.DB, p.From, p.To)
	}
	rows, err := s.feeds.backfillRows(ctx, op, p.From, p.To)
	if err != nil {
		return err
	}
	return insertFeedRows(ctx, tx, fsh, rows)
}
