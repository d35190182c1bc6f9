package store

import (
	"context"
	"database/sql"
	"errors"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// Usernames are unique across all shards, compared in lower case. The
// index is mod-sharded: the row of a name lives on the shard its key
// hashes to (usernameShard), the user on its own random shard, so a name
// and its user are two shards and two transactions:
//
//  1. the user's shard: insert the user inactive (invisible, as if
//     deleted) with a user_claims row saying which name it claims;
//  2. the name's shard: claim the name for the user (an insert on the
//     name's primary key: of concurrent claims exactly one wins);
//  3. the user's shard: make the user active and delete its user_claims
//     row.
//
// A row of the index counts only while it names a live user of that name,
// or a user still being created with it (holds); anything else (a rename
// or delete that died half-way, a user that never finished) may be taken
// over by the next claim and is removed by repair. A server that dies
// between the steps leaves the user_claims row: the sweep finishes the
// user when its claim holds (or it can still claim), and deletes it
// otherwise (no one ever saw it). So a name is never blocked for good by
// a dead creator, and no visible user is without its name.

// Usernames is the user side of the product: creating a user with its
// unique name, finding a user by name, and repairing the name index.
// Update and Delete of a user claim and release names through it.
type Usernames struct {
	*core
	keys *Keys // a user's create runs under the request's key
}

// userClaimGrace is how old a pending user must be before a sweep
// finishes it (a live create finishes its own in milliseconds).
const userClaimGrace = 5 * time.Second

// usernameKey is the index key of a username: the name in lower case.
func usernameKey(name string) string { return strings.ToLower(name) }

// usernameShard is the shard holding the index row of key.
func usernameShard(t *topology.Topology, key string) topology.Shard {
	h := fnv.New64a()
	h.Write([]byte(key))
	sh, _ := t.Shard(int(h.Sum64() % uint64(t.Len())))
	return sh
}

// errTaken is the refusal of a name someone holds.
func errTaken(op, name string) error {
	return model.Wrap(op, model.EUsernameTaken, "the username "+model.QuoteInput(name)+" is taken", nil)
}

// CreateUser places a new user on a random shard among the open ranges
// (with an idempotency key, the open shard the key picks: idempotency.go)
// and claims its username (see above). EUsernameTaken when another user holds
// the name, in any case; EInvalid or ETooLarge when the document does not
// validate.
func (s *Usernames) CreateUser(ctx context.Context, doc model.UserDoc) (model.Object, error) {
	const op = "store.CreateUser"
	doc.Active = true
	b, err := s.encodeDoc(op, &doc)
	if err != nil {
		return model.Object{}, err
	}
	live := model.FlagsOf(&doc)
	doc.Active = false
	pending, err := s.marshalDoc(op, &doc)
	if err != nil {
		return model.Object{}, err
	}
	key := usernameKey(doc.Username)
	sh := s.keys.userShard(ctx)
	var obj model.Object
	err = s.keys.keyed(ctx, op, sh, func(kc *keyClaim) error {
		if kc != nil && kc.prior != 0 { // a dead claimant's user: finish it
			o, done, err := s.resumeUser(ctx, op, kc)
			if err != nil || done {
				obj = o
				return err
			}
		}
		err := s.inTx(ctx, op, sh, func(tx *shardsql.Tx) error {
			at := shardsql.Now()
			if obj, err = shardsql.InsertObject(ctx, tx, sh.DB, idcodec.TypeUser, pending, model.FlagsOf(&doc), at); err != nil {
				return err
			}
			if err := shardsql.InsertUserClaim(ctx, tx, sh.DB, obj.ID, key, at); err != nil {
				return err
			}
			return kc.note(ctx, tx, op, obj.ID)
		})
		if err != nil {
			return err
		}
		if kc != nil {
			kc.held = true // from here the sweep may finish the user
		}
		if err := s.claimUsername(ctx, op, key, obj.ID); err != nil {
			if model.IsCode(err, model.EUsernameTaken) {
				if derr := s.dropUser(ctx, op, obj.ID); derr != nil {
					s.log.Warn("a user that lost its name is left for the sweep", "user", obj.ID, "err", model.ErrorMessage(derr))
				} else if kc != nil {
					kc.held = false // dropped: nothing of this create remains
				}
				return errTaken(op, doc.Username)
			}
			return err // the sweep finishes or drops the user
		}
		obj.Doc, obj.Flags = b, live
		return s.endPending(ctx, op, obj.ID, func(tx *shardsql.Tx, sh topology.Shard, local uint64) error {
			if err := shardsql.SetDoc(ctx, tx, sh.DB, idcodec.TypeUser, local, b); err != nil {
				return err
			}
			return kc.record(ctx, tx, op, model.Outcome{Object: obj, Created: true})
		}) // on an error the user is claimed: the sweep makes it visible
	})
	if err != nil {
		return model.Object{}, err
	}
	return obj, nil
}

// claimUsername makes the index row of key name user, on the name's
// shard: a new row, or a takeover of a row that no longer counts.
// EUsernameTaken when the row's user holds the name.
//
// The insert runs alone (autocommit): of concurrent inserts of one name
// exactly one succeeds, and a loser's shared lock on the row ends with
// its statement. Only then does a loser lock the row (FOR UPDATE) to see
// whether its holder still counts: locking first, or in the insert's
// transaction, makes concurrent claimants deadlock on the gap or on the
// row's shared locks.
func (s *Usernames) claimUsername(ctx context.Context, op, key string, user uint64) error {
	n := usernameShard(s.router.Current(), key).N
	for range 3 {
		sh, release, err := s.enterShard(ctx, op, n)
		if err != nil {
			return err
		}
		c, cancel := s.deadline(ctx)
		err = shardsql.ClaimUsername(c, sh.Host.DB, sh.DB, key, user, shardsql.Now())
		cancel()
		release()
		if err == nil {
			return nil
		}
		if !shardsql.IsDuplicate(err) {
			return classify(op, sh, err)
		}
		taken, released := false, false
		err = s.inRetryTx(ctx, op, sh, func(tx *shardsql.Tx) error {
			taken, released = false, false
			holder, err := shardsql.UsernameHolder(ctx, tx, sh.DB, key, shardsql.ForUpdate)
			switch {
			case err != nil:
				return err
			case holder == 0: // released since the insert: insert again
				released = true
				return nil
			case holder == user:
				return nil
			}
			if taken, err = s.holds(ctx, op, holder, key); err != nil || taken {
				return err
			}
			return shardsql.TakeUsername(ctx, tx, sh.DB, key, user, shardsql.Now())
		})
		switch {
		case err != nil:
			return err
		case taken:
			return model.Wrap(op, model.EUsernameTaken, "taken", nil)
		case !released:
			return nil
		}
	}
	return model.Wrap(op, model.EUnavailable, "the username is changing hands; retry", nil)
}

// holds reports whether user holds name key: a live user of that name (in
// any case), or a user still being created with it. A user whose row a
// transaction is changing right now (a rename claims its new name before
// it commits) counts as holding it: the read does not wait for that
// transaction, which may itself be waiting for this claim's row.
func (s *Usernames) holds(ctx context.Context, op string, user uint64, key string) (bool, error) {
	sh, local, err := s.route(op, user, idcodec.TypeUser)
	if model.IsCode(err, model.ENotFound) || model.IsCode(err, model.EInvalid) {
		return false, nil // not a user id this map routes: the row counts for nothing
	}
	if err != nil {
		return false, err
	}
	doc, pending, err := shardsql.UserState(ctx, sh.Host.DB, sh.DB, local, shardsql.ShareNoWait)
	if shardsql.LockBusy(err) {
		return true, nil
	}
	if err != nil {
		return false, classify(op, sh, err)
	}
	if pending != "" {
		return pending == key, nil
	}
	if doc == nil {
		return false, nil
	}
	d, err := model.DecodeDoc(idcodec.TypeUser, doc)
	if err != nil {
		return false, model.Wrap(op, model.EInternal, "", err)
	}
	if !d.IsActive() {
		return false, nil
	}
	return usernameKey(d.(*model.UserDoc).Username) == key, nil
}

// activateUser makes a claimed user visible: its live document, still at
// version 1, and no pending row. A user no longer pending is left alone.
func (s *Usernames) activateUser(ctx context.Context, op string, user uint64, live []byte) error {
	return s.endPending(ctx, op, user, func(tx *shardsql.Tx, sh topology.Shard, local uint64) error {
		return shardsql.SetDoc(ctx, tx, sh.DB, idcodec.TypeUser, local, live)
	})
}

// dropUser deletes a pending user outright (it was never visible) and its
// pending row. A user no longer pending is left alone.
func (s *Usernames) dropUser(ctx context.Context, op string, user uint64) error {
	return s.endPending(ctx, op, user, func(tx *shardsql.Tx, sh topology.Shard, local uint64) error {
		return shardsql.DeleteObjectRow(ctx, tx, sh.DB, idcodec.TypeUser, local)
	})
}

// endPending deletes a pending user's user_claims row and, in the same
// transaction, does then to the user; a user no longer pending (another
// server finished it) is left alone.
func (s *Usernames) endPending(ctx context.Context, op string, user uint64, then func(tx *shardsql.Tx, sh topology.Shard, local uint64) error) error {
	sh, local, err := s.route(op, user, idcodec.TypeUser)
	if err != nil {
		return err
	}
	return s.inTx(ctx, op, sh, func(tx *shardsql.Tx) error {
		was, err := shardsql.DeleteUserClaim(ctx, tx, sh.DB, user)
		if err != nil || !was {
			return err
		}
		return then(tx, sh, local)
	})
}

// finishUser settles a user whose create did not finish: it claims the
// name if it can (or holds it already) and becomes visible, or is dropped.
func (s *Usernames) finishUser(ctx context.Context, op string, c shardsql.UserClaim) error {
	err := s.claimUsername(ctx, op, c.Key, c.User)
	if model.IsCode(err, model.EUsernameTaken) {
		return s.dropUser(ctx, op, c.User)
	}
	if err != nil {
		return err
	}
	sh, local, err := s.route(op, c.User, idcodec.TypeUser)
	if err != nil {
		return err
	}
	r, err := shardsql.ReadObject(ctx, sh.Host.DB, sh.DB, idcodec.TypeUser, local, shardsql.NoLock)
	if err != nil {
		return classify(op, sh, err)
	}
	d, err := model.DecodeDoc(idcodec.TypeUser, r.Doc)
	if err != nil {
		return model.Wrap(op, model.EInternal, "", err)
	}
	d.SetActive(true)
	live, err := s.marshalDoc(op, d)
	if err != nil {
		return err
	}
	return s.activateUser(ctx, op, c.User, live)
}

// releaseUsername deletes the index row of key if it still names user (a
// rename or delete that committed); a failure leaves a row that no longer
// counts.
func (s *Usernames) releaseUsername(ctx context.Context, op, key string, user uint64) {
	sh := usernameShard(s.router.Current(), key)
	err := s.inRetryTx(ctx, op, sh, func(tx *shardsql.Tx) error {
		return shardsql.ReleaseUsername(ctx, tx, sh.DB, key, user)
	})
	if err != nil {
		s.log.Warn("old username row left; it no longer counts and repair removes it", "err", model.ErrorMessage(err))
	}
}

// GetUserByUsername returns the live user named name (in any case): one
// read of the name's index row, then the user. ENotFound when no live
// user has the name; EInvalid when name cannot be a username.
func (s *Usernames) GetUserByUsername(ctx context.Context, name string) (model.Object, error) {
	const op = "store.GetUserByUsername"
	if err := (&model.UserDoc{Username: name}).Validate(s.cfg.Limits); err != nil {
		return model.Object{}, model.Wrap(op, model.EInvalid, "not a username: "+model.ErrorMessage(err), nil)
	}
	key := usernameKey(name)
	sh := usernameShard(s.router.Current(), key)
	c, cancel := s.deadline(ctx)
	holder, err := shardsql.UsernameHolder(c, sh.Host.DB, sh.DB, key, shardsql.NoLock)
	cancel()
	if err != nil {
		return model.Object{}, classify(op, sh, err)
	}
	if holder == 0 || idcodec.TypeOf(holder) != idcodec.TypeUser {
		return model.Object{}, model.Wrap(op, model.ENotFound, "no user is called "+model.QuoteInput(name), nil)
	}
	o, err := s.objectByID(ctx, holder, idcodec.TypeUser)
	if model.IsCode(err, model.ENotFound) || model.IsCode(err, model.EInvalid) {
		return model.Object{}, model.Wrap(op, model.ENotFound, "no user is called "+model.QuoteInput(name), nil)
	}
	if err != nil {
		return model.Object{}, err
	}
	d, err := model.DecodeDoc(idcodec.TypeUser, o.Doc)
	if err != nil {
		return model.Object{}, model.Wrap(op, model.EInternal, "", err)
	}
	if usernameKey(d.(*model.UserDoc).Username) != key { // a row a rename left: it no longer counts
		return model.Object{}, model.Wrap(op, model.ENotFound, "no user is called "+model.QuoteInput(name), nil)
	}
	return o, nil
}

// UsernameReport counts what RepairUsernames found.
type UsernameReport struct {
	Users      int                 `json:"users"`      // live users checked
	Claimed    int                 `json:"claimed"`    // users whose name had no row that counted (claimed for them)
	Stale      int                 `json:"stale"`      // index rows that no longer counted (removed)
	Finished   int                 `json:"finished"`   // users whose create had not finished (made visible or dropped)
	Collisions []UsernameCollision `json:"collisions"` // names that more than one live user carries
}

// UsernameCollision is a name that several live users carry (created
// before the index existed): Holder keeps it, the others are not found by
// name until they are renamed.
type UsernameCollision struct {
	Name   string   `json:"name"`
	Holder string   `json:"holder"`
	Others []string `json:"others"`
}

// RepairUsernames makes the username index exact: it finishes users whose
// create did not finish, claims the name of every live user that has no
// row that counts (the users created before the index existed are claimed
// this way, oldest shard first), reports names that several live users
// carry instead of dropping one, and removes rows that no longer count.
// With dryRun it only counts. It is safe while clients write.
func (s *Usernames) RepairUsernames(ctx context.Context, dryRun bool) (UsernameReport, error) {
	const op = "store.RepairUsernames"
	rep := UsernameReport{Collisions: []UsernameCollision{}}
	t := s.router.Current()
	collided := map[string]int{}
	for n := range t.Len() {
		sh, _ := t.Shard(n)
		pending, err := shardsql.DueUserClaims(ctx, sh.Host.DB, []shardsql.DB{sh.DB}, shardsql.Now().Add(-userClaimGrace), 1<<20)
		if err != nil {
			return rep, classify(op, sh, err)
		}
		for _, c := range pending {
			rep.Finished++
			if !dryRun {
				if err := s.finishUser(ctx, op, c); err != nil {
					return rep, err
				}
			}
		}
		var after uint64
		for {
			users, err := shardsql.ScanUsers(ctx, sh.Host.DB, sh.DB, after, 500)
			if err != nil {
				return rep, classify(op, sh, err)
			}
			for _, u := range users {
				if err := s.repairUsername(ctx, op, sh, u, dryRun, &rep, collided); err != nil {
					return rep, err
				}
			}
			if len(users) < 500 {
				break
			}
			after = users[len(users)-1].Local
		}
	}
	for n := range t.Len() {
		sh, _ := t.Shard(n)
		after := ""
		for {
			rows, err := shardsql.ScanUsernames(ctx, sh.Host.DB, sh.DB, after, 500)
			if err != nil {
				return rep, classify(op, sh, err)
			}
			for _, r := range rows {
				holds, err := s.holds(ctx, op, r.User, r.Key)
				if err != nil {
					return rep, err
				}
				if !holds {
					rep.Stale++
					if !dryRun {
						s.releaseUsername(ctx, op, r.Key, r.User)
					}
				}
			}
			if len(rows) < 500 {
				break
			}
			after = rows[len(rows)-1].Key
		}
	}
	return rep, nil
}

// repairUsername checks one user row's claim on its name.
func (s *Usernames) repairUsername(ctx context.Context, op string, sh topology.Shard, u shardsql.Row, dryRun bool, rep *UsernameReport, collided map[string]int) error {
	if !u.Flags.Active() {
		return nil
	}
	d, err := model.DecodeDoc(idcodec.TypeUser, u.Doc)
	if err != nil {
		return model.Wrap(op, model.EInternal, "", err)
	}
	rep.Users++
	id := sh.ID(idcodec.TypeUser, u.Local)
	name := d.(*model.UserDoc).Username
	key := usernameKey(name)
	nsh := usernameShard(s.router.Current(), key)
	holder, err := shardsql.UsernameHolder(ctx, nsh.Host.DB, nsh.DB, key, shardsql.NoLock)
	if err != nil {
		return classify(op, nsh, err)
	}
	if holder == id {
		return nil
	}
	if holder != 0 {
		holds, err := s.holds(ctx, op, holder, key)
		if err != nil {
			return err
		}
		if holds {
			i, ok := collided[key]
			if !ok {
				i = len(rep.Collisions)
				collided[key] = i
				rep.Collisions = append(rep.Collisions, UsernameCollision{Name: name, Holder: strconv.FormatUint(holder, 10)})
			}
			rep.Collisions[i].Others = append(rep.Collisions[i].Others, strconv.FormatUint(id, 10))
			return nil
		}
	}
	rep.Claimed++
	if dryRun {
		return nil
	}
	err = s.claimUsername(ctx, op, key, id)
	if model.IsCode(err, model.EUsernameTaken) { // claimed by someone else meanwhile: the next run reports it
		return nil
	}
	return err
}

// resumeUser finishes the user a dead claimant of kc made (kc.prior):
// it settles the user as the sweep would, and when the user exists,
// completes the key with it and returns it with done true. A user that
// was dropped (its name was taken) leaves the create to run anew.
func (s *Usernames) resumeUser(ctx context.Context, op string, kc *keyClaim) (model.Object, bool, error) {
	sh, local, err := s.route(op, kc.prior, idcodec.TypeUser)
	if err != nil || sh.DB != kc.target.DB {
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
		return kc.record(ctx, tx, op, model.Outcome{Object: obj, Created: true})
	})
	return obj, found && err == nil, err
}
