package api

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/go-chi/chi/v5"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// A route is one operation of the API: its method and chi pattern, who
// may call it when Config.Auth is on (authz.go), how it decides what its
// caller may see of secret boards (visibility.go), and its handler.
type route struct {
	method, pattern string
	who             permission
	see             visibility
	h               handlerFunc
}

// routeTable is the one list of routes, each with its permission and its
// visibility beside it; each type's GET, PATCH and DELETE of
// /v1/{collection}/{id} follow from its declaration (objectRoutes).
// openapi.yaml describes exactly these routes (a test proves it).
func (s *Server) routeTable() []route {
	return slices.Concat([]route{
		// Operational routes: never behind Auth, except /metrics.
		{"GET", "/healthz", public, noSecrets, s.healthz},
		{"GET", "/readyz", public, noSecrets, s.readyz},
		{"GET", "/metrics", admin, noSecrets, s.serveMetrics},
		{"GET", "/openapi.yaml", public, noSecrets, s.openAPI},
		{"GET", "/docs", public, noSecrets, s.docsPage},
		{"GET", "/docs/redoc.standalone.js", public, noSecrets, s.redocScript},
		{"GET", "/fleet", public, noSecrets, s.fleetPage},

		{"POST", "/v1/users", servicesOnly, noSecrets, s.idempotent(s.create(typeUser))},
		{"GET", "/v1/users", readAny, filters, s.getMany(typeUser)},
		{"GET", "/v1/usernames/{username}", readAny, filters, s.userByUsername},
	}, s.objectRoutes(typeUser), []route{
		{"GET", "/v1/users/{id}/boards", readAny, filters, s.list(model.UserBoards)},
		{"GET", "/v1/users/{id}/pins", readAny, filters, s.list(model.UserPins)},
		{"GET", "/v1/users/{id}/following", readAny, filters, s.list(model.UserFollowing)},
		{"GET", "/v1/users/{id}/followers", readAny, filters, s.list(model.UserFollowers)},
		{"GET", "/v1/users/{id}/following/contains", readAny, noSecrets, s.hasEdges(model.UserFollowing)},
		{"GET", "/v1/users/{id}/following/{target_id}", readAny, noSecrets, s.hasEdge(model.UserFollowing, "target_id")},
		{"PUT", "/v1/users/{id}/following/{target_id}", asPathUser, noSecrets, s.putMapping(model.UserFollowing, "target_id")},
		{"DELETE", "/v1/users/{id}/following/{target_id}", asPathUser, noSecrets, s.deleteMapping(model.UserFollowing, "target_id")},
		{"GET", "/v1/users/{id}/likes", readAny, filters, s.list(model.UserLikes)},
		{"GET", "/v1/users/{id}/likes/contains", readAny, filters, s.hasEdges(model.UserLikes)},
		{"GET", "/v1/users/{id}/likes/{pin_id}", readAny, pathObjects, s.hasEdge(model.UserLikes, "pin_id")},
		{"PUT", "/v1/users/{id}/likes/{pin_id}", asPathUser, pathObjects, s.putMapping(model.UserLikes, "pin_id")},
		{"DELETE", "/v1/users/{id}/likes/{pin_id}", asPathUser, pathObjects, s.deleteMapping(model.UserLikes, "pin_id")},
		{"GET", "/v1/users/{id}/feed", readAny, filters, s.feed},

		{"POST", "/v1/boards", asBodyUser, noSecrets, s.idempotent(s.create(typeBoard))},
		{"GET", "/v1/boards", readAny, filters, s.getMany(typeBoard)},
	}, s.objectRoutes(typeBoard), []route{
		{"GET", "/v1/boards/{id}/pins", readAny, pathObjects, s.list(model.BoardPins)},
		{"PUT", "/v1/boards/{id}/pins/{pin_id}/position", asEditor(typeBoard), pathObjects, s.movePin},
		{"POST", "/v1/boards/{id}/sections", asEditor(typeBoard), pathObjects, s.idempotent(s.create(typeSection))},
		{"GET", "/v1/boards/{id}/sections", readAny, pathObjects, s.list(model.BoardSections)},
		{"PUT", "/v1/boards/{id}/sections/{section_id}/position", asEditor(typeBoard), pathObjects, s.moveSection},
	}, s.objectRoutes(typeSection), []route{
		{"GET", "/v1/sections/{id}/pins", readAny, pathObjects, s.list(model.SectionPins)},

		{"POST", "/v1/pins", asBodyUser, bodyObjects, s.idempotent(s.create(typePin))},
		{"GET", "/v1/pins", readAny, filters, s.getMany(typePin)},
		{"POST", "/v1/pins/owners", readAny, filters, s.idempotent(s.owners)},
	}, s.objectRoutes(typePin), []route{
		{"PUT", "/v1/pins/{id}/section", asEditor(typePin), pathObjects, s.setPinSection},
		{"GET", "/v1/pins/{id}/likers", readAny, pathObjects | filters, s.list(model.PinLikers)},
		{"POST", "/v1/pins/{id}/saves", asBodyUser, pathObjects | bodyObjects, s.idempotent(s.savePin)},
		{"GET", "/v1/pins/{id}/saves", readAny, pathObjects | filters, s.list(model.PinSaves)},
		{"POST", "/v1/pins/{id}/comments", asBodyUser, pathObjects | bodyObjects, s.idempotent(s.create(typeComment))},
		{"GET", "/v1/pins/{id}/comments", readAny, pathObjects, s.list(model.PinComments)},
	}, s.objectRoutes(typeComment), []route{
		{"GET", "/v1/ids/{id}", readAny, noSecrets, s.decodeID},

		{"GET", "/v1/admin/shard-map", admin, noSecrets, s.shardMap},
		{"GET", "/v1/admin/fleet", admin, noSecrets, s.fleet},
		{"GET", "/v1/changes", servicesRead, noSecrets, s.changeBatch},
	})
}

