package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// Idempotency keys make a create that a client retries with the same
// Idempotency-Key happen once (model.Idempotency, carried by the request's
// context). A key's row lives on the shard of the create's forward write
// (a pin's board's shard, a board's owner's, a comment's pin's; a user is
// placed on the open shard its key hashes to), so:
//
//  1. claimKey inserts the row pending, with a random claim token, in its
//     own statement: of concurrent requests with one key exactly one
//     inserts it. A request that finds the row answers from it: another
//     request's body is EKeyReused, a done row is replayed
//     (model.ErrReplayed), a pending row is EKeyInUse until its claim is
//     older than model.IdempotencyLease, when the request takes it over
//     with an update conditional on the old claim token (of several
//     takers one wins).
//  2. the create's own transaction marks the row done with the response,
//     on the condition that its claim still holds the row. So the create
//     and the key's completion commit together, or neither does; a
//     claimant taken over (it outlived its lease) rolls back.
//  3. a create that fails deletes its pending row, so a retry runs at
//     once; a server that dies leaves it pending until the lease ends.
//
// A user's create is three steps (usernames.go): the key notes the user
// once it exists, and a takeover finishes that user rather than making
// another. Rows live model.IdempotencyWindow; an expired row is a new key
// to the next request, and sweepKeys deletes them.

// keyClaim is a create's hold on its idempotency key.
type keyClaim struct {
	k     *model.Idempotency
	sh    topology.Shard
	claim uint64
	prior uint64 // the user a dead claimant had made (a takeover of a user create)
	// held: the create may still finish without this request (a user the
	// sweep can make visible), so a failure keeps the claim, for a
	// takeover to finish, instead of releasing it.
	held bool
}

// keyed runs create under ctx's idempotency key, if it carries one, on
// sh, the shard of the create's forward write: claim, create (which calls
// complete in its transaction), and release the claim when create fails.
func (s *Store) keyed(ctx context.Context, op string, sh topology.Shard, create func(kc *keyClaim) error) error {
	kc, err := s.claimKey(ctx, op, sh)
	if err != nil {
		return err
	}
	if err = create(kc); err != nil && kc != nil && !kc.held {
		s.releaseKey(ctx, op, kc)
	}
	return err
}

// claimKey claims ctx's key on sh (nil, nil when ctx carries none). It
// returns model.ErrReplayed with the key's Replay set when the request
// was done before, EKeyReused when the key was used with another
// request, EKeyInUse while its first request runs.
func (s *Store) claimKey(ctx context.Context, op string, sh topology.Shard) (*keyClaim, error) {
	k := model.IdempotencyOf(ctx)
	if k == nil {
		return nil, nil
	}
	sh, release, err := s.enterShard(ctx, op, sh.N)
	if err != nil {
		return nil, err
	}
	defer release()
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	db := sh.Host.DB
	for range 3 {
		claim, now := newToken(), shardsql.Now()
		expires := now.Add(model.IdempotencyWindow)
		err := shardsql.InsertKey(ctx, db, sh.DB, k.Hash[:], k.Fingerprint[:], claim, now, expires)
		if err == nil {
			return &keyClaim{k: k, sh: sh, claim: claim}, nil
		}
		if !shardsql.IsDuplicate(err) {
			return nil, classify(op, sh, err)
		}
		r, err := shardsql.ReadKey(ctx, db, sh.DB, k.Hash[:], shardsql.NoLock)
		if errors.Is(err, sql.ErrNoRows) {
			continue // released since the insert
		}
		if err != nil {
			return nil, classify(op, sh, err)
		}
		expired := now.After(r.ExpiresAt)
		switch {
		case expired: // a new key to this request
		case !bytes.Equal(r.Fingerprint, k.Fingerprint[:]):
			return nil, model.Wrap(op, model.EKeyReused, "this Idempotency-Key was used with another request (method, path or body)", nil)
		case r.State == shardsql.KeyDone:
			k.Replay = r.Response
			return nil, model.ErrReplayed
		case now.Sub(r.ClaimedAt) < model.IdempotencyLease:
			return nil, model.Wrap(op, model.EKeyInUse, "a request with this Idempotency-Key is still running; retry later", nil)
		}
		ok, err := shardsql.TakeKey(ctx, db, sh.DB, k.Hash[:], k.Fingerprint[:], r.Claim, r.State, claim, now, expires, !expired)
		if err != nil {
			return nil, classify(op, sh, err)
		}
		if ok {
			kc := &keyClaim{k: k, sh: sh, claim: claim}
			if !expired {
				kc.prior = r.ObjectID
			}
			return kc, nil
		}
		// another request took it first: look again
	}
	return nil, model.Wrap(op, model.EKeyInUse, "a request with this Idempotency-Key is still running; retry later", nil)
}

