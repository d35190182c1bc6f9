package api

// Per-route permissions. Config.Auth authenticates (and rate limits) a
// request; authorize, right behind it on every /v1 route, decides whether
// the principal may do what the route does:
//
//   - Routes under /v1/admin need scope admin.
//   - Reading (GET, and POST /v1/pins/owners) needs read, which every
//     valid token has.
//   - Writing needs write. A service token with write may act for any
//     user. A user token acts only as its user: the rules below say, per
//     route, which user a write acts as (the path's user, the body's
//     owner_id or author_id, the owner of the board or pin, the author of
//     the comment). Ownership of a pin comes from Store.Owners, the owner
//     cache.
//   - A write route without a rule needs admin: a new route is closed
//     until someone writes its rule.
//
// A refusal is 403 forbidden. Objects that don't exist are 404, exactly as
// the handler would answer; since every token may read, a 403 on an
// existing object reveals nothing a GET wouldn't.

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/pinstore/pinstore/auth"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// userRule checks a user principal's write; it returns nil when p may do
// it. It may read the body, and must leave it for the handler.
type userRule func(s *Server, w http.ResponseWriter, r *http.Request, p auth.Principal) error

// writeRules are the write routes a user token may use, by method and
// chi pattern.
var writeRules = map[string]userRule{
	"PATCH /v1/users/{id}":                        selfInPath,
	"DELETE /v1/users/{id}":                       selfInPath,
	"PUT /v1/users/{id}/following/{target_id}":    selfInPath,
	"DELETE /v1/users/{id}/following/{target_id}": selfInPath,
	"PUT /v1/users/{id}/likes/{pin_id}":           selfInPath,
	"DELETE /v1/users/{id}/likes/{pin_id}":        selfInPath,
	"POST /v1/users":                              servicesOnly,
	"POST /v1/boards":                             ownerInBody,
	"PATCH /v1/boards/{id}":                       ownsBoardInPath,
	"DELETE /v1/boards/{id}":                      ownsBoardInPath,
	"PUT /v1/boards/{id}/pins/{pin_id}/position":  ownsBoardInPath,
	"POST /v1/pins":                               ownsBoardInBody,
	"PATCH /v1/pins/{id}":                         ownsPinInPath,
	"DELETE /v1/pins/{id}":                        ownsPinInPath,
	"POST /v1/pins/{id}/comments":                 authorInBody,
	"PATCH /v1/comments/{id}":                     authorOfCommentInPath,
	"DELETE /v1/comments/{id}":                    authorOfCommentInPath,
}

// readRoutes are the non-GET routes that only read.
var readRoutes = map[string]bool{
	"POST /v1/pins/owners": true,
}

// adminPrefix starts the routes that need scope admin.
const adminPrefix = "/v1/admin"

// forbidden is the refusal of a write the principal may not do.
func forbidden(format string, args ...any) error {
	return errorf(model.EForbidden, format, args...)
}

var errNotYours = forbidden("this token may only act as its own user")

