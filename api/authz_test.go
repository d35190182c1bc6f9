package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// authzNopStore satisfies Store for building the router; no method is called.
type authzNopStore struct{ Store }

// TestEveryWriteRouteHasARule: a write route without a rule would need
// admin, closing it to every user and service token by accident. Every
// rule must also name a real route.
func TestEveryWriteRouteHasARule(t *testing.T) {
	s, err := New(Config{Store: authzNopStore{}, Auth: func(h http.Handler) http.Handler { return h }})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	err = chi.Walk(s.Routes(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		key := method + " " + route
		seen[key] = true
		if !strings.HasPrefix(route, "/v1/") || method == http.MethodGet || method == http.MethodHead || readRoutes[key] || strings.HasPrefix(route, adminPrefix) {
			return nil
		}
		if _, ok := writeRules[key]; !ok {
			t.Errorf("%s has no rule in writeRules", key)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key := range writeRules {
		if !seen[key] {
			t.Errorf("writeRules names %s, which is not a route", key)
		}
	}
}