// complete marks the key done with the response to o, in the create's
// transaction tx; EKeyInUse when the claim no longer holds the key (a
// retry took it over), which rolls the create back. A nil kc does nothing.
func (kc *keyClaim) complete(ctx context.Context, tx *shardsql.Tx, op string, o model.Object) error {
	if kc == nil {
		return nil
	}
	resp, err := kc.k.Render(o)
	if err != nil {
		return model.Wrap(op, model.EInternal, "", err)
	}
	ok, err := shardsql.CompleteKey(ctx, tx, kc.sh.DB, kc.k.Hash[:], kc.claim, o.ID, resp)
	if err != nil {
		return err
	}
	if !ok {
		return model.Wrap(op, model.EKeyInUse, "a retry with this Idempotency-Key took it over", nil)
	}
	return nil
}

// note records, while kc holds the key, the object its create has made
// so far (a user not yet visible), in the create's transaction tx.
func (kc *keyClaim) note(ctx context.Context, tx *shardsql.Tx, op string, id uint64) error {
	if kc == nil {
		return nil
	}
	ok, err := shardsql.NoteKeyObject(ctx, tx, kc.sh.DB, kc.k.Hash[:], kc.claim, id)
	if err == nil && !ok {
		err = model.Wrap(op, model.EKeyInUse, "a retry with this Idempotency-Key took it over", nil)
	}
	return err
}

// releaseKey deletes kc's row if kc still holds it pending: its create
// failed (or its outcome is unknown and it did not commit), so a retry
// may run at once. A failure leaves the row to its lease.
func (s *Store) releaseKey(ctx context.Context, op string, kc *keyClaim) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.QueryTimeout)
	defer cancel()
	if err := shardsql.ReleaseKey(ctx, kc.sh.Host.DB, kc.sh.DB, kc.k.Hash[:], kc.claim); err != nil {
		s.log.Warn("idempotency key left pending until its lease ends", "err", model.ErrorMessage(classify(op, kc.sh, err)))
	}
}

// userShard is where a new user goes: the open shard its key hashes to
// when ctx carries a key (so a retry finds the key where the user is
// made), a random open shard otherwise.
func (s *Store) userShard(ctx context.Context) topology.Shard {
	t := s.router.Current()
	if k := model.IdempotencyOf(ctx); k != nil {
		return t.OpenShard(binary.BigEndian.Uint64(k.Hash[:8]))
	}
	return t.RandomOpen()
}

// resumeUser finishes the user a dead claimant of kc made (kc.prior):
// it settles the user as the sweep would, and when the user exists,
// completes the key with it and returns it with done true. A user that
// was dropped (its name was taken) leaves the create to run anew.
func (s *Store) resumeUser(ctx context.Context, op string, kc *keyClaim) (model.Object, bool, error) {
	sh, local, err := s.route(op, kc.prior, idcodec.TypeUser)
	if err != nil || sh.DB != kc.sh.DB {
		return model.Object{}, false, nil // not a user of this shard: make a new one
	}
	_, pending, err := shardsql.UserState(ctx, sh.Host.DB, sh.DB, local, shardsql.NoLock)
	if errors.Is(err, sql.ErrNoRows) {
		return model.Object{}, false, nil
	}
	if err != nil {
		return model.Object{}, false, classify(op, sh, err)
	}
	if pending != "" {
		if err := s.finishUser(ctx, op, shardsql.UserClaim{User: kc.prior, Key: pending}); err != nil {
			return model.Object{}, false, err
		}
	}
	var obj model.Object
	found := false
	err = s.inTx(ctx, op, sh, func(tx *shardsql.Tx) error {
		r, err := shardsql.ReadObject(ctx, tx, sh.DB, idcodec.TypeUser, local, shardsql.NoLock)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // dropped: its name was taken
		}
		if err != nil {
			return err
		}
		found, obj = true, r.Object(sh.DB, idcodec.TypeUser)
		return kc.complete(ctx, tx, op, obj)
	})
	return obj, found && err == nil, err
}

// keySweepEvery is how often sweepKeys runs; keySweepBatch bounds the
// rows one statement deletes.
const (
	keySweepEvery = time.Hour
	keySweepBatch = 1000
)

// SweepKeys deletes the idempotency keys that expired, on every writable
// shard, and returns how many it deleted. An expired row is already a new
// key to a request; this only frees its space.
func (s *Store) SweepKeys(ctx context.Context) (int, error) {
	const op = "store.SweepKeys"
	cutoff := shardsql.Now()
	deleted := 0
	var errs []error
	for n := range s.router.Current().Len() {
		for ctx.Err() == nil {
			t, release := s.router.Enter()
			sh, _ := t.Shard(n)
			if sh.ReadOnly {
				release()
				break
			}
			c, cancel := s.deadline(ctx)
			k, err := shardsql.DeleteExpiredKeys(c, sh.Host.DB, sh.DB, cutoff, keySweepBatch)
			cancel()
			release()
			deleted += k
			if err != nil && len(errs) < 10 {
				errs = append(errs, classify(op, sh, err))
			}
			if err != nil || k < keySweepBatch {
				break
			}
		}
	}
	return deleted, errors.Join(errs...)
}
