package api

import (
	"context"
	"strings"
	"testing"

	"github.com/pinstore/pinstore/cluster/fleet"
)

func TestReadyz(t *testing.T) {
	health := []fleet.Health{{Name: "mysql:a", OK: true}, {Name: "redis", OK: true}}
	st := &fakeStore{ready: func(context.Context) []fleet.Health { return health }}
	s, _, _ := newTestServer(t, st)
	w := do(s, "GET", "/readyz", "")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"status":"ok"`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	health[1] = fleet.Health{Name: "redis", Error: "redis at 127.0.0.1:6379 is not answering"}
	w = do(s, "GET", "/readyz", "")
	if w.Code != 503 || !strings.Contains(w.Body.String(), `"status":"unavailable"`) || !strings.Contains(w.Body.String(), "not answering") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	// Redis turned off by configuration: listed as disabled, never as ok,
	// and the server is ready without it.
	health[1] = fleet.Health{Name: "redis", Disabled: true}
	w = do(s, "GET", "/readyz", "")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"status":"ok"`) || !strings.Contains(w.Body.String(), `{"name":"redis","ok":false,"disabled":true}`) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if w := do(s, "GET", "/healthz", ""); w.Code != 200 {
		t.Fatalf("healthz %d while not ready", w.Code)
	}
}
