package main

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	pinstore "github.com/pinstore/pinstore"
)

func TestServeOperational(t *testing.T) {
	s := startServer(t)

	var health struct{ Status string }
	s.must(http.StatusOK, http.MethodGet, "/healthz", nil).decode(t, &health)
	if health.Status != "ok" {
		t.Fatalf("healthz status %q", health.Status)
	}
	var ready struct {
		Status string
		Checks []struct {
			Name string
			OK   bool
		}
	}
	s.must(http.StatusOK, http.MethodGet, "/readyz", nil).decode(t, &ready)
	names := []string{}
	for _, c := range ready.Checks {
		names = append(names, c.Name)
		if !c.OK {
			t.Errorf("readyz check %s not ok", c.Name)
		}
	}
	if ready.Status != "ok" || !slices.Contains(names, "redis") || !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "mysql:") }) {
		t.Fatalf("readyz: %+v", ready)
	}

	// The spec, as embedded, and its HTML rendering.
	if r := s.must(http.StatusOK, http.MethodGet, "/openapi.yaml", nil); string(r.Body) != string(pinstore.OpenAPI) {
		t.Fatalf("/openapi.yaml differs from the embedded spec")
	}
	// The docs page and its renderer (rendered in a browser by
	// TestDocsInBrowser).
	if docs := string(s.must(http.StatusOK, http.MethodGet, "/docs", nil).Body); !strings.Contains(docs, `<script src="docs/redoc.standalone.js">`) {
		t.Fatalf("/docs does not load the renderer:\n%s", docs)
	}
	s.must(http.StatusOK, http.MethodGet, "/docs/redoc.standalone.js", nil)

	// IDs decode to the published vectors.
	for _, v := range []struct {
		id         string
		shard, typ int
		name       string
		local      uint64
	}{
		{"241294492511762325", 3429, 1, "pin", 7075733},
		{"241294561224164665", 3429, 2, "board", 1337},
		{"241294629943640797", 3429, 3, "user", 733},
	} {
		var info struct {
			ID       string `json:"id"`
			Shard    int    `json:"shard"`
			Type     int    `json:"type"`
			TypeName string `json:"type_name"`
			LocalID  uint64 `json:"local_id"`
		}
		s.must(http.StatusOK, http.MethodGet, "/v1/ids/"+v.id, nil).decode(t, &info)
		if info.ID != v.id || info.Shard != v.shard || info.Type != v.typ || info.TypeName != v.name || info.LocalID != v.local {
			t.Errorf("/v1/ids/%s = %+v", v.id, info)
		}
	}
	for _, bad := range []string{idNotDecimal, idOverflow, idReserved, idBadType, "-1", "01"} {
		s.fail(http.StatusBadRequest, "invalid_argument", http.MethodGet, "/v1/ids/"+bad, nil)
	}

	// Request ids: a sane one is echoed, anything else replaced.
	for _, c := range []struct{ sent, want string }{
		{"abc-123_X.y", "abc-123_X.y"},
		{strings.Repeat("a", 64), strings.Repeat("a", 64)},
		{strings.Repeat("a", 65), ""},
		{"bad id!", ""},
		{"", ""},
	} {
		r := s.must(http.StatusOK, http.MethodGet, "/healthz", nil, "X-Request-Id", c.sent)
		got := r.Header.Get("X-Request-Id")
		if c.want != "" && got != c.want || c.want == "" && (got == c.sent || len(got) != 32) {
			t.Errorf("X-Request-Id %q came back as %q", c.sent, got)
		}
	}
	p := s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/users/241294561224164665", nil, "X-Request-Id", "trace-me")
	if p.RequestID != "trace-me" {
		t.Errorf("problem request_id %q, want trace-me", p.RequestID)
	}

	// Unknown routes and methods are problems too.
	s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/nothing-here", nil)
	s.fail(http.StatusNotFound, "not_found", http.MethodPost, "/v2/users", `{}`)
	r := s.req(http.MethodPut, "/v1/pins/241294492511762325", nil)
	if r.Status != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET, PATCH, DELETE" {
		t.Fatalf("PUT a pin: %d, Allow %q", r.Status, r.Header.Get("Allow"))
	}
	r = s.req(http.MethodGet, "/v1/pins/owners", nil)
	if r.Status != http.StatusMethodNotAllowed && r.Status != http.StatusBadRequest {
		t.Fatalf("GET /v1/pins/owners: %d", r.Status)
	}

	// Metrics: per route pattern, never a raw path.
	metrics := string(s.must(http.StatusOK, http.MethodGet, "/metrics", nil).Body)
	for _, want := range []string{
		`pinstore_http_requests_total{method="GET",route="/v1/ids/{id}",status_class="2xx"} 3`,
		`pinstore_http_requests_total{method="GET",route="/v1/ids/{id}",status_class="4xx"} 6`,
		`pinstore_http_request_duration_seconds_bucket{method="GET",route="/healthz",status_class="2xx",le="+Inf"}`,
		`route="unmatched"`,
		"go_goroutines",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(metrics, "241294492511762325") {
		t.Errorf("/metrics holds a raw ID")
	}

	// Access logs: one JSON line per request, with the route pattern
	// (written in batches, at least every 100ms).
	found := false
	for deadline := time.Now().Add(5 * time.Second); !found && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		found = accessLogged(s.logs.Lines())
	}
	if !found {
		t.Errorf("no access log line for GET /v1/users/{id} 404 with request id trace-me")
	}
}

func accessLogged(lines []string) bool {
	for _, line := range lines {
		var rec struct {
			Msg       string   `json:"msg"`
			Method    string   `json:"method"`
			Route     string   `json:"route"`
			RequestID string   `json:"request_id"`
			Status    int      `json:"status"`
			Duration  *float64 `json:"duration_ms"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "http request" {
			continue
		}
		if rec.Route == "/v1/users/{id}" && rec.Status == 404 && rec.RequestID == "trace-me" && rec.Duration != nil && rec.Method == "GET" {
			return true
		}
	}
	return false
}

// TestServeGracefulShutdown: a request in flight when the server is told
// to stop still completes; then serve returns nil and the port is closed.
func TestServeGracefulShutdown(t *testing.T) {
	s := startServer(t)
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, s.base+"/v1/users", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e2eAdminToken)
	type result struct {
		status int
		err    error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			res <- result{err: err}
			return
		}
		resp.Body.Close()
		res <- result{status: resp.StatusCode}
	}()
	if _, err := pw.Write([]byte(`{"username":`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the handler is now reading the body
	stopped := make(chan error, 1)
	go func() { stopped <- s.stop() }()
	time.Sleep(300 * time.Millisecond) // shutdown has begun and is waiting
	select {
	case err := <-stopped:
		t.Fatalf("serve returned (%v) while a request was in flight", err)
	default:
	}
	if _, err := pw.Write([]byte(`"late"}`)); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	r := <-res
	if r.err != nil || r.status != http.StatusCreated {
		t.Fatalf("in-flight request: status %d, err %v; want 201", r.status, r.err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if resp, err := http.Get(s.base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("the server still answers after shutdown")
	}
}
