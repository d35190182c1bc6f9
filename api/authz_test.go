package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/pinstore/pinstore/auth"
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
