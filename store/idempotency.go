package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"time"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// Idempotency keys make a create that a client retries with the same
// Idempotency-Key happen once (model.Idempotency, carried by the request's
// context), whichever shard it writes to. A key has a home: the shard
// picked from a hash of its scope and key (keyHome), as a username's
// index row has (usernames.go), so every use of one key, by any request on
// any POST route, meets the same row there, the claim; the outcome of a
// claim lives on the shard the create writes to, its target:
//
//  1. claimKey inserts the claim on the key's home (pending, a random
//     claim token, the target shard), alone: of concurrent requests with
//     one key exactly one inserts it. A request that finds the claim
//     answers from it: another request's fingerprint is EKeyReused; for
//     the same request it reads the claim's outcome on its target: done
//     is replayed (model.ErrReplayed); none is EKeyInUse until the claim
//     is older than model.IdempotencyLease, when the request fences the
//     old claim on its target (FenceOutcome) and takes the claim over
//     with an update conditional on the old claim token (of several
//     takers one wins).
//  2. the create's own transaction, on the target, inserts the claim's
//     outcome: the object the create answers with (create, record;
//     outcome.go). So the create and its outcome commit together, or
//     neither does; the api renders the answer from the outcome, the
//     first time and on a replay alike. A claimant that was
//     fenced (it outlived its lease) collides with the fence row and
//     rolls back; a fence that meets a committed outcome replays it.
//  3. a create that fails fences its own claim and deletes it, so a retry
//     runs at once; a server that dies leaves it pending until the lease
//     ends.
//
// Whatever point a server dies at, a retry decides from the target's
// outcome row of the claim, which the create's commit wrote or did not:
// committed is replayed, anything else is fenced first, so no create runs
// twice and no acknowledged create loses its replay (the crash-point tests
// in idempotency_test.go). A user's create is three steps (usernames.go):
// its first transaction notes the user in the outcome, and a takeover
// finishes that user rather than making another. Rows live
// model.IdempotencyWindow; an expired claim is a new key to the next
// request, and SweepKeys deletes them.

// Keys makes creates idempotent: every create path (objects, users,
// sections, saves) runs under Keys' claim of the request's key, and UseKey
// and SweepKeys are its calls of their own.
type Keys struct{ *core }

// keyClaim is a create's hold on its idempotency key.
type keyClaim struct {
	k       *model.Idempotency
	home    topology.Shard // the key's home: its claim
	target  topology.Shard // the create's shard: the claim's outcome
	claim   uint64
	expires time.Time
	prior   uint64 // the user a dead claimant had made (a takeover of a user create)
	noted   bool   // this claim's outcome notes a user not yet visible
	// held: the create may still finish without this request (a user the
	// sweep can make visible), so a failure keeps the claim, for a
	// takeover to finish, instead of releasing it.
	held bool
}

// keyHome is the home shard of key k: picked from its hash (scope and
// key) among every shard of t, wherever its create writes.
func keyHome(t *topology.Topology, k *model.Idempotency) topology.Shard {
	sh, _ := t.Shard(int(binary.BigEndian.Uint64(k.Hash[8:16]) % uint64(t.Len())))
	return sh
}

// keyed runs create under ctx's idempotency key, if it carries one, for a
// create writing to target: claim, create (which records its outcome in
// its transaction: create, record), and release the claim when create
// fails.
//
// A create that failed in doubt (EUnavailable: its host died or was
// failed over between its statements and its answer) is resolved within
// the request when its host comes back or fails over within the write
// buffer window: releaseKey's fence finds it committed, and the request
// answers the replay, or never to commit, and the create runs again
// under a new claim, once.
func (s *Keys) keyed(ctx context.Context, op string, target topology.Shard, create func(kc *keyClaim) error) error {
	for attempt := 0; ; attempt++ {
		kc, err := s.claimKeyHeld(ctx, op, target)
		if err != nil {
			return err
		}
		err = create(kc)
		if err == nil || kc == nil || kc.held {
			return err
		}
		out, done, released := s.releaseKey(ctx, op, kc)
		if !released && !done {
			kc.k.Claimed(kc.claim) // still there: this request's, should it run again
		}
		switch {
		case done:
			return replayOf(op, kc.k, out) // it committed after all
		case released && attempt == 0 && model.IsCode(err, model.EUnavailable) && ctx.Err() == nil:
			continue // it never will: run it again
		}
		return err
	}
}