// authorize is the per-route permission check, after Config.Auth.
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := auth.FromContext(r.Context())
		if !ok { // Auth did not authenticate: refuse rather than guess
			w.Header().Set("WWW-Authenticate", `Bearer realm="pinstore"`)
			writeError(w, r, s.logger, errorf(model.EUnauthorized, "a bearer token is required"))
			return
		}
		recordPrincipal(w, p)
		if err := s.permit(w, r, p); err != nil {
			writeError(w, r, s.logger, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// permit returns nil when p may use r's route, else the error to answer.
func (s *Server) permit(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	route := routePattern(r)
	key := r.Method + " " + route
	switch {
	case route == adminPrefix || strings.HasPrefix(route, adminPrefix+"/"):
		if !p.Has(auth.ScopeAdmin) {
			return forbidden("this route needs scope admin")
		}
		return nil
	case r.Method == http.MethodGet || r.Method == http.MethodHead || readRoutes[key]:
		if !p.Has(auth.ScopeRead) {
			return forbidden("this route needs scope read")
		}
		return nil
	}
	if !p.Has(auth.ScopeWrite) {
		return forbidden("this route needs scope write")
	}
	rule, ok := writeRules[key]
	if !ok {
		if !p.Has(auth.ScopeAdmin) {
			return forbidden("this route needs scope admin")
		}
		return nil
	}
	if !p.IsUser() {
		return nil // a service token with write acts for any user
	}
	return rule(s, w, r, p)
}

// requireAdmin guards an operational route (/metrics) with scope admin.
func (s *Server) requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := auth.FromContext(r.Context())
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pinstore"`)
			writeError(w, r, s.logger, errorf(model.EUnauthorized, "a bearer token is required"))
			return
		}
		recordPrincipal(w, p)
		if !p.Has(auth.ScopeAdmin) {
			writeError(w, r, s.logger, forbidden("this route needs scope admin"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// adminOnly is the middleware of the operational routes that need admin
// (/metrics): none when auth is off, else auth and requireAdmin.
func (s *Server) adminOnly(auth func(http.Handler) http.Handler) []func(http.Handler) http.Handler {
	if auth == nil {
		return nil
	}
	return []func(http.Handler) http.Handler{auth, s.requireAdmin}
}

// AuthFailure returns the function with which auth.Middleware answers a
// request it refuses: 401 unauthorized or 429 rate_limited problems, the
// latter with the token's own Retry-After.
func AuthFailure(logger *slog.Logger) func(http.ResponseWriter, *http.Request, error) {
	if logger == nil {
		logger = slog.Default()
	}
	return func(w http.ResponseWriter, r *http.Request, err error) {
		if p, ok := auth.FromContext(r.Context()); ok {
			recordPrincipal(w, p)
		}
		var rl *auth.RateLimitError
		if errors.As(err, &rl) {
			prob, _ := problemFor(r, err)
			w.Header().Set("Retry-After", rl.RetryAfter())
			writeProblem(w, prob)
			return
		}
		writeError(w, r, logger, err)
	}
}

// recordPrincipal names the principal in the access log line.
func recordPrincipal(w http.ResponseWriter, p auth.Principal) {
	if sw, ok := w.(*statusWriter); ok {
		sw.principal = p.Name
	}
}

// selfInPath: the path's {id} is the user.
func selfInPath(s *Server, w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id, err := pathID(r, "id", typeUser)
	if err != nil {
		return err
	}
	if id != p.UserID {
		return errNotYours
	}
	return nil
}

// servicesOnly: no user token may do this (create users).
func servicesOnly(*Server, http.ResponseWriter, *http.Request, auth.Principal) error {
	return forbidden("only a service token may do this")
}

// peekBody decodes the body as the handler will (same limits, same strict
// decoding, so the same errors) and puts it back for the handler.
func (s *Server) peekBody(w http.ResponseWriter, r *http.Request, dst any) error {
	b, err := readBody(w, r, s.maxBody, "application/json")
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return decodeStrict(b, dst)
}

// ownerInBody: POST /v1/boards for the user themself.
func ownerInBody(s *Server, w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var req createBoardRequest
	if err := s.peekBody(w, r, &req); err != nil {
		return err
	}
	owner, err := requiredID("owner_id", req.OwnerID, typeUser)
	if err != nil {
		return err
	}
	if owner != p.UserID {
		return forbidden("a user token may only create boards for its own user")
	}
	return nil
}

// authorInBody: comment as the user themself.
func authorInBody(s *Server, w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if _, err := pathID(r, "id", typePin); err != nil {
		return err
	}
	var req createCommentRequest
	if err := s.peekBody(w, r, &req); err != nil {
		return err
	}
	author, err := requiredID("author_id", req.AuthorID, typeUser)
	if err != nil {
		return err
	}
	if author != p.UserID {
		return forbidden("a user token may only comment as its own user")
	}
	return nil
}

// ownsBoardInBody: POST /v1/pins on one of the user's boards.
func ownsBoardInBody(s *Server, w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	var req createPinRequest
	if err := s.peekBody(w, r, &req); err != nil {
		return err
	}
	board, err := requiredID("board_id", req.BoardID, typeBoard)
	if err != nil {
		return err
	}
	return s.ownsRef(r.Context(), board, typeBoard, 0, p, "a user token may only pin on its own user's boards")
}

// ownsBoardInPath: the board {id} is the user's.
func ownsBoardInPath(s *Server, w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id, err := pathID(r, "id", typeBoard)
	if err != nil {
		return err
	}
	return s.ownsRef(r.Context(), id, typeBoard, 0, p, "this board belongs to another user")
}

// authorOfCommentInPath: the comment {id} is the user's.
func authorOfCommentInPath(s *Server, w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id, err := pathID(r, "id", typeComment)
	if err != nil {
		return err
	}
	return s.ownsRef(r.Context(), id, typeComment, 1, p, "this comment is another user's")
}

// ownsRef checks that ref i of the live object id (a board's owner, a
// comment's author) is p's user. ENotFound as the handler would answer.
func (s *Server) ownsRef(ctx context.Context, id uint64, typ idcodec.Type, i int, p auth.Principal, refusal string) error {
	o, err := s.store.Get(ctx, id, typ)
	if err != nil {
		return err
	}
	doc, err := model.DecodeDoc(typ, o.Doc)
	if err != nil {
		return err
	}
	if uint64(doc.Refs()[i]) != p.UserID {
		return forbidden("%s", refusal)
	}
	return nil
}

// ownsPinInPath: the pin {id} is the user's, by the owner cache.
func ownsPinInPath(s *Server, w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	id, err := pathID(r, "id", typePin)
	if err != nil {
		return err
	}
	owners, err := s.store.Owners(r.Context(), []uint64{id})
	if err != nil {
		return err
	}
	owner, ok := owners[id]
	if !ok {
		return errorf(model.ENotFound, "pin %d not found", id)
	}
	if owner != p.UserID {
		return forbidden("this pin belongs to another user")
	}
	return nil
}
