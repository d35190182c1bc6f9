package store

import (
	"context"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
)

// pairRoute validates a mapping call: m must be known and, for writes, be
// one that clients may write (an inverse pair); from and to must be of
// m's types. The pair is returned forward side first.
func (s *Store) pairRoute(op string, m model.Mapping, from, to uint64) (fwd model.Mapping, f, t uint64, err error) {
	if !m.Valid() {
		return 0, 0, 0, model.Wrap(op, model.EInvalid, "unknown mapping", nil)
	}
	inv, ok := m.Inverse()
	if !ok {
		return 0, 0, 0, model.Wrap(op, model.EInvalid, m.String()+" is kept by creating and deleting objects", nil)
	}
	if _, _, err := s.route(op, from, m.From()); err != nil {
		return 0, 0, 0, err
	}
	if _, _, err := s.route(op, to, m.To()); err != nil {
		return 0, 0, 0, err
	}
	if m.Forward() {
		return m, from, to, nil
	}
	return inv, to, from, nil
}

// AddMapping adds from→to and its inverse: forward side first, each side
// in its own shard transaction, each idempotent. A follow also copies the
// followee's newest pins into the follower's feed. ENotFound when either
// object is not live.
func (s *Store) AddMapping(ctx context.Context, m model.Mapping, from, to uint64) error {
	const op = "store.AddMapping"
	fwd, f, t, err := s.pairRoute(op, m, from, to)
	if err != nil {
		return err
	}
	if fwd.From() == fwd.To() && f == t {
		return model.Wrap(op, model.EInvalid, "an object cannot be linked to itself", nil)
	}
	if _, err := s.Get(ctx, t, fwd.To()); err != nil {
		return err
	}
	fsh, fLocal, _ := s.route(op, f, fwd.From())
	seq := shardsql.Sequence(shardsql.Now())
	err = s.inRetryTx(ctx, op, fsh, func(tx *sqlx.Tx) error {
		if _, _, err := readLive(ctx, tx, op, fsh, fwd.From(), fLocal, shardsql.ShareLock); err != nil {
			return err
		}
		_, err := shardsql.AddEdge(ctx, tx, fsh.DB, fwd, f, t, seq)
		return err
	})
	if err != nil {
		return err
	}
	inv, _ := fwd.Inverse()
	tsh, tLocal, _ := s.route(op, t, inv.From())
	err = s.inRetryTx(ctx, op, tsh, func(tx *sqlx.Tx) error {
		// The target's row lock orders this with a delete of the target:
		// either the inverse row commits before the delete does, and the
		// delete's drain removes the pair, or the target is seen deleted.
		if _, _, err := readLive(ctx, tx, op, tsh, fwd.To(), tLocal, shardsql.ShareLock); err != nil {
			return err
		}
		_, err := shardsql.AddEdge(ctx, tx, tsh.DB, inv, t, f, seq)
		return err
	})
	if model.IsCode(err, model.ENotFound) {
		// Deleted since the check above: take the forward row back (if this
		// fails too, repair removes rows that point at deleted objects).
		if rerr := s.removeEdge(ctx, op, fwd, f, t); rerr != nil {
			return rerr
		}
	}
	if err == nil && fwd == model.UserFollowing {
		err = s.backfillFeed(ctx, op, f, t)
	}
	return err
}

// RemoveMapping removes from→to and its inverse, forward side first.
// Removing an absent pair is a no-op. The objects need not be live.
func (s *Store) RemoveMapping(ctx context.Context, m model.Mapping, from, to uint64) error {
	const op = "store.RemoveMapping"
	fwd, f, t, err := s.pairRoute(op, m, from, to)
	if err != nil {
		return err
	}
	return s.removePair(ctx, op, fwd, f, t)
}

// removePair removes f→t from fwd, then its inverse. An unfollow clears
// the followee's pins from the follower's feed, before the inverse (the
// feed is on the follower's shard, like the forward row; the inverse may
// be on a host that is down).
func (s *Store) removePair(ctx context.Context, op string, fwd model.Mapping, f, t uint64) error {
	if err := s.removeEdge(ctx, op, fwd, f, t); err != nil {
		return err
	}
	if fwd == model.UserFollowing {
		if _, err := s.dropFeedAuthor(ctx, op, f, t); err != nil {
			return err
		}
	}
	inv, _ := fwd.Inverse()
	return s.removeEdge(ctx, op, inv, t, f)
}

// removeEdge removes from→to from m (and its count) in a transaction of
// its own on from's shard.
func (s *Store) removeEdge(ctx context.Context, op string, m model.Mapping, from, to uint64) error {
	sh, _, err := s.route(op, from, m.From())
	if err != nil {
		return err
	}
	return s.inRetryTx(ctx, op, sh, func(tx *sqlx.Tx) error {
		_, err := shardsql.RemoveEdge(ctx, tx, sh.DB, m, from, to)
		return err
	})
}