// claimKeyHeld is claimKey, waiting in the write buffer while the
// home's master cannot be reached (a failover), as inTx does.
func (s *Keys) claimKeyHeld(ctx context.Context, op string, target topology.Shard) (*keyClaim, error) {
	var hold *failoverHold
	defer func() { hold.end() }()
	for {
		kc, err := s.claimKey(ctx, op, target)
		if !unsent(err) {
			return kc, err
		}
		if k := model.IdempotencyOf(ctx); k == nil || len(keyHome(s.router.Current(), k).Host.Replicas) == 0 {
			return kc, err // no failover can come to a host without replicas
		}
		if hold == nil {
			hold = s.holdForFailover(ctx)
		}
		if !hold.wait(ctx) {
			return kc, err
		}
	}
}

// claimKey claims ctx's key on its home for a create writing to target
// (nil, nil when ctx carries none). It returns model.ErrReplayed with the
// key's Replay set when the request was done before, EKeyReused when the
// key was used with another request, EKeyInUse while its first request
// runs.
func (s *Keys) claimKey(ctx context.Context, op string, target topology.Shard) (*keyClaim, error) {
	k := model.IdempotencyOf(ctx)
	if k == nil {
		return nil, nil
	}
	t := s.router.Current()
	home, release, err := s.enterShard(ctx, op, keyHome(t, k).N)
	if err != nil {
		return nil, err
	}
	defer release()
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	db := home.Host.DB
	for range 3 {
		claim, now := newToken(), shardsql.Now()
		kc := &keyClaim{k: k, home: home, target: target, claim: claim, expires: now.Add(model.IdempotencyWindow)}
		err := shardsql.InsertKey(ctx, db, home.DB, k.Hash[:], k.Fingerprint[:], shardsql.KeyPending, claim, target.DB.N, now, kc.expires)
		if err == nil {
			return kc, nil
		}
		if !shardsql.IsDuplicate(err) {
			err = classify(op, home, err)
			if _, failed, unsent := HostFailure(err); failed && !unsent {
				k.Claimed(claim) // in doubt: this request's if it is there
			}
			return nil, err
		}
		r, err := shardsql.ReadKey(ctx, db, home.DB, k.Hash[:])
		if errors.Is(err, sql.ErrNoRows) {
			continue // released since the insert
		}
		if err != nil {
			return nil, classify(op, home, err)
		}
		if !now.After(r.ExpiresAt) { // an expired claim is a new key to this request
			if !bytes.Equal(r.Fingerprint, k.Fingerprint[:]) || r.State != shardsql.KeyPending {
				return nil, model.Wrap(op, model.EKeyReused, "this Idempotency-Key was used with another request (method, path or body)", nil)
			}
			old, err := t.Shard(r.Target)
			if err != nil {
				return nil, model.Wrap(op, model.EUnavailable, "this Idempotency-Key's create wrote to a shard this map does not hold", err)
			}
			out, err := shardsql.ReadOutcome(ctx, old.Host.DB, old.DB, k.Hash[:], r.Claim)
			found := err == nil
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return nil, classify(op, old, err)
			}
			switch {
			case found && out.State == shardsql.OutcomeDone:
				return nil, replayOf(op, k, out)
			case !(found && out.State == shardsql.OutcomeFenced) && now.Sub(r.ClaimedAt) < model.IdempotencyLease && !k.Owns(r.Claim):
				return nil, model.Wrap(op, model.EKeyInUse, "a request with this Idempotency-Key is still running; retry later", nil)
			}
			// The claimant outlived its lease, gave up, or is this request
			// run before (its claim's insert was in doubt): make sure it
			// can no longer commit, then take its claim.
			if out, err = shardsql.FenceOutcome(ctx, old.Host.DB, old.DB, k.Hash[:], r.Claim, r.ExpiresAt); err != nil {
				return nil, classify(op, old, err)
			}
			if out.State == shardsql.OutcomeDone { // it committed meanwhile
				return nil, replayOf(op, k, out)
			}
			if old.DB == target.DB {
				kc.prior = out.ObjectID // a user it made, to finish
			}
		}
		ok, err := shardsql.TakeKey(ctx, db, home.DB, k.Hash[:], k.Fingerprint[:], r.Claim, r.State, shardsql.KeyPending, claim, target.DB.N, now, kc.expires)
		if err != nil {
			return nil, classify(op, home, err)
		}
		if ok {
			return kc, nil
		}
		// another request took it first: look again
	}
	return nil, model.Wrap(op, model.EKeyInUse, "a request with this Idempotency-Key is still running; retry later", nil)
}

