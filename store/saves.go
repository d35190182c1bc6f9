package store

import (
	"context"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// A save (a repin) is a pin of its own, made by the normal create-pin path
// on the target board, with a copy of the source's content and its
// saved_from naming the source. The pair saved → source is kept like a
// follow or a like (pairs.go): pin_saved_from on the saved pin's shard is
// the forward side, written and marked in pair_outbox in the save's own
// transaction; pin_saves on the source's shard (its list and count) is
// the inverse, which settle writes. board_saves, on the board's shard,
// holds one save per (board, source pin), so a second save of a pin to a
// board returns the first, exactly, however many race.

// saveHooks are what a save adds to createPin's transaction: before runs
// once the board is read (done: the board already holds a save of the
// source, returned as obj), after once the pin is inserted.
type saveHooks struct {
	before func(tx *shardsql.Tx, sh topology.Shard, board *model.BoardDoc) (obj model.Object, done bool, err error)
	after  func(tx *shardsql.Tx, sh topology.Shard, pin uint64, at time.Time) error
}

// saveAttempts bounds the tries of a save that lost a race to an equal
// save (the winner's row is then read) or was a deadlock victim.
const saveAttempts = 4

// Saves is saving a pin to a board (a repin): a new pin made by Objects'
// create path, its saves pair settled like any pair (Lists).
type Saves struct {
	*core
	pins  *Objects
	lists *Lists
}

// SavePin saves the pin source to board: a new pin on board, owned by its
// owner, with a copy of the source's link, description, image and data,
// and saved_from = source; it joins the board's and owner's lists and
// their followers' feeds like any new pin, and the source's saves. When
// board already holds a save of source, that pin is returned with created
// false. The source must be visible to the board's owner: a pin on a
// secret board is ENotFound unless it is theirs. actor, when not 0, must
// own board (EForbidden). ENotFound when the source or the board is not
// live.
func (s *Saves) SavePin(ctx context.Context, source, board, actor uint64) (obj model.Object, created bool, err error) {
	const op = "store.SavePin"
	if _, _, err := s.route(op, source, idcodec.TypePin); err != nil {
		return model.Object{}, false, err
	}
	src, err := s.objectByID(ctx, source, idcodec.TypePin)
	if err != nil {
		return model.Object{}, false, err
	}
	sd, err := model.DecodeDoc(idcodec.TypePin, src.Doc)
	if err != nil {
		return model.Object{}, false, model.Wrap(op, model.EInternal, "", err)
	}
	from := sd.(*model.PinDoc)
	doc := model.PinDoc{BoardID: model.ID(board), Link: from.Link, Description: from.Description, ImageURL: from.ImageURL, Data: from.Data, SavedFrom: model.ID(source)}
	hooks := &saveHooks{
		before: func(tx *shardsql.Tx, sh topology.Shard, b *model.BoardDoc) (model.Object, bool, error) {
			if from.Secret && from.OwnerID != b.OwnerID {
				return model.Object{}, false, notFound(op, idcodec.TypePin)
			}
			// A plain read: a locking one would take gap locks that racing
			// saves' inserts deadlock on. A save that commits after this
			// read makes this one's insert a duplicate, and the next try
			// reads it.
			saved, err := shardsql.BoardSave(ctx, tx, sh.DB, board, source, shardsql.NoLock)
			if err != nil || saved == 0 {
				return model.Object{}, false, err
			}
			r, _, err := shardsql.ReadObjectCounted(ctx, tx, sh.DB, idcodec.TypePin, idcodec.LocalOf(saved), 0, shardsql.ShareLock)
			if _, err := liveDoc(op, idcodec.TypePin, r, err); err != nil {
				return model.Object{}, false, err // the row goes with its pin's delete, so this does not happen
			}
			return r.Object(sh.DB, idcodec.TypePin), true, nil
		},
		after: func(tx *shardsql.Tx, sh topology.Shard, pin uint64, at time.Time) error {
			if err := shardsql.InsertBoardSave(ctx, tx, sh.DB, board, source, pin); err != nil {
				return err // a duplicate: an equal save won the race; the next try returns it
			}
			p := shardsql.Pair{M: model.PinSavedFrom, From: pin, To: source}
			if err := shardsql.MarkPair(ctx, tx, sh.DB, p, at); err != nil {
				return err
			}
			_, err := shardsql.AddEdge(ctx, tx, sh.DB, model.PinSavedFrom, pin, source, shardsql.Sequence(at))
			return err
		},
	}
	for range saveAttempts {
		err = shardsql.RetryDeadlock(func() error {
			obj, created, err = s.pins.createPin(ctx, op, doc, actor, hooks)
			return err
		})
		if !shardsql.IsDuplicate(err) {
			break
		}
	}
	if err != nil || !created {
		return obj, created, err
	}
	// The source's saves list and count: a source deleted meanwhile leaves
	// the save standing on its own (its saved_from names a pin that is gone).
	if err := s.lists.settle(ctx, op, shardsql.Pair{M: model.PinSavedFrom, From: obj.ID, To: source}); err != nil && !model.IsCode(err, model.ENotFound) {
		return obj, created, err
	}
	return obj, created, nil
}

// unsave takes a deleted saved pin out of its board's saves and its
// source's saves (the forward row goes here, marked; the inverse when the
// returned pair is settled) inside the pin's delete transaction. A pin
// that is no save returns no pair.
func unsave(ctx context.Context, tx *shardsql.Tx, sh topology.Shard, d *model.PinDoc, pin uint64) ([]shardsql.Pair, error) {
	if d.SavedFrom == 0 {
		return nil, nil
	}
	p := shardsql.Pair{M: model.PinSavedFrom, From: pin, To: uint64(d.SavedFrom)}
	if err := shardsql.MarkPair(ctx, tx, sh.DB, p, shardsql.Now()); err != nil {
		return nil, err
	}
	if _, err := shardsql.RemoveEdge(ctx, tx, sh.DB, p.M, p.From, p.To); err != nil {
		return nil, err
	}
	return []shardsql.Pair{p}, shardsql.DeleteBoardSave(ctx, tx, sh.DB, uint64(d.BoardID), pin)
}
