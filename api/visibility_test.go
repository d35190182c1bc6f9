package api

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestNewRefusesARouteWithoutVisibility: a route cannot be served without
// saying how it decides what its caller may see, nor with a declaration
// its path contradicts.
func TestNewRefusesARouteWithoutVisibility(t *testing.T) {
	s, err := New(Config{Store: authzNopStore{}})
	if err != nil {
		t.Fatal(err)
	}
	nop := func(http.ResponseWriter, *http.Request) error { return nil }
	for _, c := range []struct {
		rt   route
		want string
	}{
		{route{method: "PUT", pattern: "/v1/things", who: readAny, h: nop}, "PUT /v1/things declares no visibility"},
		{route{method: "GET", pattern: "/v1/pins/{id}/things", who: readAny, see: noSecrets, h: nop}, "names id in its path but does not declare pathObjects"},
		{route{method: "GET", pattern: "/v1/users/{id}/things", who: readAny, see: pathObjects, h: nop}, "declares pathObjects but its path names no board, pin or comment"},
		{route{method: "GET", pattern: "/v1/things", who: readAny, see: noSecrets | filters, h: nop}, "declares noSecrets beside"},
	} {
		if _, err := s.newRouter(nil, []route{c.rt}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("newRouter(%s %s): %v, want %q", c.rt.method, c.rt.pattern, err, c.want)
		}
	}
}

// TestSecretParams: the path parameters the pathObjects check reads, and
// their types, come from the collection before each.
func TestSecretParams(t *testing.T) {
	for pattern, want := range map[string][]secretParam{
		"/v1/pins/{id}":                          {{"id", typePin}},
		"/v1/comments/{id}":                      {{"id", typeComment}},
		"/v1/boards/{id}/pins/{pin_id}/position": {{"id", typeBoard}, {"pin_id", typePin}},
		"/v1/users/{id}/likes/{pin_id}":          {{"pin_id", typePin}},
		"/v1/users/{id}/following/{target_id}":   nil,
		"/v1/ids/{id}":                           nil,
	} {
		if got := secretParams(pattern); !slices.Equal(got, want) {
			t.Errorf("secretParams(%s) = %v, want %v", pattern, got, want)
		}
	}
}

// TestRouteRulesCoverTheTable: RouteRules, which the end-to-end matrix
// test walks, lists every route of the table with its declarations.
func TestRouteRulesCoverTheTable(t *testing.T) {
	rules := RouteRules()
	table := (&Server{}).routeTable()
	if len(rules) != len(table) {
		t.Fatalf("%d rules for %d routes", len(rules), len(table))
	}
	for i, rt := range table {
		r := rules[i]
		if r.Method != rt.method || r.Pattern != rt.pattern || r.Permission != rt.who.name || strings.Join(r.Visibility, "|") != rt.see.String() || len(r.Visibility) == 0 {
			t.Errorf("rule %+v for route %s %s (%s, %s)", r, rt.method, rt.pattern, rt.who.name, rt.see)
		}
	}
}