// UseKey records that a request that creates nothing (a read by POST)
// used ctx's key, if it carries one: the key is then this request's, and
// the same key with another request, on any POST route, is EKeyReused.
// Sent again with the same request, the request simply runs again. nil
// when ctx carries no key.
func (s *Keys) UseKey(ctx context.Context) error {
	const op = "store.UseKey"
	k := model.IdempotencyOf(ctx)
	if k == nil {
		return nil
	}
	home, release, err := s.enterShard(ctx, op, keyHome(s.router.Current(), k).N)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	db := home.Host.DB
	for range 3 {
		now := shardsql.Now()
		expires := now.Add(model.IdempotencyWindow)
		err := shardsql.InsertKey(ctx, db, home.DB, k.Hash[:], k.Fingerprint[:], shardsql.KeyRead, 0, shardsql.NoTarget, now, expires)
		if err == nil {
			return nil
		}
		if !shardsql.IsDuplicate(err) {
			return classify(op, home, err)
		}
		r, err := shardsql.ReadKey(ctx, db, home.DB, k.Hash[:])
		switch {
		case errors.Is(err, sql.ErrNoRows):
			continue
		case err != nil:
			return classify(op, home, err)
		case !now.After(r.ExpiresAt) && !bytes.Equal(r.Fingerprint, k.Fingerprint[:]):
			return model.Wrap(op, model.EKeyReused, "this Idempotency-Key was used with another request (method, path or body)", nil)
		case !now.After(r.ExpiresAt):
			return nil // the same request: it runs again
		}
		if ok, err := shardsql.TakeKey(ctx, db, home.DB, k.Hash[:], k.Fingerprint[:], r.Claim, r.State, shardsql.KeyRead, 0, shardsql.NoTarget, now, expires); err != nil || ok {
			return classify(op, home, err)
		}
	}
	return model.Wrap(op, model.EUnavailable, "this Idempotency-Key is changing hands; retry", nil)
}

// replayOf sets k.Replay to the outcome out keeps, and returns
// model.ErrReplayed (EInternal when out does not decode).
func replayOf(op string, k *model.Idempotency, out shardsql.Outcome) error {
	o, err := decodeOutcome(out.Response)
	if err != nil {
		return model.Wrap(op, model.EInternal, "", err)
	}
	k.Replay = o
	return model.ErrReplayed
}

// create is how a create runs: under ctx's idempotency key, if it
// carries one (keyed), build runs in one transaction on sh and returns
// the object the create answers with (created false: it found the object
// made before), and that outcome is recorded as the key's in the same
// transaction, so the create and its replay commit together or neither
// does. A retry with the key gets model.ErrReplayed, with the key's
// Replay set to the outcome. first, when not nil, runs before the
// transaction (under the claim): a check on another shard. An object
// build returns with no ID is the one its transaction inserted
// (insertMember), whose ID the commit reads (shardsql.Tx.Inserted); the
// key's outcome names it, so with a key it is read before, at the cost
// of a round trip.
func (s *Keys) create(ctx context.Context, op string, sh topology.Shard, first func() error, build func(tx *shardsql.Tx) (model.Object, bool, error)) (obj model.Object, created bool, err error) {
	err = s.keyed(ctx, op, sh, func(kc *keyClaim) error {
		if first != nil {
			if err := first(); err != nil {
				return err
			}
		}
		var tx *shardsql.Tx
		err := s.inTx(ctx, op, sh, func(t *shardsql.Tx) error {
			var err error
			if obj, created, err = build(t); err != nil {
				return err
			}
			tx = t
			if obj.ID == 0 && kc != nil { // the outcome names the object
				if obj.ID, err = t.InsertedID(ctx); err != nil {
					return err
				}
			}
			return kc.record(ctx, t, op, model.Outcome{Object: obj, Created: created})
		})
		if err == nil && obj.ID == 0 {
			obj.ID = tx.Inserted()
		}
		return err
	})
	return obj, created, err
}

// record records out as the outcome of kc's claim, in the create's
// transaction tx on kc's target; EKeyInUse when the claim was fenced (a
// retry took it over), which rolls the create back. A nil kc does
// nothing.
func (kc *keyClaim) record(ctx context.Context, tx *shardsql.Tx, op string, out model.Outcome) error {
	if kc == nil {
		return nil
	}
	resp := encodeOutcome(make([]byte, 0, outcomeHeader+8*len(out.Object.Counts)+len(out.Object.Doc)), out)
	if kc.noted {
		ok, err := shardsql.CompleteNoted(ctx, tx, kc.target.DB, kc.k.Hash[:], kc.claim, resp)
		if err == nil && !ok {
			err = errTakenOver(op)
		}
		return err
	}
	err := shardsql.InsertOutcome(ctx, tx, kc.target.DB, kc.k.Hash[:], kc.claim, shardsql.OutcomeDone, out.Object.ID, resp, kc.expires)
	if shardsql.IsDuplicate(err) {
		return errTakenOver(op)
	}
	return err
}

