package api

// How each route decides what its caller may see. Secret boards, their
// pins and the comments on those pins are seen only by the board's owner
// and by service tokens; to any other user token they are the same 404 as
// a missing object, on every route, reads and writes alike (secret.go).
// Every route declares, beside its permission in routes.go, which of the
// visibility kinds below apply to it; New refuses a route that declares
// none, or a combination that cannot hold.
//
//   - noSecrets: it touches nothing that can be secret (users, follows,
//     the operational routes).
//   - pathObjects: the boards, pins and comments its path names ({id}
//     after boards, pins or comments; {pin_id}) must be visible to the
//     caller. For a user token the guard reads them before the permission
//     and the handler run, and answers one missing or hidden the same 404
//     problem (hidden), so a 403 can never confirm a secret object and a
//     write never reaches it.
//   - filters: it answers with objects, and leaves out those the caller
//     may not see (lists, multi-gets, owner look-ups, viewer edges count
//     a hidden pin as not liked); a user it shows to anyone but that user
//     carries counts without their secret boards and pins.
//   - bodyObjects: the boards and pins its body names are checked by the
//     store, in the write's own transaction, against the user the write
//     acts for: one that user may not see is the missing object's 404.
//
// A later route inherits nothing: it must say which apply, and the matrix
// test of cmd/pinstore runs every route of the table as the owner, another
// user and a service token against public, secret and re-hidden boards.

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"

	"github.com/pinstore/pinstore/auth"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// visibility is the set of kinds a route declares; its zero value is no
// declaration.
type visibility uint8

const (
	noSecrets visibility = 1 << iota
	pathObjects
	filters
	bodyObjects
)

var visibilityNames = [...]struct {
	v    visibility
	name string
}{{noSecrets, "noSecrets"}, {pathObjects, "pathObjects"}, {filters, "filters"}, {bodyObjects, "bodyObjects"}}

// kinds names the kinds of v, in declaration order.
func (v visibility) kinds() []string {
	var out []string
	for _, k := range visibilityNames {
		if v&k.v != 0 {
			out = append(out, k.name)
		}
	}
	return out
}

func (v visibility) String() string { return strings.Join(v.kinds(), "|") }

// secretParam is a path parameter naming an object that can be secret.
type secretParam struct {
	name string
	typ  idcodec.Type
}

// paramTypes are the path segments whose next segment, when it is a
// parameter, names an object that can be hidden from a user: the
// collection of every declared type that can be (canHide), as in
// /v1/boards/{id}, /v1/pins/{id}, /v1/comments/{id}, /v1/sections/{id},
// …/pins/{pin_id} and …/sections/{section_id}, and the viewer lists whose
// segment is not a collection but whose items can be hidden:
// …/likes/{pin_id}.
var paramTypes = withHideable(hideableEdgeLists())

// hideableEdgeLists maps the path segment of each list with viewer edges
// (model.ViewerEdgeOf: a user's likes, a user's following) whose items
// can be hidden to its items' type.
func hideableEdgeLists() map[string]idcodec.Type {
	out := map[string]idcodec.Type{}
	for _, m := range model.Mappings() {
		if m.ViewerEdge() != "" && canHide(m.To()) {
			out[m.CountName()] = m.To()
		}
	}
	return out
}

// withHideable returns lists with the collection of every declared type
// that can be hidden added.
func withHideable(lists map[string]idcodec.Type) map[string]idcodec.Type {
	out := maps.Clone(lists)
	for _, typ := range model.ObjectTypes() {
		if canHide(typ) {
			out[collection(typ)] = typ
		}
	}
	return out
}

// canHide reports whether objects of typ can be hidden from a user: they
// can be secret (model.SecretOwner), or are seen through a parent that
// can (seenThrough).
func canHide(typ idcodec.Type) bool {
	_, secret := model.SecretOwner(typ)
	_, through := seenThrough(typ)
	return secret || through
}

// seenThrough is, for a type whose objects are never secret themselves
// but are on a list of a parent that can be (a comment on its pin's
// pin_comments), that membership: such an object is seen exactly when
// its parent is. ok is false for every other type.
func seenThrough(typ idcodec.Type) (m model.Member, ok bool) {
	t, declared := model.TypeOf(typ)
	if _, secret := model.SecretOwner(typ); secret || !declared {
		return m, false
	}
	for _, mb := range t.Members {
		if _, secret := model.SecretOwner(mb.List.From()); secret {
			return mb, true
		}
	}
	return m, false
}

