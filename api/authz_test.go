package api

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/pinstore/pinstore/auth"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// authzNopStore satisfies Store for building the router; no method is called.
type authzNopStore struct{ Store }

// readOnlyPosts are the non-GET routes that only read. Listed here a
// second time on purpose: a write route declared readAny by accident
// fails TestEveryRouteDeclaresItsPermission.
var readOnlyPosts = map[string]bool{
	"POST /v1/pins/owners": true,
}

// TestEveryRouteDeclaresItsPermission: every routed operation is in the
// route table with a permission, and every entry of the table is routed.
// /v1 routes are behind Auth; an operational route is public or admin; a
// write route needs scope write (or admin), so that a read token cannot
// write through a route whose permission was chosen by accident.
func TestEveryRouteDeclaresItsPermission(t *testing.T) {
	s, err := New(Config{Store: authzNopStore{}, Auth: func(h http.Handler) http.Handler { return h }})
	if err != nil {
		t.Fatal(err)
	}
	table := map[string]permission{}
	for _, rt := range s.routeTable() {
		key := rt.method + " " + rt.pattern
		if _, dup := table[key]; dup {
			t.Errorf("%s is in the route table twice", key)
		}
		table[key] = rt.who
	}
	seen := map[string]bool{}
	err = chi.Walk(s.Routes(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		key := method + " " + route
		seen[key] = true
		who, ok := table[key]
		switch {
		case !ok:
			t.Errorf("%s is routed but not in the route table", key)
		case !who.declared():
			t.Errorf("%s declares no permission", key)
		case !strings.HasPrefix(route, "/v1/"):
			if !who.open && who.scope != auth.ScopeAdmin {
				t.Errorf("operational route %s is %s; want public or admin", key, who.name)
			}
		case who.open:
			t.Errorf("%s is not behind Auth", key)
		case method != http.MethodGet && !readOnlyPosts[key] && who.scope != auth.ScopeWrite && who.scope != auth.ScopeAdmin:
			t.Errorf("write route %s is %s; want a permission that needs scope write", key, who.name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key := range table {
		if !seen[key] {
			t.Errorf("the route table names %s, which is not routed", key)
		}
	}
}

// TestNewRefusesARouteWithoutPermission: a route cannot be served without
// saying who may call it.
func TestNewRefusesARouteWithoutPermission(t *testing.T) {
	s, err := New(Config{Store: authzNopStore{}})
	if err != nil {
		t.Fatal(err)
	}
	nop := func(http.ResponseWriter, *http.Request) error { return nil }
	if _, err := s.newRouter(nil, []route{{method: "PUT", pattern: "/v1/things", h: nop}}); err == nil || !strings.Contains(err.Error(), "PUT /v1/things declares no permission") {
		t.Fatalf("newRouter: %v", err)
	}
}

// Principals of the tokens the tests below present.
var (
	userTok    = auth.Principal{Name: auth.UserName(uint64(mustID(vecUser))), Kind: auth.KindUser, Scopes: auth.ScopeRead | auth.ScopeWrite, UserID: uint64(mustID(vecUser))}
	readTok    = auth.Principal{Name: "reader", Kind: auth.KindService, Scopes: auth.ScopeRead}
	writeTok   = auth.Principal{Name: "writer", Kind: auth.KindService, Scopes: auth.ScopeRead | auth.ScopeWrite}
	adminTok   = auth.Principal{Name: "admin", Kind: auth.KindService, Scopes: auth.ScopeRead | auth.ScopeWrite | auth.ScopeAdmin}
	otherUser  = idString(idcodec.MustEncode(3429, idcodec.TypeUser, 734))
	otherBoard = []byte(`{"owner_id":"` + otherUser + `","name":"theirs","active":true}`)
	ownBoard   = []byte(`{"owner_id":"` + vecUser + `","name":"mine","active":true}`)

	otherSecretBoard = []byte(`{"owner_id":"` + otherUser + `","name":"theirs","secret":true,"active":true}`)
	otherPin         = []byte(`{"board_id":"` + vecBoard + `","owner_id":"` + otherUser + `","active":true}`)
	otherSecretPin   = []byte(`{"board_id":"` + vecBoard + `","owner_id":"` + otherUser + `","secret":true,"active":true}`)
	ownSecretPin     = []byte(`{"board_id":"` + vecBoard + `","owner_id":"` + vecUser + `","secret":true,"active":true}`)
)

// asPrincipal is a Config.Auth that authenticates every request as p; a
// zero p authenticates nobody.
func asPrincipal(p auth.Principal) func(*Config) {
	return func(c *Config) {
		c.Auth = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if p.Name != "" {
					r = r.WithContext(auth.WithPrincipal(r.Context(), p))
				}
				next.ServeHTTP(w, r)
			})
		}
	}
}

// TestPermissions: each kind of permission, for the tokens it admits and
// refuses, with the status and message of today; an object that does not
// exist is 404 as the handler would answer, and a refused request never
// reaches the handler's store call.
func TestPermissions(t *testing.T) {
	boardOf := func(doc []byte) func(context.Context, uint64, idcodec.Type) (model.Object, error) {
		return func(_ context.Context, id uint64, typ idcodec.Type) (model.Object, error) {
			if doc == nil {
				return model.Object{}, model.Errorf(model.ENotFound, "%s not found", typ)
			}
			return model.Object{ID: id, Type: typ, Version: 1, Doc: doc, Flags: storedFlags(typ, doc)}, nil
		}
	}
	// byType answers Get with the document of the id's type in docs (nil:
	// not found).
	byType := func(docs map[idcodec.Type][]byte) func(context.Context, uint64, idcodec.Type) (model.Object, error) {
		return func(_ context.Context, id uint64, typ idcodec.Type) (model.Object, error) {
			doc := docs[typ]
			if doc == nil {
				return model.Object{}, model.Errorf(model.ENotFound, "%s not found", typ)
			}
			return model.Object{ID: id, Type: typ, Version: 1, Doc: doc, Flags: storedFlags(typ, doc)}, nil
		}
	}
	comment := []byte(`{"pin_id":"` + vecPin + `","author_id":"` + otherUser + `","text":"t","active":true}`)
	ownComment := []byte(`{"pin_id":"` + vecPin + `","author_id":"` + vecUser + `","text":"t","active":true}`)
	ownPin := []byte(`{"board_id":"` + vecBoard + `","owner_id":"` + vecUser + `","active":true}`)
	ownerIs := func(owner string) func(context.Context, []uint64) (map[uint64]uint64, error) {
		return func(_ context.Context, pins []uint64) (map[uint64]uint64, error) {
			if owner == "" {
				return map[uint64]uint64{}, nil
			}
			return map[uint64]uint64{pins[0]: uint64(mustID(owner))}, nil
		}
	}
	patchBody := `{"description":"x"}`
	sectionID := idString(idcodec.MustEncode(3429, idcodec.TypeSection, 7))
	otherSection := []byte(`{"board_id":"` + vecBoard + `","owner_id":"` + otherUser + `","name":"s","active":true}`)
	ownSection := []byte(`{"board_id":"` + vecBoard + `","owner_id":"` + vecUser + `","name":"s","active":true}`)
	cases := []struct {
		name         string
		p            auth.Principal
		method, path string
		body         string
		store        fakeStore
		status       int
		detail       string   // in the problem's detail
		calls        []string // the store calls made, in order
	}{
		{"no principal", auth.Principal{}, "GET", "/v1/users/" + vecUser, "", fakeStore{}, 401, "a bearer token is required", nil},
		{"read token reads", readTok, "GET", "/v1/users/" + vecUser, "", fakeStore{get: boardOf([]byte(`{"username":"a","active":true}`))}, 200, "", []string{"Get"}},
		{"read token reads owners", readTok, "POST", "/v1/pins/owners", `{"ids":[]}`, fakeStore{}, 200, "", nil},
		{"read token cannot write", readTok, "PATCH", "/v1/users/" + vecUser, `{"display_name":"x"}`, fakeStore{}, 403, "this route needs scope write", nil},
		{"read token cannot create a pin", readTok, "POST", "/v1/pins", `{`, fakeStore{}, 403, "this route needs scope write", nil},
		{"write token is no admin", writeTok, "GET", "/v1/admin/shard-map", "", fakeStore{}, 403, "this route needs scope admin", nil},
		{"write token and metrics", writeTok, "GET", "/metrics", "", fakeStore{}, 403, "this route needs scope admin", nil},
		{"admin token reads the map", adminTok, "GET", "/v1/admin/shard-map", "", fakeStore{}, 200, "", []string{"ShardMapInfo"}},
		{"user token creates no user", userTok, "POST", "/v1/users", `{"username":"mallory"}`, fakeStore{}, 403, "only a service token may do this", nil},
		{"user token edits another user", userTok, "PATCH", "/v1/users/" + otherUser, `{"display_name":"x"}`, fakeStore{}, 403, "this token may only act as its own user", nil},
		{"user token follows as another", userTok, "PUT", "/v1/users/" + otherUser + "/following/" + vecUser, "", fakeStore{}, 403, "this token may only act as its own user", nil},
		{"user token, malformed path user", userTok, "DELETE", "/v1/users/nope", "", fakeStore{}, 400, "", nil},
		{"user token, another's board", userTok, "PATCH", "/v1/boards/" + vecBoard, patchBody, fakeStore{get: boardOf(otherBoard)}, 403, "this board belongs to another user", []string{"Get"}},
		{"user token, board gone", userTok, "DELETE", "/v1/boards/" + vecBoard, "", fakeStore{get: boardOf(nil)}, 404, "board not found", []string{"Get"}},
		{"user token, its board", userTok, "DELETE", "/v1/boards/" + vecBoard, "", fakeStore{get: boardOf(ownBoard)}, 500, "", []string{"Get", "Delete"}},
		{"user token moves on another's board", userTok, "PUT", "/v1/boards/" + vecBoard + "/pins/" + vecPin + "/position", `{"before":"68719476737"}`, fakeStore{get: byType(map[idcodec.Type][]byte{typeBoard: otherBoard, typePin: otherPin})}, 403, "this board belongs to another user", []string{"Get", "Get"}},
		{"user token, another's comment", userTok, "DELETE", "/v1/comments/" + fuzzComment, "", fakeStore{get: byType(map[idcodec.Type][]byte{typeComment: comment, typePin: otherPin})}, 403, "this comment is another user's", []string{"Get", "Get"}},
		// A comment is as visible as its pin: on another's secret pin, the
		// comment (even the user's own) is as absent as a missing one.
		{"user token, another's comment on a secret pin", userTok, "DELETE", "/v1/comments/" + fuzzComment, "", fakeStore{get: byType(map[idcodec.Type][]byte{typeComment: comment, typePin: otherSecretPin})}, 404, "comment not found", []string{"Get", "Get"}},
		{"user token, its comment on another's secret pin", userTok, "PATCH", "/v1/comments/" + fuzzComment, `{"text":"x"}`, fakeStore{get: byType(map[idcodec.Type][]byte{typeComment: ownComment, typePin: otherSecretPin})}, 404, "comment not found", []string{"Get", "Get"}},
		{"user token, comment gone", userTok, "PATCH", "/v1/comments/" + fuzzComment, `{"text":"x"}`, fakeStore{get: byType(nil)}, 404, "comment not found", []string{"Get"}},
		{"user token, another's section", userTok, "PATCH", "/v1/sections/" + sectionID, `{"name":"x"}`, fakeStore{get: boardOf(otherSection)}, 403, "this section belongs to another user", []string{"Get"}},
		{"user token, its section", userTok, "DELETE", "/v1/sections/" + sectionID, "", fakeStore{get: boardOf(ownSection)}, 500, "", []string{"Get", "Delete"}},
		{"user token, another's pin", userTok, "PATCH", "/v1/pins/" + vecPin, patchBody, fakeStore{get: boardOf(otherPin)}, 403, "this pin belongs to another user", []string{"Get"}},
		// Another user's secret board or pin is as absent as a missing one:
		// the same 404 and problem, never a 403 that would confirm it.
		{"user token, another's secret pin", userTok, "PATCH", "/v1/pins/" + vecPin, patchBody, fakeStore{get: boardOf(otherSecretPin)}, 404, "pin not found", []string{"Get"}},
		{"user token reads another's secret pin", userTok, "GET", "/v1/pins/" + vecPin, "", fakeStore{get: boardOf(otherSecretPin)}, 404, "pin not found", []string{"Get"}},
		{"user token reads its secret pin", userTok, "GET", "/v1/pins/" + vecPin, "", fakeStore{get: boardOf(ownSecretPin)}, 200, "", []string{"Get"}},
		{"service token reads a secret pin", readTok, "GET", "/v1/pins/" + vecPin, "", fakeStore{get: boardOf(otherSecretPin)}, 200, "", []string{"Get"}},
		{"user token, another's secret board", userTok, "PATCH", "/v1/boards/" + vecBoard, `{"secret":false}`, fakeStore{get: boardOf(otherSecretBoard)}, 404, "board not found", []string{"Get"}},
		{"user token makes another's board secret", userTok, "PATCH", "/v1/boards/" + vecBoard, `{"secret":true}`, fakeStore{get: boardOf(otherBoard)}, 403, "this board belongs to another user", []string{"Get"}},
		{"user token lists another's secret board", userTok, "GET", "/v1/boards/" + vecBoard + "/pins", "", fakeStore{get: boardOf(otherSecretBoard)}, 404, "board not found", []string{"Get"}},
		{"user token, likers of another's secret pin", userTok, "GET", "/v1/pins/" + vecPin + "/likers", "", fakeStore{get: boardOf(otherSecretPin)}, 404, "pin not found", []string{"Get"}},
		{"user token, saves of another's secret pin", userTok, "GET", "/v1/pins/" + vecPin + "/saves", "", fakeStore{get: boardOf(otherSecretPin)}, 404, "pin not found", []string{"Get"}},
		{"read token cannot save", readTok, "POST", "/v1/pins/" + vecPin + "/saves", `{"board_id":"` + vecBoard + `"}`, fakeStore{}, 403, "this route needs scope write", nil},
		{"user token saves", userTok, "POST", "/v1/pins/" + vecPin + "/saves", `{"board_id":"` + vecBoard + `"}`, fakeStore{get: boardOf(otherPin)}, 500, "", []string{"Get", "SavePin"}},
		{"user token saves another's secret pin", userTok, "POST", "/v1/pins/" + vecPin + "/saves", `{"board_id":"` + vecBoard + `"}`, fakeStore{get: boardOf(otherSecretPin)}, 404, "pin not found", []string{"Get"}},
		{"user token, pin gone", userTok, "DELETE", "/v1/pins/" + vecPin, "", fakeStore{get: boardOf(nil)}, 404, "pin not found", []string{"Get"}},
		{"user token, its pin", userTok, "DELETE", "/v1/pins/" + vecPin, "", fakeStore{get: boardOf(ownPin)}, 500, "", []string{"Get", "Delete"}},
		{"user token unlikes another's secret pin", userTok, "DELETE", "/v1/users/" + vecUser + "/likes/" + vecPin, "", fakeStore{get: boardOf(otherSecretPin)}, 404, "pin not found", []string{"Get"}},
		{"service token, pin by the owner cache", writeTok, "DELETE", "/v1/pins/" + vecPin, "", fakeStore{owners: ownerIs(vecUser)}, 500, "", []string{"Delete"}},
		{"user token without a user", auth.Principal{Name: "user:0", Kind: auth.KindUser, Scopes: auth.ScopeRead | auth.ScopeWrite}, "POST", "/v1/boards", `{"owner_id":"` + vecUser + `","name":"x"}`, fakeStore{}, 403, "this token may only act as its own user", nil},
		{"service token acts for anyone", writeTok, "PATCH", "/v1/users/" + otherUser, `{"display_name":"x"}`, fakeStore{}, 500, "", []string{"Update"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := c.store
			s, _, _ := newTestServer(t, &st, asPrincipal(c.p))
			w := do(s, c.method, c.path, c.body)
			if w.Code != c.status {
				t.Fatalf("status %d, want %d: %s", w.Code, c.status, w.Body)
			}
			if c.status >= 400 {
				p := problemOf(t, w)
				if !strings.Contains(p.Detail, c.detail) {
					t.Fatalf("detail %q, want %q", p.Detail, c.detail)
				}
				if c.status == 401 && !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
					t.Fatalf("401 without WWW-Authenticate: Bearer")
				}
			}
			if !slices.Equal(st.calls, c.calls) {
				t.Fatalf("store calls %v, want %v", st.calls, c.calls)
			}
		})
	}
}

// TestNoPermissionWithoutAuth: with Config.Auth nil no permission runs:
// a write reaches the handler's store call directly.
func TestNoPermissionWithoutAuth(t *testing.T) {
	st := &fakeStore{}
	s, _, _ := newTestServer(t, st)
	do(s, "PATCH", "/v1/pins/"+vecPin, `{"description":"x"}`)
	do(s, "DELETE", "/v1/boards/"+vecBoard, "")
	if want := []string{"Update", "Delete"}; !slices.Equal(st.calls, want) {
		t.Fatalf("store calls %v, want %v", st.calls, want)
	}
}