// errTakenOver is the end of a create whose claim a retry took over.
func errTakenOver(op string) error {
	return model.Wrap(op, model.EKeyInUse, "a retry with this Idempotency-Key took it over", nil)
}

// note records, as the outcome of kc's claim, the object its create has
// made so far (a user not yet visible), in the create's transaction tx.
func (kc *keyClaim) note(ctx context.Context, tx *shardsql.Tx, op string, id uint64) error {
	if kc == nil {
		return nil
	}
	err := shardsql.InsertOutcome(ctx, tx, kc.target.DB, kc.k.Hash[:], kc.claim, shardsql.OutcomeNoted, id, nil, kc.expires)
	if shardsql.IsDuplicate(err) {
		return errTakenOver(op)
	}
	kc.noted = err == nil
	return err
}

// releaseKey frees kc's key after its create failed, so a retry may run
// at once: it fences the claim on the target (a create whose commit
// failed in doubt either committed, and keeps its outcome for the retry
// to replay: done, with out; or never will), then deletes the claim
// (released). While the target's or the home's master is down it waits
// for it, or for a failover, within the write buffer window; a failure
// after that leaves the claim to its lease.
func (s *Keys) releaseKey(ctx context.Context, op string, kc *keyClaim) (out shardsql.Outcome, done, released bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.QueryTimeout+s.bufferWindow(ctx))
	defer cancel()
	// Both writes are pinned to the map in force (enterShard), like every
	// write: the shards may have moved since the claim.
	err := s.onShard(ctx, op, kc.target.N, func(target topology.Shard) error {
		var err error
		if out, err = shardsql.FenceOutcome(ctx, target.Host.DB, target.DB, kc.k.Hash[:], kc.claim, kc.expires); err != nil {
			return classify(op, target, err)
		}
		done = out.State == shardsql.OutcomeDone // it committed after all: a retry replays it
		return nil
	})
	if err == nil && !done {
		err = s.onShard(ctx, op, kc.home.N, func(home topology.Shard) error {
			return classify(op, home, shardsql.ReleaseKey(ctx, home.Host.DB, home.DB, kc.k.Hash[:], kc.claim))
		})
		released = err == nil
	}
	if err != nil {
		s.log.Warn("idempotency key left pending until its lease ends", "err", model.ErrorMessage(err))
	}
	return out, done, released
}

// onShard runs fn with the write route of shard n, pinned to the map in
// force (enterShard). fn must be idempotent: while the shard's master is
// unavailable it runs again, on each new map, within the write buffer
// window (a failover).
func (s *Keys) onShard(ctx context.Context, op string, n int, fn func(topology.Shard) error) error {
	var hold *failoverHold
	defer func() { hold.end() }()
	for {
		sh, release, err := s.enterShard(ctx, op, n)
		if err != nil {
			return err
		}
		err = fn(sh)
		release()
		if !model.IsCode(err, model.EUnavailable) || len(sh.Host.Replicas) == 0 {
			return err
		}
		if hold == nil {
			hold = s.holdForFailover(ctx)
		}
		if !hold.wait(ctx) {
			return err
		}
	}
}

// userShard is where a new user goes: the open shard its key hashes to
// when ctx carries a key (so a retry that takes over a dead claimant's
// create makes its user where the dead one made it, and finishes that
// user: resumeUser), a random open shard otherwise.
func (s *Keys) userShard(ctx context.Context) topology.Shard {
	t := s.router.Current()
	if k := model.IdempotencyOf(ctx); k != nil {
		return t.OpenShard(binary.BigEndian.Uint64(k.Hash[:8]))
	}
	return t.RandomOpen()
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
func (s *Keys) SweepKeys(ctx context.Context) (int, error) {
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
			k, more, err := shardsql.DeleteExpiredKeys(c, sh.Host.DB, sh.DB, cutoff, keySweepBatch)
			cancel()
			release()
			deleted += k
			if err != nil && len(errs) < 10 {
				errs = append(errs, classify(op, sh, err))
			}
			if err != nil || !more {
				break
			}
		}
	}
	return deleted, errors.Join(errs...)
}