// secretParams lists the parameters of pattern that name boards, pins or
// comments, in path order.
func secretParams(pattern string) []secretParam {
	var out []secretParam
	segs := strings.Split(pattern, "/")
	for i := 1; i < len(segs); i++ {
		seg := segs[i]
		if len(seg) < 3 || seg[0] != '{' || seg[len(seg)-1] != '}' {
			continue
		}
		if typ, ok := paramTypes[segs[i-1]]; ok {
			out = append(out, secretParam{seg[1 : len(seg)-1], typ})
		}
	}
	return out
}

// checkVisibility refuses a declaration that cannot hold: none at all,
// noSecrets beside another kind, pathObjects on a path that names no
// board, pin or comment, or noSecrets on one that does.
func checkVisibility(method, pattern string, v visibility) error {
	params := secretParams(pattern)
	switch {
	case v == 0:
		return fmt.Errorf("%s %s declares no visibility", method, pattern)
	case v&noSecrets != 0 && v != noSecrets:
		return fmt.Errorf("%s %s declares noSecrets beside %s", method, pattern, v)
	case v&pathObjects != 0 && len(params) == 0:
		return fmt.Errorf("%s %s declares pathObjects but its path names no board, pin or comment", method, pattern)
	case v&pathObjects == 0 && len(params) > 0:
		return fmt.Errorf("%s %s names %s in its path but does not declare pathObjects", method, pattern, params[0].name)
	}
	return nil
}

// seenKey keeps the path objects the guard read (seenObjects), so the
// permission and the handler do not read them again.
type seenObjects map[uint64]model.Object

// seen returns the object id the guard read for this request, if any.
func seen(ctx context.Context, id uint64) (model.Object, bool) {
	objs, _ := ctx.Value(seenKey).(seenObjects)
	o, ok := objs[id]
	return o, ok
}

// getSeen is ObjectReader.Get, answered from what the guard read when it
// read id.
func (s *Server) getSeen(ctx context.Context, id uint64, typ idcodec.Type) (model.Object, error) {
	if o, ok := seen(ctx, id); ok && o.Type == typ {
		return o, nil
	}
	return s.objects.Get(ctx, id, typ)
}

// seePath runs the pathObjects check of a route for a user principal: each
// board, pin or comment its path names must be live and visible to p's
// user, or the request is hidden(typ), as for a missing object. It returns
// ctx with the objects it read (seenKey).
func (s *Server) seePath(r *http.Request, params []secretParam, p auth.Principal) (context.Context, error) {
	ctx := r.Context()
	objs := make(seenObjects, len(params)+1)
	for _, sp := range params {
		id, err := pathID(r, sp.name, sp.typ)
		if err != nil {
			return ctx, err // what the handler would answer: 400, or 404 for another type's id
		}
		o, err := s.objects.Get(ctx, id, sp.typ)
		if model.IsCode(err, model.ENotFound) {
			return ctx, hidden(sp.typ)
		}
		if err != nil {
			return ctx, err
		}
		objs[id] = o
		if m, ok := seenThrough(sp.typ); ok { // a comment: seen as its pin is
			parent, err := parentOf(o, m)
			if err != nil {
				return ctx, err
			}
			if o, err = s.objects.Get(ctx, parent, m.List.From()); model.IsCode(err, model.ENotFound) {
				return ctx, hidden(sp.typ) // its parent is gone
			} else if err != nil {
				return ctx, err
			}
			if !visibleTo(o, p.UserID) {
				return ctx, hidden(sp.typ)
			}
			objs[parent] = o
			continue
		}
		if !visibleTo(o, p.UserID) {
			return ctx, hidden(sp.typ)
		}
	}
	return context.WithValue(ctx, seenKey, objs), nil
}

// parentOf is the object whose list m the object o is on (a comment's
// pin).
func parentOf(o model.Object, m model.Member) (uint64, error) {
	d, err := model.DecodeDoc(o.Type, o.Doc)
	if err != nil {
		return 0, err
	}
	return uint64(m.Of(d)), nil
}

// RouteRule is how one route of the table decides who may call it and
// what its caller may see, as its declaration names them: for tests and
// documentation that must cover every route.
type RouteRule struct {
	Method, Pattern string
	Permission      string
	Visibility      []string // noSecrets, pathObjects, filters, bodyObjects
}

// RouteRules lists every route of the table with its rules, in table
// order.
func RouteRules() []RouteRule {
	table := (&Server{}).routeTable()
	out := make([]RouteRule, len(table))
	for i, rt := range table {
		out[i] = RouteRule{Method: rt.method, Pattern: rt.pattern, Permission: rt.who.name, Visibility: rt.see.kinds()}
	}
	return out
}
