package api

import (
	"fmt"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/pinstore/pinstore/model"
)

// A route is one operation of the API: its method and chi pattern, who
// may call it when Config.Auth is on (authz.go), and its handler.
type route struct {
	method, pattern string
	who             permission
	h               handlerFunc
}

// routeTable is the one list of routes, each with its permission beside
// it. openapi.yaml describes exactly these routes (a test proves it).
func (s *Server) routeTable() []route {
	return []route{
		// Operational routes: never behind Auth, except /metrics.
		{"GET", "/healthz", public, s.healthz},
		{"GET", "/readyz", public, s.readyz},
		{"GET", "/metrics", admin, s.serveMetrics},
		{"GET", "/openapi.yaml", public, s.openAPI},
		{"GET", "/docs", public, s.docsPage},
		{"GET", "/docs/redoc.standalone.js", public, s.redocScript},

		{"POST", "/v1/users", servicesOnly, s.idempotent(s.createUser)},
		{"GET", "/v1/users", readAny, s.getMany(typeUser)},
		{"GET", "/v1/usernames/{username}", readAny, s.userByUsername},
		{"GET", "/v1/users/{id}", readAny, s.getObject(typeUser)},
		{"PATCH", "/v1/users/{id}", asPathUser, s.patchObject(typeUser)},
		{"DELETE", "/v1/users/{id}", asPathUser, s.deleteObject(typeUser)},
		{"GET", "/v1/users/{id}/boards", readAny, s.list(model.UserBoards)},
		{"GET", "/v1/users/{id}/pins", readAny, s.list(model.UserPins)},
		{"GET", "/v1/users/{id}/following", readAny, s.list(model.UserFollowing)},
		{"GET", "/v1/users/{id}/followers", readAny, s.list(model.UserFollowers)},
		{"GET", "/v1/users/{id}/following/contains", readAny, s.hasEdges(model.UserFollowing)},
		{"GET", "/v1/users/{id}/following/{target_id}", readAny, s.hasEdge(model.UserFollowing, "target_id")},
		{"PUT", "/v1/users/{id}/following/{target_id}", asPathUser, s.putMapping(model.UserFollowing, "target_id")},
		{"DELETE", "/v1/users/{id}/following/{target_id}", asPathUser, s.deleteMapping(model.UserFollowing, "target_id")},
		{"GET", "/v1/users/{id}/likes", readAny, s.list(model.UserLikes)},
		{"GET", "/v1/users/{id}/likes/contains", readAny, s.hasEdges(model.UserLikes)},
		{"GET", "/v1/users/{id}/likes/{pin_id}", readAny, s.hasEdge(model.UserLikes, "pin_id")},
		{"PUT", "/v1/users/{id}/likes/{pin_id}", asPathUser, s.putMapping(model.UserLikes, "pin_id")},
		{"DELETE", "/v1/users/{id}/likes/{pin_id}", asPathUser, s.deleteMapping(model.UserLikes, "pin_id")},
		{"GET", "/v1/users/{id}/feed", readAny, s.feed},

		{"POST", "/v1/boards", asBodyUser, s.idempotent(s.createBoard)},
		{"GET", "/v1/boards", readAny, s.getMany(typeBoard)},
		{"GET", "/v1/boards/{id}", readAny, s.getObject(typeBoard)},
		{"PATCH", "/v1/boards/{id}", asBoardOwner, s.patchObject(typeBoard)},
		{"DELETE", "/v1/boards/{id}", asBoardOwner, s.deleteObject(typeBoard)},
		{"GET", "/v1/boards/{id}/pins", readAny, s.list(model.BoardPins)},
		{"PUT", "/v1/boards/{id}/pins/{pin_id}/position", asBoardOwner, s.movePin},

		{"POST", "/v1/pins", asBodyUser, s.idempotent(s.createPin)},
		{"GET", "/v1/pins", readAny, s.getMany(typePin)},
		{"POST", "/v1/pins/owners", readAny, s.idempotent(s.owners)},
		{"GET", "/v1/pins/{id}", readAny, s.getObject(typePin)},
		{"PATCH", "/v1/pins/{id}", asPinOwner, s.patchObject(typePin)},
		{"DELETE", "/v1/pins/{id}", asPinOwner, s.deleteObject(typePin)},
		{"GET", "/v1/pins/{id}/likers", readAny, s.list(model.PinLikers)},
		{"POST", "/v1/pins/{id}/saves", asBodyUser, s.idempotent(s.savePin)},
		{"GET", "/v1/pins/{id}/saves", readAny, s.list(model.PinSaves)},
		{"POST", "/v1/pins/{id}/comments", asBodyUser, s.idempotent(s.createComment)},
		{"GET", "/v1/pins/{id}/comments", readAny, s.list(model.PinComments)},

		{"GET", "/v1/comments/{id}", readAny, s.getObject(typeComment)},
		{"PATCH", "/v1/comments/{id}", asCommentAuthor, s.patchObject(typeComment)},
		{"DELETE", "/v1/comments/{id}", asCommentAuthor, s.deleteObject(typeComment)},

		{"GET", "/v1/ids/{id}", readAny, s.decodeID},

		{"GET", "/v1/admin/shard-map", admin, s.shardMap},
	}
}

// newRouter routes table behind the middleware every request passes
// through, in order; each route behind auth and its permission when auth
// is set (protect). It fails on a route that declares no permission.
func (s *Server) newRouter(auth func(http.Handler) http.Handler, table []route) (chi.Router, error) {
	r := chi.NewRouter()
	r.Use(
		withRequestID,                    // first: everything after logs and answers with it
		s.metrics.measure,                // latency and count per route pattern
		accessLog(s.logger, s.accessLog), // one JSON line per request
		recoverPanics(s.logger),          // a panic becomes a logged 500 problem
	)
	r.NotFound(s.handle(func(w http.ResponseWriter, r *http.Request) error {
		return errorf(model.ENotFound, "no route for %s", r.URL.Path)
	}))
	r.MethodNotAllowed(s.methodNotAllowed)
	for _, rt := range table {
		if !rt.who.declared() {
			return nil, fmt.Errorf("api.New: %s %s declares no permission", rt.method, rt.pattern)
		}
		r.Method(rt.method, rt.pattern, s.protect(auth, rt.who, s.handle(rt.h)))
	}
	return r, nil
}
