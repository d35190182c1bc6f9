package store

import (
	"context"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/fanout"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// Delete soft-deletes the object (active: false in its document, version
// +1) and takes it out of every list:
//   - a pin leaves its board's and owner's lists in the same shard
//     transaction, then every liker's likes;
//   - a pin also leaves its section's list;
//   - a board leaves its owner's list, and its pins and sections are
//     deleted with it in the same transaction;
//   - a section leaves its board's list; its pins stay on the board, in
//     no section (sections.go);
//   - a comment leaves its pin's list;
//   - a user leaves every follow list, both ways, and their likes go; their
//     boards (and pins) are deleted.
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
	if int(typ) >= len(unlinkers) || unlinkers[typ] == nil {
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
		if err := unlinkers[typ](ctx, tx, op, sh, id, d, &e); err != nil {
			return err
		}
		for _, pin := range e.pins {
			e.drains = append(e.drains, drainMark(model.PinLikers, pin), drainMark(model.PinSaves, pin))
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
	for _, pin := range e.pins {
		s.feed.Enqueue(fanout.Job{Pin: pin, Author: e.owner, Remove: true, Outbox: true})
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
	pins            []uint64        // pins deleted whose likes must go
	owner           uint64          // their owner, whose followers' feeds hold them
	username        string          // a deleted user's name, to release
	drains, settles []shardsql.Pair // lists to empty; saves whose source's list must lose them
}

// An unlinker takes a deleted object of one type (id, its last live
// document d) out of its lists inside the delete's transaction, and
// records in e what must follow the commit.
type unlinker func(ctx context.Context, tx *shardsql.Tx, op string, sh topology.Shard, id uint64, d model.Doc, e *deleted) error

// unlinkers lists, per type, what deleting an object of it does (Delete).
var unlinkers = [...]unlinker{
	idcodec.TypePin:   unlinkPin,
	idcodec.TypeBoard: unlinkBoard,
	idcodec.TypeSection: func(ctx context.Context, tx *shardsql.Tx, op string, sh topology.Shard, id uint64, d model.Doc, _ *deleted) error {
		return dropSection(ctx, tx, op, sh, d.(*model.SectionDoc), id)
	},
	idcodec.TypeComment: func(ctx context.Context, tx *shardsql.Tx, _ string, sh topology.Shard, id uint64, d model.Doc, _ *deleted) error {
		_, err := shardsql.RemoveEdge(ctx, tx, sh.DB, model.PinComments, uint64(d.(*model.CommentDoc).PinID), id)
		return err
	},
	idcodec.TypeUser: func(_ context.Context, _ *shardsql.Tx, _ string, _ topology.Shard, id uint64, d model.Doc, e *deleted) error {
		e.username = d.(*model.UserDoc).Username
		for _, m := range []model.Mapping{model.UserFollowing, model.UserFollowers, model.UserLikes, model.UserBoards} {
			e.drains = append(e.drains, drainMark(m, id))
		}
		return nil
	},
}

// unlinkPin takes a deleted pin out of its board's, owner's and section's
// lists and its source's saves.
func unlinkPin(ctx context.Context, tx *shardsql.Tx, _ string, sh topology.Shard, id uint64, doc model.Doc, e *deleted) error {
	d := doc.(*model.PinDoc)
	e.pins, e.owner = append(e.pins, id), uint64(d.OwnerID)
	var err error
	if e.settles, err = unsave(ctx, tx, sh, d, id); err != nil {
		return err
	}
	if err := unlistPin(ctx, tx, sh, uint64(d.BoardID), e.owner, id, d.Secret); err != nil {
		return err
	}
	return unsection(ctx, tx, sh, d, id)
}

// unlinkBoard takes a deleted board out of its owner's list and deletes
// its pins and sections.
func unlinkBoard(ctx context.Context, tx *shardsql.Tx, op string, sh topology.Shard, id uint64, doc model.Doc, e *deleted) error {
	d := doc.(*model.BoardDoc)
	removed, err := shardsql.RemoveEdge(ctx, tx, sh.DB, model.UserBoards, uint64(d.OwnerID), id)
	if err != nil {
		return err
	}
	if removed && d.Secret {
		if err := shardsql.AddSecret(ctx, tx, sh.DB, model.UserBoards, uint64(d.OwnerID), -1); err != nil {
			return err
		}
	}
	e.owner = uint64(d.OwnerID)
	if e.pins, e.settles, err = deleteBoardPins(ctx, tx, op, sh, id, e.owner, d.Secret); err != nil {
		return err
	}
	return deleteBoardSections(ctx, tx, op, sh, id)
}

// drainMark is the pair_outbox mark of "empty the list m of obj": to_id 0,
// which no pair has.
func drainMark(m model.Mapping, obj uint64) shardsql.Pair {
	return shardsql.Pair{M: m, From: obj}
}

// drainList empties the list a drain mark names, then deletes the mark:
// every pair of a list with an inverse (a pin's likers and saves, a
// user's follows both ways and likes) is removed with its other side, as
// the lists' declarations pair them; for a user's boards, every board is
// deleted. Running it again is harmless.
func (s *Objects) drainList(ctx context.Context, op string, p shardsql.Pair) error {
	var err error
	inv, paired := p.M.Inverse()
	switch {
	case p.M == model.UserBoards:
		err = s.deleteBoardsOf(ctx, op, p.From)
	case paired && p.M.Forward(): // a user's follows or likes: each pair as it is
		err = s.drain(ctx, op, p.M, p.From, p.M, false)
	case paired: // a pin's likers or saves, a user's followers: each pair as its forward side
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

// unlistPin takes a deleted pin off its board's and owner's lists (and,
// a secret pin, off its owner's count of secret pins) and records the
// removal of its feed rows as due (fanout): durable until they have gone,
// and a sweep must not fan the pin out again.
func unlistPin(ctx context.Context, tx *shardsql.Tx, sh topology.Shard, board, owner, pin uint64, secret bool) error {
	if _, err := shardsql.RemoveEdge(ctx, tx, sh.DB, model.BoardPins, board, pin); err != nil {
		return err
	}
	removed, err := shardsql.RemoveEdge(ctx, tx, sh.DB, model.UserPins, owner, pin)
	if err != nil {
		return err
	}
	if removed && secret {
		if err := shardsql.AddSecret(ctx, tx, sh.DB, model.UserPins, owner, -1); err != nil {
			return err
		}
	}
	return shardsql.MarkOutboxRemove(ctx, tx, sh.DB, pin, owner)
}

// deleteBoardPins soft-deletes every pin of a board inside the board's
// delete transaction (board, pins and both their lists share one shard),
// and returns them and the save pairs to settle (unsave). secret is the
// board's flag, which each of its pins carries.
func deleteBoardPins(ctx context.Context, tx *shardsql.Tx, op string, sh topology.Shard, board, owner uint64, secret bool) (pins []uint64, settles []shardsql.Pair, err error) {
	entries, err := shardsql.ReadAllEntries(ctx, tx, sh.DB, model.BoardPins, board)
	if err != nil {
		return nil, nil, err
	}
	pins = make([]uint64, 0, len(entries))
	for _, e := range entries {
		d, err := markDeleted(ctx, tx, op, sh, idcodec.TypePin, idcodec.LocalOf(e.To), 0)
		if err != nil && !model.IsCode(err, model.ENotFound) {
			return nil, nil, err
		}
		if d != nil {
			ps, err := unsave(ctx, tx, sh, d.(*model.PinDoc), e.To)
			if err != nil {
				return nil, nil, err
			}
			settles = append(settles, ps...)
		}
		if err := unlistPin(ctx, tx, sh, board, owner, e.To, secret); err != nil {
			return nil, nil, err
		}
		pins = append(pins, e.To)
	}
	return pins, settles, nil
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

// deleteBoardsOf deletes every board of a deleted user (and so their pins).
func (s *Objects) deleteBoardsOf(ctx context.Context, op string, user uint64) error {
	for {
		boards, err := s.listRaw(ctx, op, model.UserBoards, user, 100)
		if err != nil || len(boards) == 0 {
			return err
		}
		for _, b := range boards {
			err := s.Delete(ctx, b.To, idcodec.TypeBoard, 0)
			if model.IsCode(err, model.ENotFound) {
				// Already deleted but still listed: take it off the list.
				sh, _, _ := s.route(op, user, idcodec.TypeUser)
				err = s.inRetryTx(ctx, op, sh, func(tx *shardsql.Tx) error {
					_, err := shardsql.RemoveEdge(ctx, tx, sh.DB, model.UserBoards, user, b.To)
					return err
				})
			}
			if err != nil {
				return err
			}
		}
	}
}