// objectRoutes are the routes of one object of typ, /v1/{collection}/{id}
// (model.ObjectType.Collection): read it, patch it and delete it, the
// writes as its editor (asEditor). The path's object is checked for the
// caller (pathObjects) when it can be hidden (canHide); otherwise it is a
// user's, whose reads show anyone but the user counts without secret
// entries (filters, for a type that counts them) and whose writes are the
// user's own (noSecrets).
func (s *Server) objectRoutes(typ idcodec.Type) []route {
	path := "/v1/" + collection(typ) + "/{id}"
	get, write := pathObjects, pathObjects
	if !canHide(typ) {
		get, write = noSecrets, noSecrets
		if len(model.SecretCounted(typ)) > 0 {
			get = filters
		}
	}
	return []route{
		{"GET", path, readAny, get, s.getObject(typ)},
		{"PATCH", path, asEditor(typ), write, s.patchObject(typ)},
		{"DELETE", path, asEditor(typ), write, s.deleteObject(typ)},
	}
}

// newRouter routes table, each route behind auth, its visibility check
// and its permission when auth is set (protect); ServeHTTP puts observe in
// front of it. It fails on a route that
// declares no permission, or no visibility that can hold (checkVisibility).
func (s *Server) newRouter(auth func(http.Handler) http.Handler, table []route) (chi.Router, error) {
	r := chi.NewRouter()
	r.NotFound(s.handle(func(w http.ResponseWriter, r *http.Request) error {
		if r.URL.Path == "/docs/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			// The page loads its script relative to /docs; a relative
			// Location keeps working behind a proxy that adds a prefix.
			w.Header().Set("Location", "../docs")
			w.WriteHeader(http.StatusMovedPermanently)
			return nil
		}
		return errorf(model.ENotFound, "no route for %s", r.URL.Path)
	}))
	r.MethodNotAllowed(s.methodNotAllowed)
	for _, rt := range table {
		if !rt.who.declared() {
			return nil, fmt.Errorf("api.New: %s %s declares no permission", rt.method, rt.pattern)
		}
		if err := checkVisibility(rt.method, rt.pattern, rt.see); err != nil {
			return nil, fmt.Errorf("api.New: %w", err)
		}
		r.Method(rt.method, rt.pattern, s.metrics.route(rt.method, rt.pattern).routed(s.protect(auth, rt, s.handle(rt.h))))
	}
	return r, nil
}
