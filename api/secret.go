package api

import (
	"context"
	"slices"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// Secret boards. A secret board and its pins (each pin's document carries
// its board's flag) are shown only to their owner and to service tokens;
// to anyone else they are exactly as absent as an object that does not
// exist: 404 with the same problem, left out of every list, feed,
// multi-get, owner look-up and viewer edge, and out of the counts of
// boards and pins of their owner that anyone else sees. Each route
// declares how it decides (visibility.go). The check runs on the objects
// a handler is about to return, so a board made public again shows its
// pins everywhere at once, with nothing rewritten.

// hidden is the error a caller who may not see an object of typ meets:
// the store's own for a missing one.
func hidden(typ idcodec.Type) error {
	return errorf(model.ENotFound, "%s not found", typ)
}

// ownerOf is the owner of an object that can be secret (0 for any other
// object).
func ownerOf(o model.Object) uint64 {
	i, ok := model.SecretOwner(o.Type)
	if !ok {
		return 0
	}
	d, err := model.DecodeDoc(o.Type, o.Doc)
	if err != nil {
		return 0
	}
	return uint64(d.Ref(i))
}

// visibleTo reports whether viewer may see o: viewer 0 (a service token,
// or auth off) sees everything; a user sees every object but the secret
// ones (model.SecretOwner) of others.
func visibleTo(o model.Object, viewer uint64) bool {
	if _, ok := model.SecretOwner(o.Type); viewer == 0 || !ok || !o.Flags.Secret() {
		return true
	}
	return ownerOf(o) == viewer
}

// visible keeps the objects of objs that viewer may see, in order.
func visible(objs []model.Object, viewer uint64) []model.Object {
	if viewer == 0 {
		return objs
	}
	out := objs[:0:0]
	for _, o := range objs {
		if visibleTo(o, viewer) {
			out = append(out, o)
		}
	}
	return out
}

// visibleIDs reports, for each of ids (of type typ), whether viewer may
// see it: false for an object that is gone as for a secret board or pin
// of another user.
func (s *Server) visibleIDs(ctx context.Context, ids []uint64, typ idcodec.Type, viewer uint64) (map[uint64]bool, error) {
	objs, err := s.objects.GetMany(ctx, ids, typ)
	if err != nil {
		return nil, err
	}
	out := make(map[uint64]bool, len(objs))
	for _, o := range objs {
		out[o.ID] = visibleTo(o, viewer)
	}
	return out, nil
}

// shownTo is o as viewer may see it: a user shown to a user token of
// anyone else carries counts that leave out their secret boards and pins
// (model.SecretCounted); the user themself and service tokens (viewer 0)
// see every count exactly.
func shownTo(o model.Object, viewer uint64) model.Object {
	if viewer == 0 || o.ID == viewer || o.Counts == nil {
		return o
	}
	counted, secret := model.Counted(o.Type), model.SecretCounted(o.Type)
	if len(secret) == 0 || len(o.Counts) < len(counted)+len(secret) {
		return o
	}
	counts := append([]int64(nil), o.Counts...)
	for j, m := range secret {
		if i := slices.Index(counted, m); i >= 0 {
			counts[i] -= counts[len(counted)+j]
			counts[len(counted)+j] = 0
		}
	}
	o.Counts = counts
	return o
}

// shownAll is shownTo of each of objs, in place.
func shownAll(objs []model.Object, viewer uint64) []model.Object {
	if viewer == 0 {
		return objs
	}
	for i := range objs {
		objs[i] = shownTo(objs[i], viewer)
	}
	return objs
}
