package store

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/tracing"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/fanout"
	"github.com/pinstore/pinstore/store/objcache"
	"github.com/pinstore/pinstore/store/replicas"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// encodeDoc validates d and encodes it for storage.
func (s *core) encodeDoc(op string, d model.Doc) ([]byte, error) {
	if err := d.Validate(s.cfg.Limits); err != nil {
		return nil, err
	}
	return s.marshalDoc(op, d)
}

// marshalDoc encodes a validated d, refusing one over the stored limit.
func (s *core) marshalDoc(op string, d model.Doc) ([]byte, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, model.Wrap(op, model.EInvalid, "document does not encode", err)
	}
	if len(b) > s.cfg.MaxDocBytes {
		return nil, model.Wrap(op, model.ETooLarge, "document is larger than the limit", nil)
	}
	return b, nil
}

// Objects is the generic objects: creating any object as its type
// declares (create.go; a pin's create, with its product rules, here),
// reading, updating and deleting any object, and the pin → owner look-up.
// A create runs under the request's key (Keys), a pin decides its feed
// (Feeds), a user's rename or delete moves its name (Usernames), and a
// delete empties the object's lists (Lists, delete.go).
type Objects struct {
	*core
	keys      *Keys
	feeds     *Feeds
	lists     *Lists
	usernames *Usernames
}

// CreatePin places the pin on its board's shard, owned by the board's
// owner, and adds it to board_pins and user_pins in the same transaction,
// with its feed fan-out recorded as due in feed_outbox (an author at or
// above the pull threshold is pulled instead: no fan-out, see pullOrPush);
// the owner cache learns its owner with the commit's invalidations
// (committed), and the fan-out is queued. The pin carries its
// board's secret flag. With a section_id, the pin goes in that section of
// the board too (EInvalid when it is another board's section, ENotFound
// when it is not live). actor, when not 0, is the user the request acts as:
// the board must be theirs, or the pin is refused with EForbidden, checked
// on the board row the transaction reads. EInvalid when board_id is no
// board's id; ENotFound when the board does not exist.
func (s *Objects) CreatePin(ctx context.Context, doc model.PinDoc, actor uint64) (model.Object, error) {
	obj, _, err := s.createPin(ctx, "store.CreatePin", doc, actor, nil)
	return obj, err
}

// createPin is CreatePin; with save set, the pin is a save of another pin
// (saves.go), which save's hooks check and record in the same transaction.
// created is false when save found the board's earlier save of the pin
// (then obj is that pin).
func (s *Objects) createPin(ctx context.Context, op string, doc model.PinDoc, actor uint64, save *saveHooks) (obj model.Object, created bool, err error) {
	doc.Active = true
	if err := doc.Validate(s.cfg.Limits); err != nil {
		return model.Object{}, false, err
	}
	sh, boardLocal, err := s.route(op, uint64(doc.BoardID), idcodec.TypeBoard)
	if err != nil {
		return model.Object{}, false, err
	}
	t, _ := model.TypeOf(idcodec.TypePin)
	var seq int64
	var pulled, newlyPulled bool
	obj, created, err = s.keys.create(ctx, op, sh, nil, func(tx *shardsql.Tx) (model.Object, bool, error) {
		// adopt's read of the board, with the author's follower count
		// (pullOrPush).
		r, followers, err := shardsql.ReadBoardOwnerCounted(ctx, tx, sh.DB, boardLocal, model.UserFollowers, shardsql.ShareLock)
		bd, err := liveDoc(op, idcodec.TypeBoard, r, err)
		if err == nil {
			err = t.Adopt(bd, &doc, model.ID(actor))
		}
		if err != nil {
			return model.Object{}, false, err
		}
		board := bd.(*model.BoardDoc)
		if doc.SectionID != 0 {
			if err := checkSection(ctx, tx, op, sh, uint64(doc.SectionID), uint64(doc.BoardID)); err != nil {
				return model.Object{}, false, err
			}
		}
		if save != nil {
			obj, done, err := save.before(tx, sh, board)
			if err != nil || done {
				return obj, false, err
			}
		}
		b, err := s.marshalDoc(op, &doc)
		if err != nil {
			return model.Object{}, false, err
		}
		at := shardsql.Now()
		seq = shardsql.Sequence(at)
		obj, err := insertMember(ctx, tx, op, sh, newObject{idcodec.TypePin, &doc, b, at, seq})
		if err != nil {
			return obj, false, err
		}
		tx.CacheOwner(uint64(doc.OwnerID))
		if pulled, newlyPulled, err = s.feeds.pullOrPush(ctx, tx, sh, uint64(doc.OwnerID), followers, seq, at); err != nil {
			return obj, false, err
		}
		if save != nil {
			// A save's rows name the pin by value: its id is read now.
			if obj.ID, err = tx.InsertedID(ctx); err != nil {
				return obj, false, err
			}
			if err := save.after(tx, sh, obj.ID, at); err != nil {
				return obj, false, err
			}
		}
		return obj, true, nil
	})
	if err == nil && created {
		switch {
		case newlyPulled:
			s.feed.Enqueue(fanout.Job{Author: uint64(doc.OwnerID), Pull: true, From: tracing.Origin(ctx)})
		case !pulled:
			s.feed.Enqueue(fanout.Job{Pin: obj.ID, Author: uint64(doc.OwnerID), Seq: seq, Outbox: true, From: tracing.Origin(ctx)})
		}
	}
	return obj, created, err
}

