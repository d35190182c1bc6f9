package api

// Who may call a route. Config.Auth authenticates (and rate limits) a
// request; the permission each route declares beside it in routes.go then
// decides whether the principal may do what the route does. With
// Config.Auth nil no permission runs.
//
//   - readAny: reading, which every valid token may do (scope read).
//   - admin: scope admin.
//   - servicesOnly: scope write, and no user token (creating users).
//   - servicesRead: scope read, and no user token (the change stream, which
//     tells every user's changes, secret ones too).
//   - The as… permissions: scope write. A service token with write acts
//     for any user; a user token acts only as its user, and the permission
//     says which user a write acts as: the path's {id} (asPathUser), the
//     editor of the object {id} as its type declares it
//     (model.ObjectType.Editor: asEditor, named asBoardEditor,
//     asPinEditor, …; a pin's owner by the owner cache, Store.Owners,
//     when the guard did not read the pin), or the user the body names
//     (asBodyUser).
//     asBodyUser leaves the comparison to the handler, which decodes the
//     body once: the guard puts a user token's user in the request context
//     (actor), and the handler, or the store for a pin's board, refuses a
//     body naming another user.
//   - public: not behind Config.Auth at all (the operational routes).
//
// A refusal is 403 forbidden. Objects that don't exist are 404, exactly as
// the handler would answer; since every token may read what it can see,
// and the route's visibility check (visibility.go) runs first and answers
// 404 for what the caller may not see, a 403 on an existing object
// reveals nothing a GET wouldn't.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/pinstore/pinstore/auth"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// A permission says who may call a route when Config.Auth is on. Its zero
// value is no permission: New refuses a route that declares it.
type permission struct {
	name  string     // how tests and errors name it
	open  bool       // not behind Config.Auth at all
	scope auth.Scope // the scope every caller needs
	user  userRule   // a user token's further check; nil: the scope is enough
}

// userRule checks a user principal's write from the request's path; it
// returns nil when p may do it. It never reads the body: that is the
// handler's, read once.
type userRule func(s *Server, r *http.Request, p auth.Principal) error

// The permissions routes declare.
var (
	public       = permission{name: "public", open: true}
	readAny      = permission{name: "readAny", scope: auth.ScopeRead}
	admin        = permission{name: "admin", scope: auth.ScopeAdmin}
	servicesOnly = permission{name: "servicesOnly", scope: auth.ScopeWrite, user: refuseUsers}
	servicesRead = permission{name: "servicesRead", scope: auth.ScopeRead, user: refuseUsers}
	asPathUser   = permission{name: "asPathUser", scope: auth.ScopeWrite, user: selfInPath}
	asBodyUser   = permission{name: "asBodyUser", scope: auth.ScopeWrite, user: userInBody}
)

// asEditor is the permission to change or delete the object {id} of
// typ: scope write, and a user token only as the object's editor
// (editorInPath); asPathUser for a user, its own editor. Its name says
// whose the object is: asBoardEditor, asPinEditor, …. For a type with no
// declaration it is no permission, which New refuses.
func asEditor(typ idcodec.Type) permission {
	t, ok := model.TypeOf(typ)
	if !ok {
		return permission{}
	}
	if t.Editor < 0 {
		return asPathUser
	}
	name := typ.String()
	return permission{name: "as" + strings.ToUpper(name[:1]) + name[1:] + "Editor", scope: auth.ScopeWrite, user: editorInPath(typ, t)}
}

// declared reports whether who is a permission rather than the zero value.
func (who permission) declared() bool { return who.name != "" }

// check returns nil when p may use the route that who guards, else the
// error to answer: 403 forbidden, or what the handler would answer for an
// object that does not exist (404).
func (who permission) check(s *Server, r *http.Request, p auth.Principal) error {
	if !p.Has(who.scope) {
		return forbidden("this route needs scope %s", who.scope)
	}
	if who.user == nil || !p.IsUser() {
		return nil // a service token with the scope acts for any user
	}
	return who.user(s, r, p)
}

// protect returns h as route rt serves it: behind Config.Auth (auth) and
// then its guard, or h itself when auth is off or the route is public.
func (s *Server) protect(auth func(http.Handler) http.Handler, rt route, h http.Handler) http.Handler {
	if auth == nil || rt.who.open {
		return h
	}
	var params []secretParam
	if rt.see&pathObjects != 0 {
		params = secretParams(rt.pattern)
	}
	return auth(s.guard(rt.who, params, h))
}

