package api

import (
	"context"
	"net/http"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// The list routes' needs: pages of a mapping, the pairs that make it up,
// and the home feed.

// Lister reads a list with its objects.
type Lister interface {
	// ListObjects returns one page of the mapping, ordered by (sequence,
	// to_id), newest first when p.Desc, with the list's length in Count,
	// and the live objects of the page's entries, in page order; entries
	// whose object is gone are left out. ENotFound when from is not live;
	// EInvalid for a bad limit or cursor.
	ListObjects(ctx context.Context, m model.Mapping, from uint64, p model.Page) (model.List, []model.Object, error)
}

// MappingWriter adds, removes and moves the pairs of a mapping.
type MappingWriter interface {
	// AddMapping adds from→to (and the inverse, if any); idempotent.
	// ENotFound when either object does not exist.
	AddMapping(ctx context.Context, m model.Mapping, from, to uint64) error
	// RemoveMapping removes from→to (and the inverse); idempotent.
	RemoveMapping(ctx context.Context, m model.Mapping, from, to uint64) error
	// Move puts item just before (before != 0) or just after (after != 0)
	// another entry of from's list, in the list's newest-first display
	// order. ENotFound when item or the anchor is not in the list.
	Move(ctx context.Context, m model.Mapping, from, item, before, after uint64) error
}

// FeedReader reads home feeds.
type FeedReader interface {
	// Feed returns the pins of the users that user follows, newest first.
	// ENotFound when user is not live.
	Feed(ctx context.Context, user uint64, p model.Page) (model.List, error)
}

// list: GET /v1/{collection}/{id}/{mapping}, one page of a mapping with
// the objects of its entries and the list's total count. An unknown or
// deleted owner of the list is 404 (ListObjects checks it).
func (s *Server) list(m model.Mapping) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		from, err := pathID(r, "id", m.From())
		if err != nil {
			return err
		}
		p, err := ParsePage(r.URL.Query(), pageOptions{offset: true, order: true})
		if err != nil {
			return err
		}
		v, err := parseViewer(r, m.To())
		if err != nil {
			return err
		}
		// A secret board's or pin's lists are as absent as the object: the
		// route's pathObjects check answered a user token that may not see it.
		viewer := actor(r.Context())
		l, objs, err := s.lists.ListObjects(r.Context(), m, from, p) // ENotFound when from is not live
		if err != nil {
			return err
		}
		objs = shownAll(visible(objs, viewer), viewer)
		if viewer != 0 && viewer != from {
			l.Count -= l.Secret // another user's list counts only what they may see
		}
		page, err := s.page(r.Context(), v, objs, l.NextCursor, &l.Count)
		if err != nil {
			return err
		}
		return writePage(w, page)
	}
}

// entryObjects fetches the live objects of a page's entries, in the page's
// order; entries whose object is gone are skipped.
func (s *Server) entryObjects(ctx context.Context, entries []model.Entry, typ idcodec.Type) ([]model.Object, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	ids := make([]uint64, len(entries))
	for i, e := range entries {
		ids[i] = e.To
	}
	return s.objects.GetMany(ctx, ids, typ)
}

// feed: GET /v1/users/{id}/feed, the pins of followed users, newest first.
func (s *Server) feed(w http.ResponseWriter, r *http.Request) error {
	user, err := pathID(r, "id", typeUser)
	if err != nil {
		return err
	}
	p, err := ParsePage(r.URL.Query(), pageOptions{})
	if err != nil {
		return err
	}
	v, err := parseViewer(r, typePin)
	if err != nil {
		return err
	}
	ctx := r.Context()
	l, err := s.feeds.Feed(ctx, user, p) // ENotFound when user is not live
	if err != nil {
		return err
	}
	objs, err := s.entryObjects(ctx, l.Entries, typePin)
	if err != nil {
		return err
	}
	// Whoever reads it, a feed shows what its user may see: the pins of
	// secret boards leave it while their board is secret.
	objs = visible(objs, user)
	page, err := s.page(ctx, v, objs, l.NextCursor, nil)
	if err != nil {
		return err
	}
	return writePage(w, page)
}

// putMapping: PUT /v1/users/{id}/{mapping}/{target}; idempotent.
func (s *Server) putMapping(m model.Mapping, param string) handlerFunc {
	return s.changeMapping(m, param, func(ctx context.Context, m model.Mapping, from, to uint64) error {
		return s.mappings.AddMapping(ctx, m, from, to)
	})
}

// deleteMapping: DELETE /v1/users/{id}/{mapping}/{target}; idempotent.
func (s *Server) deleteMapping(m model.Mapping, param string) handlerFunc {
	return s.changeMapping(m, param, func(ctx context.Context, m model.Mapping, from, to uint64) error {
		return s.mappings.RemoveMapping(ctx, m, from, to)
	})
}

// changeMapping answers 204 once change (AddMapping or RemoveMapping) has
// been applied to the path's pair of mapping m.
func (s *Server) changeMapping(m model.Mapping, param string, change func(ctx context.Context, m model.Mapping, from, to uint64) error) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		from, to, err := mappingIDs(r, m, param)
		if err != nil {
			return err
		}
		return noContent(w, change(r.Context(), m, from, to))
	}
}

// mappingIDs reads the path's pair of mapping m: {id} and param. A user
// following themselves is EInvalid.
func mappingIDs(r *http.Request, m model.Mapping, param string) (from, to uint64, err error) {
	if from, err = pathID(r, "id", m.From()); err != nil {
		return 0, 0, err
	}
	if to, err = pathID(r, param, m.To()); err != nil {
		return 0, 0, err
	}
	if m == model.UserFollowing && from == to {
		return 0, 0, errorf(model.EInvalid, "a user cannot follow themselves")
	}
	return from, to, nil
}

// movePin: PUT /v1/boards/{id}/pins/{pin_id}/position.
func (s *Server) movePin(w http.ResponseWriter, r *http.Request) error {
	board, err := pathID(r, "id", typeBoard)
	if err != nil {
		return err
	}
	pin, err := pathID(r, "pin_id", typePin)
	if err != nil {
		return err
	}
	before, after, err := s.moveAnchor(w, r, pin, typePin)
	if err != nil {
		return err
	}
	return noContent(w, s.mappings.Move(r.Context(), model.BoardPins, board, pin, before, after))
}

// moveAnchor reads the body of a move of item (of type typ): exactly one
// of before and after, an id of typ other than item's.
func (s *Server) moveAnchor(w http.ResponseWriter, r *http.Request, item uint64, typ idcodec.Type) (before, after uint64, err error) {
	var req moveRequest
	if err := decodeBody(w, r, s.maxBody, &req); err != nil {
		return 0, 0, err
	}
	if (req.Before == nil) == (req.After == nil) {
		return 0, 0, errorf(model.EInvalid, "give exactly one of before and after")
	}
	if req.Before != nil {
		before, err = requiredID("before", *req.Before, typ)
	} else {
		after, err = requiredID("after", *req.After, typ)
	}
	if err != nil {
		return 0, 0, err
	}
	if before == item || after == item {
		return 0, 0, errorf(model.EInvalid, "a %s cannot be moved next to itself", typ)
	}
	return before, after, nil
}
