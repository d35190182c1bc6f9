package store

import (
	"context"
	"slices"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/tracing"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/fanout"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// Delete soft-deletes the object (active: false in its document, version
// +1) and takes it out of every list, as its type declares
// (model.ObjectType):
//   - in the delete's shard transaction it leaves each list it is a
//     member of (a pin its board's, owner's and section's, a board its
//     owner's, a section its board's, a comment its pin's), and a secret
//     one its owner's count of secret entries;
//   - the objects of the lists it cascades to are deleted in the same
//     transaction, each as if by itself (a board's pins and sections);
//   - the lists it drains are emptied after the commit (a pin's likers and
//     saves, a user's follows both ways, likes and boards);
//   - the product rules beyond those run in the transaction too
//     (deleteRules: a pin's save and feed rows, a section's pins staying
//     on the board, a user's name).
//
// Cross-shard removals run after the object's own transaction has
// committed; lists also skip objects that are no longer live, so a crash
// between the two never shows a deleted object. Each list to empty is
// marked in pair_outbox by the delete's own transaction (a drain mark:
// the list's mapping, the object, and to_id 0), so what a dead server left
// undone is finished by any server's sweep (heal.go). ENotFound when the
// object is not live; EVersion when ifVersion (not 0) is not its version.
func (s *Objects) Delete(ctx context.Context, id uint64, typ idcodec.Type, ifVersion int64) error {
	const op = "store.Delete"
	sh, local, err := s.route(op, id, typ)
	if err != nil {
		return err
	}
	if _, ok := model.TypeOf(typ); !ok {
		return model.Wrap(op, model.EInvalid, "objects of type "+typ.String()+" cannot be deleted", nil)
	}
	var e deleted
	// Run again on a deadlock (a section's delete and a move of one of its
	// pins lock the pin and the section in opposite orders): the
	// transaction starts over from the object's row.
	err = s.inRetryTx(ctx, op, sh, func(tx *shardsql.Tx) error {
		e = deleted{}
		d, err := markDeleted(ctx, tx, op, sh, typ, local, ifVersion)
		if err != nil {
			return err
		}
		if err := unlink(ctx, tx, op, sh, typ, id, d, &e); err != nil {
			return err
		}
		at := shardsql.Now()
		for _, p := range e.drains {
			if err := shardsql.MarkPair(ctx, tx, sh.DB, p, at); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(e.pins) > 0 {
		_ = s.owners.Drop(ctx, e.pins...) // a failure is retried, and made durable by the fan-out job below
	}
	from := tracing.Origin(ctx)
	for _, pin := range e.pins {
		s.feed.Enqueue(fanout.Job{Pin: pin, Author: e.owner, Remove: true, Outbox: true, From: from})
	}
	if e.username != "" {
		s.usernames.releaseUsername(ctx, op, usernameKey(e.username), id)
	}
	for _, p := range e.settles {
		if err := s.lists.settle(ctx, op, p); err != nil && !model.IsCode(err, model.ENotFound) {
			return err
		}
	}
	for _, p := range e.drains {
		if err := s.drainList(ctx, op, p); err != nil {
			return err
		}
	}
	return nil
}

// deleted is what a delete's transaction leaves to do once it has
// committed.
type deleted struct {
	pins            []uint64        // pins deleted, whose feed rows and cached owners must go
	owner           uint64          // their owner, whose followers' feeds hold them
	username        string          // a deleted user's name, to release
	drains, settles []shardsql.Pair // lists to empty; saves whose source's list must lose them
}

// unlink takes a deleted object (id, of type typ; d its last live
// document) out of its lists inside the delete's transaction, as its type
// declares: off the lists it is a member of, its cascades' objects
// deleted, its drains recorded in e, and its type's product rule
// (deleteRules) applied.
func unlink(ctx context.Context, tx *shardsql.Tx, op string, sh topology.Shard, typ idcodec.Type, id uint64, d model.Doc, e *deleted) error {
	t, ok := model.TypeOf(typ)
	if !ok {
		return model.Wrap(op, model.EInternal, "undeclared type "+typ.String(), nil)
	}
	lists, secret := memberships(t, d) // members.go
	for _, l := range lists {
		removed, err := shardsql.RemoveEdge(ctx, tx, sh.DB, l.M, l.From, id)
		if err != nil {
			return err
		}
		if removed && slices.Contains(secret, l) {
			if err := shardsql.AddSecret(ctx, tx, sh.DB, l.M, l.From, -1); err != nil {
				return err
			}
		}
	}
	if rule := deleteRules[typ]; rule != nil {
		if err := rule(ctx, tx, op, sh, id, d, e); err != nil {
			return err
		}
	}
	for _, m := range t.Cascades {
		entries, err := shardsql.ReadAllEntries(ctx, tx, sh.DB, m, id)
		if err != nil {
			return err
		}
		for _, en := range entries {
			cd, err := markDeleted(ctx, tx, op, sh, m.To(), idcodec.LocalOf(en.To), 0)
			if model.IsCode(err, model.ENotFound) {
				continue // already deleted, only still listed: the list goes below
			}
			if err != nil {
				return err
			}
			if err := unlink(ctx, tx, op, sh, m.To(), en.To, cd, e); err != nil {
				return err
			}
		}
		if err := shardsql.RemoveList(ctx, tx, sh.DB, m, id); err != nil {
			return err
		}
	}
	for _, m := range t.Drains {
		e.drains = append(e.drains, drainMark(m, id))
	}
	return nil
}

// A deleteRule is a product rule that deleting an object of one type
// follows beyond what its declaration says (unlink): it runs inside the
// delete's transaction, given the object's last live document d, and
// records in e what must follow the commit.
type deleteRule func(ctx context.Context, tx *shardsql.Tx, op string, sh topology.Shard, id uint64, d model.Doc, e *deleted) error

// deleteRules lists, per type, its delete's product rule, if any.
var deleteRules = [model.TypeSlots]deleteRule{
	idcodec.TypePin:     pinDeleted,
	idcodec.TypeSection: keepSectionPins,
	idcodec.TypeUser: func(_ context.Context, _ *shardsql.Tx, _ string, _ topology.Shard, _ uint64, d model.Doc, e *deleted) error {
		e.username = d.(*model.UserDoc).Username // released once the delete has committed
		return nil
	},
}

// pinDeleted is a deleted pin's product rule: a save leaves its source's
// saves (unsave), and the removal of its feed rows is recorded as due
// (fanout): durable until they have gone, and a sweep must not fan the
// pin out again.
func pinDeleted(ctx context.Context, tx *shardsql.Tx, _ string, sh topology.Shard, id uint64, doc model.Doc, e *deleted) error {
	d := doc.(*model.PinDoc)
	e.pins, e.owner = append(e.pins, id), uint64(d.OwnerID)
	settles, err := unsave(ctx, tx, sh, d, id)
	if err != nil {
		return err
	}
	e.settles = append(e.settles, settles...)
	return shardsql.MarkOutboxRemove(ctx, tx, sh.DB, id, e.owner)
}

// drainMark is the pair_outbox mark of "empty the list m of obj": to_id 0,
// which no pair has.
func drainMark(m model.Mapping, obj uint64) shardsql.Pair {
	return shardsql.Pair{M: m, From: obj}
}

// drainList empties the list a drain mark names, then deletes the mark:
// every pair of a list with an inverse (a pin's likers and saves, a
// user's follows both ways and likes) is removed with its other side, as
// the lists' declarations pair them; every object of a list without one
// (a user's boards) is deleted. Running it again is harmless.
func (s *Objects) drainList(ctx context.Context, op string, p shardsql.Pair) error {
	var err error
	inv, paired := p.M.Inverse()
	switch {
	case !paired:
		err = s.deleteListed(ctx, op, p.M, p.From)
	case p.M.Forward(): // a user's follows or likes: each pair as it is
		err = s.drain(ctx, op, p.M, p.From, p.M, false)
	default: // a pin's likers or saves, a user's followers: each pair as its forward side
		// (a save stays, with its own content; only the pair goes)
		err = s.drain(ctx, op, p.M, p.From, inv, true)
	}
	if err != nil {
		return err
	}
	sh, _, err := s.route(op, p.From, p.M.From())
	if err != nil {
		return err
	}
	return s.inRetryTx(ctx, op, sh, func(tx *shardsql.Tx) error {
		return shardsql.UnmarkPair(ctx, tx, sh.DB, p)
	})
}

// drain removes every pair of obj's list m (with its other side), in pages.
// reverse says obj's list is the inverse side (e.g. pin_likers), so each
// pair is removed as fwd(to → obj).
func (s *Objects) drain(ctx context.Context, op string, m model.Mapping, obj uint64, fwd model.Mapping, reverse bool) error {
	for {
		l, err := s.listRaw(ctx, op, m, obj, 500)
		if err != nil || len(l) == 0 {
			return err
		}
		for _, e := range l {
			f, t := obj, e.To
			if reverse {
				f, t = e.To, obj
			}
			if err := s.lists.removePair(ctx, op, shardsql.Pair{M: fwd, From: f, To: t}); err != nil {
				return err
			}
		}
	}
}

// listRaw reads the first n entries of a list without checking that its
// owner is live (it is used while deleting it).
func (s *Objects) listRaw(ctx context.Context, op string, m model.Mapping, from uint64, n int) ([]model.Entry, error) {
	sh, _, err := s.route(op, from, m.From())
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	e, err := shardsql.ReadPage(ctx, sh.Host.DB, sh.DB, m.Table(), from, shardsql.Page{Limit: n})
	return e, classify(op, sh, err)
}

// deleteListed deletes every object of from's list m, a list without an
// inverse that a deleted object drains (a user's boards, and so their
// pins); each delete takes its object off the list.
func (s *Objects) deleteListed(ctx context.Context, op string, m model.Mapping, from uint64) error {
	for {
		objs, err := s.listRaw(ctx, op, m, from, 100)
		if err != nil || len(objs) == 0 {
			return err
		}
		for _, o := range objs {
			err := s.Delete(ctx, o.To, m.To(), 0)
			if model.IsCode(err, model.ENotFound) {
				// Already deleted but still listed: take it off the list.
				sh, _, _ := s.route(op, from, m.From())
				err = s.inRetryTx(ctx, op, sh, func(tx *shardsql.Tx) error {
					_, err := shardsql.RemoveEdge(ctx, tx, sh.DB, m, from, o.To)
					return err
				})
			}
			if err != nil {
				return err
			}
		}
	}
}