// Get returns the live object id of type typ, from the object cache when
// it has it. ENotFound when it is unknown, deleted or of another type;
// EInvalid when id is malformed.
func (s *Objects) Get(ctx context.Context, id uint64, typ idcodec.Type) (model.Object, error) {
	return s.objectByID(ctx, id, typ)
}

// objectByID is Get for every part of the store.
func (s *core) objectByID(ctx context.Context, id uint64, typ idcodec.Type) (model.Object, error) {
	const op = "store.Get"
	sh, local, err := s.route(op, id, typ)
	if err != nil {
		return model.Object{}, err
	}
	return s.get(ctx, op, sh, id, local, typ)
}

// get is Get of a routed id: from the object cache when it is on and has
// it (a round trip bounded by the cache's own timeout), else by a read on
// the id's host (pointread) under the store's deadline, which then fills
// the cache where this caller holds the lease. The read fills from the
// master (replica hook: a fill never comes from a replica, which may lack
// the write whose invalidation the lease came after).
func (s *core) get(ctx context.Context, op string, sh topology.Shard, id, local uint64, typ idcodec.Type) (model.Object, error) {
	oc := s.objects
	var lease objcache.Lease
	if oc.on() {
		if !oc.pendingFor(id) {
			o, hit, l, err := oc.cache.GetOne(ctx, id)
			if hit {
				return o, nil
			}
			if err == nil {
				lease = l
			}
		}
		ctx = replicas.OnMaster(ctx)
	}
	dctx, cancel := s.deadline(ctx)
	defer cancel()
	r, err := s.readPoint(dctx, op, sh, typ, local, 0)
	if err != nil {
		return model.Object{}, err
	}
	o := r.Row.Object(sh.DB, typ)
	if lease != "" {
		oc.cache.Fill(ctx, []model.Object{o}, map[uint64]objcache.Lease{id: lease})
	}
	return o, nil
}

// Update reads the object, calls mutate with its document inside the
// shard transaction, validates what mutate returns and writes it with
// version+1. ifVersion 0 is unconditional; otherwise a different stored
// version is EVersion. The fields that place the object (Refs) and the
// active flag may not change (EInvalid). A type's product rules run in
// the transaction before the write (updateRules): a user's new username
// is claimed first (EUsernameTaken when another user holds it) and the
// old one freed; a board's change of its secret flag is copied to its
// pins and sections.
func (s *Objects) Update(ctx context.Context, id uint64, typ idcodec.Type, ifVersion int64, mutate func(doc []byte) ([]byte, error)) (model.Object, error) {
	const op = "store.Update"
	sh, local, err := s.route(op, id, typ)
	if err != nil {
		return model.Object{}, err
	}
	var obj model.Object
	var after func() // what the type's rule does once the update has committed
	err = s.inTx(ctx, op, sh, func(tx *shardsql.Tx) error {
		after = nil
		r, _, err := shardsql.ReadObjectCounted(ctx, tx, sh.DB, typ, local, 0, shardsql.ForUpdate)
		old, err := liveVersion(op, typ, r, err, ifVersion)
		if err != nil {
			return err
		}
		raw, err := mutate(r.Doc)
		if err != nil {
			return err
		}
		nd, err := model.DecodeDoc(typ, raw)
		if err != nil {
			return err
		}
		if !nd.IsActive() {
			return model.Wrap(op, model.EInvalid, "active cannot be changed; delete the object instead", nil)
		}
		if !model.SameRefs(nd, old) {
			return model.Wrap(op, model.EInvalid, "the ids that place an object cannot change", nil)
		}
		b, err := s.encodeDoc(op, nd)
		if err != nil {
			return err
		}
		at := shardsql.Now()
		if rule := updateRules[typ]; rule != nil {
			if after, err = rule(ctx, s, tx, updated{op, sh, id, old, nd, at}); err != nil {
				return err
			}
		}
		if err := shardsql.UpdateObject(ctx, tx, sh.DB, typ, local, b, at); err != nil {
			return err
		}
		r.Doc, r.Flags, r.Version, r.Updated = b, model.FlagsOf(nd), r.Version+1, at
		obj = r.Object(sh.DB, typ)
		return nil
	})
	if err == nil && after != nil {
		after()
	}
	return obj, err
}

