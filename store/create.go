package store

import (
	"context"
	"fmt"
	"reflect"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// Create creates an object of typ, as typ's declaration says
// (model.ObjectType: Parent, ByHand, Adopt, Live): every type is created
// here under its parent (a board under its owner, a comment under its
// pin, a section under its board), but for the types whose create is a
// product rule of their own (createRules), which Create hands on: users
// (a name, a shard of their own) and pins (their section, their feed and
// the owner cache, the same steps besides).
//
// The document is validated before any I/O. The objects its Live refs
// name (a comment's author) are read first; then, in one transaction on
// the parent's shard, run under the request's idempotency key (Keys), the
// parent is read live and locked (shared, so that its delete waits; for
// update when its list is ordered by hand, so that concurrent creates
// each go last), the type adopts from it (its owner and secret flag, and
// whether actor, 0 for a service token, may create there), and the object
// is inserted onto every list its type declares it a member of.
// EInvalid for a bad document; ENotFound when the parent or a Live ref
// is not live.
func (s *Objects) Create(ctx context.Context, typ idcodec.Type, doc model.Doc, actor uint64) (model.Object, error) {
	op := "store.Create " + typ.String()
	t, ok := model.TypeOf(typ)
	if !ok || reflect.TypeOf(doc) != reflect.TypeOf(t.New()) {
		return model.Object{}, model.Wrap(op, model.EInternal, fmt.Sprintf("no create of a %T as a %s", doc, typ), nil)
	}
	if rule := createRules[typ]; rule != nil {
		return rule(ctx, s, doc, actor)
	}
	if t.Parent == 0 {
		return model.Object{}, model.Wrap(op, model.EInternal, "no create under a parent for a "+typ.String(), nil)
	}
	doc.SetActive(true)
	if err := doc.Validate(s.cfg.Limits); err != nil {
		return model.Object{}, err
	}
	parent := parentOf(t, doc)
	sh, local, err := s.route(op, parent, t.Parent.From())
	if err != nil {
		return model.Object{}, err
	}
	live := func() error {
		for _, i := range t.Live {
			ref := uint64(doc.Ref(i))
			if _, err := s.objectByID(ctx, ref, idcodec.TypeOf(ref)); err != nil {
				return err
			}
		}
		return nil
	}
	obj, _, err := s.keys.create(ctx, op, sh, live, func(tx *shardsql.Tx) (model.Object, bool, error) {
		at := shardsql.Now()
		seq := shardsql.Sequence(at)
		lock := shardsql.ShareLock
		if t.ByHand {
			lock = shardsql.ForUpdate
		}
		if _, err := adopt(ctx, tx, op, sh, t, local, doc, actor, lock); err != nil {
			return model.Object{}, false, err
		}
		raw, err := s.marshalDoc(op, doc)
		if err != nil {
			return model.Object{}, false, err
		}
		if t.ByHand {
			if seq, err = lastPlace(ctx, tx, sh, t.Parent, parent); err != nil {
				return model.Object{}, false, err
			}
		}
		obj, err := insertMember(ctx, tx, op, sh, newObject{typ, doc, raw, at, seq})
		return obj, err == nil, err
	})
	return obj, err
}

// A createRule creates an object of one type in place of Create's
// create under a parent, for a type whose create is a product rule of its
// own; doc is of the type's document (Create checks it).
type createRule func(ctx context.Context, s *Objects, doc model.Doc, actor uint64) (model.Object, error)

// createRules lists, per type, its own create, if any.
var createRules = [model.TypeSlots]createRule{
	idcodec.TypeUser: func(ctx context.Context, s *Objects, doc model.Doc, _ uint64) (model.Object, error) {
		return s.usernames.CreateUser(ctx, *doc.(*model.UserDoc)) // its name, its shard
	},
	idcodec.TypePin: func(ctx context.Context, s *Objects, doc model.Doc, actor uint64) (model.Object, error) {
		return s.CreatePin(ctx, *doc.(*model.PinDoc), actor) // its section, its feed and the owner cache
	},
}

// parentOf is the id of the object a new doc of type t is created under:
// the owner of its Parent list.
func parentOf(t *model.ObjectType, doc model.Doc) uint64 {
	for _, m := range t.Members {
		if m.List == t.Parent {
			return uint64(m.Of(doc))
		}
	}
	return 0
}

// adopt reads the parent (local on sh, of t.Parent's owner type) live
// under lock in tx and lets doc adopt from it (t.Adopt). It returns the
// parent's document.
func adopt(ctx context.Context, tx *shardsql.Tx, op string, sh topology.Shard, t *model.ObjectType, local uint64, doc model.Doc, actor uint64, lock shardsql.Lock) (model.Doc, error) {
	_, pd, err := readLive(ctx, tx, op, sh, t.Parent.From(), local, lock)
	if err != nil {
		return nil, err
	}
	if t.Adopt != nil {
		if err := t.Adopt(pd, doc, model.ID(actor)); err != nil {
			return nil, err
		}
	}
	return pd, nil
}

// lastPlace is the sequence that puts a new entry last on from's list m,
// whose order its owner sets, and marks the list so: its sequences are
// places, not times, which since and until refuse. It takes the list's
// order lock first, as a move does, so the two queue on it.
func lastPlace(ctx context.Context, tx *shardsql.Tx, sh topology.Shard, m model.Mapping, from uint64) (int64, error) {
	if err := shardsql.LockHandOrder(ctx, tx, sh.DB, m, from); err != nil {
		return 0, err
	}
	seq, ok, err := shardsql.LowestSequence(ctx, tx, sh.DB, m, from)
	if err != nil {
		return 0, err
	}
	if ok {
		seq--
	}
	return seq, nil
}
