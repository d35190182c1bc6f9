package api

import (
	"context"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// Secret boards. A secret board and its pins (each pin's document carries
// its board's flag) are shown only to their owner and to service tokens;
// to anyone else they are exactly as absent as an object that does not
// exist: 404 with the same problem, left out of every list, feed,
// multi-get, owner look-up and viewer edge. The check runs on the objects
// a handler is about to return, so a board made public again shows its
// pins everywhere at once, with nothing rewritten.

// hidden is the error a caller who may not see an object of typ meets:
// the store's own for a missing one.
func hidden(typ idcodec.Type) error {
	return errorf(model.ENotFound, "%s not found", typ)
}

// ownerOf is the owner of a board or pin (0 for any other object).
func ownerOf(o model.Object) uint64 {
	d, err := model.DecodeDoc(o.Type, o.Doc)
	if err != nil {
		return 0
	}
	switch d := d.(type) {
	case *model.BoardDoc:
		return uint64(d.OwnerID)
	case *model.PinDoc:
		return uint64(d.OwnerID)
	}
	return 0
}

// visibleTo reports whether viewer may see o: viewer 0 (a service token,
// or auth off) sees everything; a user sees every object but the secret
// boards and pins of others.
func visibleTo(o model.Object, viewer uint64) bool {
	if viewer == 0 || o.Type != typeBoard && o.Type != typePin || !model.SecretOf(o.Doc) {
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

// checkVisible returns what a read of object id of typ by viewer answers
// when viewer may not see it (or it does not exist): nil when it may.
// Only boards and pins can be secret, and a comment is as visible as its
// pin; for anything else, and for viewer 0, it reads nothing.
func (s *Server) checkVisible(ctx context.Context, id uint64, typ idcodec.Type, viewer uint64) error {
	if viewer == 0 {
		return nil
	}
	switch typ {
	case typeBoard, typePin:
	case typeComment:
		c, err := s.objects.Get(ctx, id, typeComment)
		if err != nil {
			return err
		}
		return s.commentVisible(ctx, c, viewer)
	default:
		return nil
	}
	o, err := s.objects.Get(ctx, id, typ)
	if err != nil {
		return err
	}
	if !visibleTo(o, viewer) {
		return hidden(typ)
	}
	return nil
}

// visibleIDs reports, for each of ids (pins), whether viewer may see it:
// false for a pin that is gone as for a secret pin of another user.
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

// commentVisible is checkVisible for the comment c already read: a
// comment is as visible as its pin.
func (s *Server) commentVisible(ctx context.Context, c model.Object, viewer uint64) error {
	d, err := model.DecodeDoc(typeComment, c.Doc)
	if err != nil {
		return err
	}
	if s.checkVisible(ctx, uint64(d.(*model.CommentDoc).PinID), typePin, viewer) != nil {
		return hidden(typeComment)
	}
	return nil
}