// updated is an update of the object id, on sh, from its stored document
// old to nd, written at at, as a type's updateRule sees it.
type updated struct {
	op      string
	sh      topology.Shard
	id      uint64
	old, nd model.Doc
	at      time.Time
}

// An updateRule is a product rule that changing an object of one type
// follows beyond what Update does for every type: it runs in the update's
// transaction before the new document is written, and returns what must
// follow the commit (nil: nothing).
type updateRule func(ctx context.Context, s *Objects, tx *shardsql.Tx, u updated) (after func(), err error)

// updateRules lists, per type, its update's product rule, if any.
var updateRules = [model.TypeSlots]updateRule{
	idcodec.TypeUser:  renameUser,
	idcodec.TypeBoard: copyBoardSecret,
}

// renameUser claims a user's new username while the update's
// transaction holds the user's row (EUsernameTaken when another user
// holds it); the old one is released once the update has committed.
func renameUser(ctx context.Context, s *Objects, _ *shardsql.Tx, u updated) (func(), error) {
	name := u.nd.(*model.UserDoc).Username
	oldKey, newKey := usernameKey(u.old.(*model.UserDoc).Username), usernameKey(name)
	if newKey == oldKey {
		return nil, nil
	}
	if err := s.usernames.claimUsername(ctx, u.op, newKey, u.id); err != nil {
		if model.IsCode(err, model.EUsernameTaken) {
			return nil, errTaken(u.op, name)
		}
		return nil, err
	}
	return func() { s.usernames.releaseUsername(ctx, u.op, oldKey, u.id) }, nil
}

// copyBoardSecret copies a change of a board's secret flag to its pins
// and sections (setSecret), in the update's transaction.
func copyBoardSecret(ctx context.Context, _ *Objects, tx *shardsql.Tx, u updated) (func(), error) {
	bd := u.nd.(*model.BoardDoc)
	if bd.Secret == u.old.(*model.BoardDoc).Secret {
		return nil, nil
	}
	return nil, setSecret(ctx, tx, u.op, u.sh, u.id, bd, u.at)
}

// liveVersion turns a read of an object in a transaction into its live
// document, checking its version (ifVersion 0: any): ENotFound when it is
// missing or deleted, EVersion when the version differs.
func liveVersion(op string, typ idcodec.Type, r shardsql.Row, err error, ifVersion int64) (model.Doc, error) {
	d, err := liveDoc(op, typ, r, err)
	if err != nil {
		return nil, err
	}
	if ifVersion != 0 && r.Version != ifVersion {
		return nil, model.Wrap(op, model.EVersion, "the object has changed (version "+strconv.FormatInt(r.Version, 10)+")", nil)
	}
	return d, nil
}

// markDeleted soft-deletes one object in tx and returns its last live doc.
func markDeleted(ctx context.Context, tx *shardsql.Tx, op string, sh topology.Shard, typ idcodec.Type, local uint64, ifVersion int64) (model.Doc, error) {
	r, err := shardsql.ReadObject(ctx, tx, sh.DB, typ, local, shardsql.ForUpdate)
	d, err := liveVersion(op, typ, r, err, ifVersion)
	if err != nil {
		return nil, err
	}
	d.SetActive(false)
	b, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	d.SetActive(true)
	return d, shardsql.UpdateObject(ctx, tx, sh.DB, typ, local, b, shardsql.Now())
}

// GetMany returns the live objects among ids, in request order; unknown,
// deleted or wrong-type ids are left out; more than MaxGetMany ids is
// EInvalid. Cached objects cost no statement; the rest cost one per host.
func (s *Objects) GetMany(ctx context.Context, ids []uint64, typ idcodec.Type) ([]model.Object, error) {
	return s.objectsByID(ctx, ids, typ)
}