// guard runs h when the principal Config.Auth authenticated may see the
// objects params name (a user token: seePath; visibility.go) and who lets
// it call the route, with a user token's user in the context as the
// actor. It answers 401 when Auth let the request through without a
// principal, the missing object's 404 for an object the user may not see,
// and the error of who.check when who refuses, in that order.
func (s *Server) guard(who permission, params []secretParam, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := principalOf(w, r)
		if !ok { // Auth did not authenticate: refuse rather than guess
			w.Header().Set("WWW-Authenticate", `Bearer realm="pinstore"`)
			writeError(w, r, s.logger, errorf(model.EUnauthorized, "a bearer token is required"))
			return
		}
		recordPrincipal(w, p)
		if len(params) > 0 && p.IsUser() && p.Has(who.scope) {
			ctx, err := s.seePath(r, params, p)
			if err != nil {
				writeError(w, r, s.logger, err)
				return
			}
			r = r.WithContext(ctx)
		}
		if err := who.check(s, r, p); err != nil {
			writeError(w, r, s.logger, err)
			return
		}
		if sw, ok := w.(*statusWriter); ok { // the request's record (observe): no context copy
			sw.acting, sw.guarded = p, true
			h.ServeHTTP(w, r)
			return
		}
		ctx := context.WithValue(r.Context(), scopeKey, keyScope(p))
		if p.IsUser() {
			ctx = context.WithValue(ctx, actorKey, p.UserID)
		}
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// principalOf is the principal Config.Auth authenticated: recorded in the
// request's record (auth.PrincipalRecorder) or in the context.
func principalOf(w http.ResponseWriter, r *http.Request) (auth.Principal, bool) {
	if sw, ok := w.(*statusWriter); ok && sw.authn != nil {
		return *sw.authn, true
	}
	return auth.FromContext(r.Context())
}

// forbidden is the refusal of a write the principal may not do.
func forbidden(format string, args ...any) error {
	return errorf(model.EForbidden, format, args...)
}

var errNotYours = forbidden("this token may only act as its own user")

// actor is the user a request acts as: a user token's user, put in the
// context by guard; 0 for a service token, and with auth off.
func actor(ctx context.Context) uint64 {
	if sw, ok := ctx.Value(requestIDKey).(*statusWriter); ok && sw.guarded {
		if sw.acting.IsUser() {
			return sw.acting.UserID
		}
		return 0
	}
	id, _ := ctx.Value(actorKey).(uint64)
	return id
}

// actAs returns nil when the request may act as user: any request but a
// user token's, and a user token's as its own user. Otherwise it is 403
// forbidden with refusal as its message.
func actAs(ctx context.Context, user uint64, refusal string) error {
	if a := actor(ctx); a != 0 && a != user {
		return forbidden("%s", refusal)
	}
	return nil
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

// refuseUsers: no user token may do this (create users).
func refuseUsers(*Server, *http.Request, auth.Principal) error {
	return forbidden("only a service token may do this")
}

// selfInPath: the path's {id} is the user.
func selfInPath(s *Server, r *http.Request, p auth.Principal) error {
	id, err := pathID(r, "id", typeUser)
	if err != nil {
		return err
	}
	if id != p.UserID {
		return errNotYours
	}
	return nil
}

// userInBody: the body names the user, and the handler (or the store, for
// a pin's board) compares it with actor, the token's user, after decoding
// the body once. Here only a user token that names no user is refused, so
// that such a token can never pass for a service token (actor 0).
func userInBody(_ *Server, _ *http.Request, p auth.Principal) error {
	if p.UserID == 0 {
		return errNotYours
	}
	return nil
}

// editorInPath is the rule of a write to the object {id} of typ, whose
// declaration is t: its editor (model.ObjectType.Editor: a board's or
// pin's owner, a comment's author, a section's board's owner) is the
// user. Another user is refused with t.Refusal.
func editorInPath(typ idcodec.Type, t *model.ObjectType) userRule {
	refusal := t.Refusal
	if refusal == "" {
		refusal = fmt.Sprintf("this %s belongs to another user", typ)
	}
	return func(s *Server, r *http.Request, p auth.Principal) error {
		id, err := pathID(r, "id", typ)
		if err != nil {
			return err
		}
		editor, err := s.editorOf(r.Context(), id, typ, t.Editor)
		if err != nil {
			return err
		}
		if editor != p.UserID {
			return forbidden("%s", refusal)
		}
		return nil
	}
}

// editorOf is ref i of the live object id (its editor), read on the
// object the guard read (the route's pathObjects check has already
// answered one p may not see as missing). When the guard did not read it
// and ref i is the owner of a type the owner cache holds
// (model.ObjectType.OwnerCached), it is answered by the cache,
// Store.Owners, rather than a read of the object. ENotFound as the
// handler would answer.
func (s *Server) editorOf(ctx context.Context, id uint64, typ idcodec.Type, i int) (uint64, error) {
	o, ok := seen(ctx, id)
	if d, found := model.TypeOf(typ); !ok && found && d.OwnerCached && i == d.Owner {
		owners, err := s.ownerCache.Owners(ctx, []uint64{id})
		if err != nil {
			return 0, err
		}
		owner, ok := owners[id]
		if !ok {
			return 0, hidden(typ)
		}
		return owner, nil
	}
	if !ok || o.Type != typ {
		var err error
		if o, err = s.objects.Get(ctx, id, typ); err != nil {
			return 0, err
		}
	}
	doc, err := model.DecodeDoc(typ, o.Doc)
	if err != nil {
		return 0, err
	}
	return uint64(doc.Ref(i)), nil
}
