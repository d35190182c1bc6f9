package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// The viewer's edges: does a user like a pin, follow a user, for one or a
// set, answered from the user's own shard (their likes and follows live
// there); and the same state carried on the items of a list for a
// ?viewer=ID, so a feed or board page needs no second round trip.

// EdgeReader answers whether a list holds given entries.
type EdgeReader interface {
	// HasMany reports, for each of tos in order, whether from's list m
	// holds it: from the edge cache where it answers, else with one
	// statement on from's shard. ENotFound when from is not live.
	HasMany(ctx context.Context, m model.Mapping, from uint64, tos []uint64) ([]bool, error)
	// HasManyLive is HasMany, with an edge reported only when its object
	// is live, and that object (objs[i]) for each edge reported.
	HasManyLive(ctx context.Context, m model.Mapping, from uint64, tos []uint64) (has []bool, objs []model.Object, err error)
}

// hasEdge: GET /v1/users/{id}/likes/{pin_id} and …/following/{target_id}:
// 204 when the user likes the pin (follows the target), 404 when not, when
// the user or the target does not exist, or when the caller may not see
// the pin (visibleEdges).
func (s *Server) hasEdge(m model.Mapping, param string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		from, err := pathID(r, "id", m.From())
		if err != nil {
			return err
		}
		to, err := pathID(r, param, m.To())
		if err != nil {
			return err
		}
		has, err := s.visibleEdges(r.Context(), m, from, []uint64{to})
		if err != nil {
			return err
		}
		if !has[0] {
			// Built without fmt: half the checks of a viewer's state answer this.
			return model.Wrap("", model.ENotFound, "user "+strconv.FormatUint(from, 10)+" does not "+m.Verb()+" "+m.To().String()+" "+strconv.FormatUint(to, 10), nil)
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

// hasEdges: GET /v1/users/{id}/likes/contains?ids=… (…/following/contains):
// for each id, in request order, whether the user likes (follows) it.
func (s *Server) hasEdges(m model.Mapping) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		from, err := pathID(r, "id", m.From())
		if err != nil {
			return err
		}
		raw, _, err := queryValue(r.URL.Query(), "ids")
		if err != nil {
			return err
		}
		ids, order, err := parseIDList(raw, MaxEdgeIDs, m.To())
		if err != nil {
			return err
		}
		has, err := s.visibleEdges(r.Context(), m, from, ids)
		if err != nil {
			return err
		}
		byID := make(map[string]bool, len(ids))
		for i, id := range ids {
			byID[strconv.FormatUint(id, 10)] = has[i]
		}
		name := m.ViewerEdge()
		return writeBuilt(w, http.StatusOK, func(b []byte) ([]byte, error) {
			b = append(b, `{"items":[`...)
			for i, key := range order { // every key is an ID parseIDList accepted: digits only
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"id":"`...)
				b = append(b, key...)
				b = append(b, `","`...)
				b = append(b, name...)
				b = append(b, `":`...)
				b = strconv.AppendBool(b, byID[key])
				b = append(b, '}')
			}
			return append(b, "]}\n"...), nil
		})
	}
}

// viewer is a request's ?viewer=ID: whose state to carry on a list's
// items, and the edge that says it.
type viewer struct {
	user uint64
	edge model.Mapping // 0: no viewer asked for
}

// parseViewer reads ?viewer=ID for a list of objects of typ, before any
// I/O. A viewer on objects with no such edge (boards, comments) or a
// malformed one is EInvalid.
func parseViewer(r *http.Request, typ idcodec.Type) (viewer, error) {
	v, ok, err := queryValue(r.URL.Query(), "viewer")
	if err != nil || !ok {
		return viewer{}, err
	}
	user, err := bodyID("viewer", v, typeUser)
	if err != nil {
		return viewer{}, err
	}
	m, ok := model.ViewerEdgeOf(typ)
	if !ok {
		return viewer{}, errorf(model.EInvalid, "viewer applies to lists of pins or of users, not of %ss", typ)
	}
	return viewer{user, m}, nil
}

// page is one page of a list with v's state on each item, read with one
// statement on the viewer's shard. An unknown viewer is ENotFound.
func (s *Server) page(ctx context.Context, v viewer, objs []model.Object, next string, count *int64) (listPage, error) {
	p := listPage{objs: objs, next: next, count: count}
	if v.edge == 0 {
		return p, nil
	}
	ids := make([]uint64, len(objs))
	for i, o := range objs {
		ids[i] = o.ID
	}
	flags, err := s.edges.HasMany(ctx, v.edge, v.user, ids)
	p.edge, p.flags = v.edge.ViewerEdge(), flags
	return p, err
}

// visibleEdges is HasMany, with an edge reported only when the request's
// user may see its object: never one to an object that is gone (its
// removal from the list may still be on its way, store.Delete), nor one to
// another user's secret pin. The objects of the edges found are read as
// any read by id is (HasManyLive: with the edge cache on, in the edges'
// own round trip); when the guard already read every one of tos for the
// path (seen), they are not read again.
func (s *Server) visibleEdges(ctx context.Context, m model.Mapping, from uint64, tos []uint64) ([]bool, error) {
	guarded := true // the guard found the objects it read (seen) live and visible
	for _, to := range tos {
		if o, ok := seen(ctx, to); !ok || o.Type != m.To() {
			guarded = false
			break
		}
	}
	if guarded {
		return s.edges.HasMany(ctx, m, from, tos)
	}
	has, objs, err := s.edges.HasManyLive(ctx, m, from, tos)
	if err != nil {
		return nil, err
	}
	viewer := actor(ctx)
	for i := range has {
		has[i] = has[i] && visibleTo(objs[i], viewer)
	}
	return has, nil
}
