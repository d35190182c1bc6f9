package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	pinstore "github.com/pinstore/pinstore"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
)

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newTestServer(t *testing.T, st Store, mod ...func(*Config)) (*Server, *prometheus.Registry, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	cfg := Config{Store: st, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), Registry: reg}
	for _, m := range mod {
		m(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, reg, &logs
}

func do(h http.Handler, method, path, body string, headers ...string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func problemOf(t *testing.T, w *httptest.ResponseRecorder) Problem {
	t.Helper()
	var p Problem
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, body %s", ct, w.Body)
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRoutesMatchSpec: every route of the router is an operation of
// openapi.yaml, and every operation is routed.
// requestsTotal reads pinstore_http_requests_total for one label set.
func requestsTotal(t *testing.T, reg *prometheus.Registry, method, route, class string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "pinstore_http_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["method"] == method && got["route"] == route && got["status_class"] == class {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestRoutesMatchSpec(t *testing.T) {
	s, _, _ := newTestServer(t, &fakeStore{})
	var routed []string
	err := chi.Walk(s.Routes(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		routed = append(routed, method+" "+route)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(pinstore.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	var specified []string
	for _, path := range doc.Paths.Keys() {
		for method := range doc.Paths.Value(path).Operations() {
			specified = append(specified, method+" "+path)
		}
	}
	sort.Strings(routed)
	sort.Strings(specified)
	for _, r := range routed {
		if !slices.Contains(specified, r) {
			t.Errorf("routed but not in openapi.yaml: %s", r)
		}
	}
	for _, sp := range specified {
		if !slices.Contains(routed, sp) {
			t.Errorf("in openapi.yaml but not routed: %s", sp)
		}
	}
	if len(routed) < 40 {
		t.Errorf("only %d routes walked: %v", len(routed), routed)
	}
}

func TestDocsPage(t *testing.T) {
	s, _, _ := newTestServer(t, &fakeStore{})
	w := do(s, "GET", "/docs", "")
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET /docs: %d %s", w.Code, w.Header().Get("Content-Type"))
	}
	page := w.Body.String()
	// The page loads the renderer and the spec from this server, by
	// relative URLs, and nothing from elsewhere.
	for _, want := range []string{`<redoc spec-url="openapi.yaml"`, `<script src="docs/redoc.standalone.js"></script>`} {
		if !strings.Contains(page, want) {
			t.Errorf("/docs lacks %q", want)
		}
	}
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		t.Errorf("/docs refers to another site:\n%s", page)
	}
	if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("/docs CSP %q", csp)
	}

	js := do(s, "GET", "/docs/redoc.standalone.js", "")
	if js.Code != 200 || !strings.HasPrefix(js.Header().Get("Content-Type"), "text/javascript") || js.Body.Len() < 500<<10 {
		t.Fatalf("GET /docs/redoc.standalone.js: %d %s, %d bytes", js.Code, js.Header().Get("Content-Type"), js.Body.Len())
	}
	etag := js.Header().Get("ETag")
	r := httptest.NewRequest("GET", "/docs/redoc.standalone.js", nil)
	r.Header.Set("If-None-Match", etag)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, r)
	if etag == "" || rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Fatalf("If-None-Match %s: %d, %d bytes", etag, rec.Code, rec.Body.Len())
	}
}

// TestRedocVendored: the embedded bundle is the one of the redoc version
// package.json pins, byte for byte the one npm installs (testenv.NodeModules
// runs npm ci when node_modules does not hold the pinned packages).
func TestRedocVendored(t *testing.T) {
	pkg, err := os.ReadFile("../package.json")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(pkg, &p); err != nil {
		t.Fatal(err)
	}
	if got := p.DevDependencies["redoc"]; got != redocVersion {
		t.Fatalf("package.json pins redoc %q; the embedded bundle is %s", got, redocVersion)
	}
	for _, f := range []string{"docs/LICENSE", "docs/redoc.standalone.js.LICENSE.txt"} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("the vendored bundle's licence: %v", err)
		}
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	testenv.NodeModules(t, root)
	npm, err := os.ReadFile(filepath.Join(root, "node_modules", "redoc", "bundles", "redoc.standalone.js"))
	if err != nil {
		t.Fatalf("npm ci installed no redoc bundle: %v", err)
	}
	if !bytes.Equal(npm, redocJS) {
		t.Fatalf("api/docs/redoc.standalone.js differs from node_modules/redoc's: run npm run docs:vendor")
	}
}

func TestNewRefusesABadSpec(t *testing.T) {
	if _, err := New(Config{Store: &fakeStore{}, Spec: []byte("openapi: 3.0.3\ninfo: {}\n")}); err == nil {
		t.Fatal("New accepted an invalid spec")
	}
	if _, err := New(Config{}); err == nil {
		t.Fatal("New accepted a config without a store")
	}
}

func TestPanicBecomesA500Problem(t *testing.T) {
	st := &fakeStore{get: func(context.Context, uint64, idcodec.Type) (model.Object, error) { panic("boom: password=hunter2") }}
	s, reg, logs := newTestServer(t, st)
	w := do(s, "GET", "/v1/pins/"+vecPin, "", "X-Request-Id", "req-1")
	if w.Code != 500 {
		t.Fatalf("status %d", w.Code)
	}
	p := problemOf(t, w)
	if p.Code != model.EInternal || p.RequestID != "req-1" || strings.Contains(w.Body.String(), "hunter2") || strings.Contains(w.Body.String(), "goroutine") {
		t.Fatalf("problem %+v", p)
	}
	if !strings.Contains(logs.String(), "boom") || !strings.Contains(logs.String(), "req-1") {
		t.Fatalf("panic not logged: %s", logs)
	}
	if n := requestsTotal(t, reg, "GET", "/v1/pins/{id}", "5xx"); n != 1 {
		t.Fatalf("5xx counter %v", n)
	}
}

func TestInternalErrorsAreLoggedNotShown(t *testing.T) {
	cause := errors.New("Error 1045: Access denied for user 'root'@'10.0.0.1'")
	st := &fakeStore{get: func(context.Context, uint64, idcodec.Type) (model.Object, error) {
		return model.Object{}, model.Wrap("store.Get", model.EUnavailable, "a database host is unavailable", cause)
	}}
	s, _, logs := newTestServer(t, st)
	w := do(s, "GET", "/v1/users/"+vecUser, "")
	p := problemOf(t, w)
	if w.Code != 503 || w.Header().Get("Retry-After") != "1" || p.Detail != "a database host is unavailable" {
		t.Fatalf("%d %+v", w.Code, p)
	}
	if strings.Contains(w.Body.String(), "Access denied") {
		t.Fatalf("cause leaked: %s", w.Body)
	}
	if !strings.Contains(logs.String(), "Access denied") {
		t.Fatalf("cause not logged: %s", logs)
	}
}

func TestMetricsUseRoutePatterns(t *testing.T) {
	st := &fakeStore{get: func(context.Context, uint64, idcodec.Type) (model.Object, error) {
		return model.Object{}, model.Errorf(model.ENotFound, "not found")
	}}
	s, reg, _ := newTestServer(t, st)
	do(s, "GET", "/v1/pins/"+vecPin, "")
	do(s, "GET", "/v1/pins/"+vecPin, "")
	do(s, "GET", "/nowhere/"+vecPin, "")
	do(s, "BREW", "/v1/pins/"+vecPin, "")
	if n := requestsTotal(t, reg, "GET", "/v1/pins/{id}", "4xx"); n != 2 {
		t.Fatalf("GET /v1/pins/{id} 4xx = %v", n)
	}
	if n := requestsTotal(t, reg, "GET", "unmatched", "4xx"); n != 1 {
		t.Fatalf("unmatched = %v", n)
	}
	if n := requestsTotal(t, reg, "OTHER", "unmatched", "4xx"); n != 1 {
		t.Fatalf("OTHER = %v", n)
	}
	out := do(s, "GET", "/metrics", "").Body.String()
	if strings.Contains(out, vecPin) || !strings.Contains(out, "pinstore_http_request_duration_seconds_bucket") {
		t.Fatalf("/metrics:\n%s", out)
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}

func TestAuthSlotWrapsV1Only(t *testing.T) {
	refuse := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeError(w, r, discardLogger(), model.Errorf(model.EUnauthorized, "no entry"))
		})
	}
	s, _, _ := newTestServer(t, &fakeStore{}, func(c *Config) { c.Auth = refuse })
	_ = chi.Walk(s.Routes(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if !strings.HasPrefix(route, "/v1/") {
			return nil
		}
		path := strings.NewReplacer("{id}", vecPin, "{target_id}", vecUser, "{pin_id}", vecPin).Replace(route)
		if w := do(s, method, path, ""); w.Code != http.StatusUnauthorized {
			t.Errorf("%s %s is not behind Auth: %d", method, route, w.Code)
		}
		return nil
	})
	for _, path := range []string{"/healthz", "/readyz", "/openapi.yaml", "/docs"} {
		if w := do(s, "GET", path, ""); w.Code != 200 {
			t.Errorf("%s behind auth: %d", path, w.Code)
		}
	}
}

// TestRefusedInputCallsNoStore: a request refused for its input never
// reaches the store.
func TestRefusedInputCallsNoStore(t *testing.T) {
	cases := []struct {
		name, method, path, body string
		headers                  []string
		status                   int
	}{
		{"owners: malformed entry", "POST", "/v1/pins/owners", `{"ids":["` + vecPin + `","nope"]}`, nil, 400},
		{"owners: a board", "POST", "/v1/pins/owners", `{"ids":["` + vecBoard + `"]}`, nil, 400},
		{"owners: too many", "POST", "/v1/pins/owners", `{"ids":[` + strings.TrimSuffix(strings.Repeat(`"`+vecPin+`",`, 1001), ",") + `]}`, nil, 400},
		{"patch: read-only", "PATCH", "/v1/pins/" + vecPin, `{"owner_id":"` + vecUser + `"}`, nil, 400},
		{"patch: bad JSON", "PATCH", "/v1/pins/" + vecPin, `{"description":`, nil, 400},
		{"patch: bad If-Match", "PATCH", "/v1/pins/" + vecPin, `{"description":"x"}`, []string{"If-Match", "3"}, 400},
		{"patch: weak If-Match", "PATCH", "/v1/pins/" + vecPin, `{"description":"x"}`, []string{"If-Match", `W/"3"`}, 412},
		{"patch: media type", "PATCH", "/v1/pins/" + vecPin, `{"description":"x"}`, []string{"Content-Type", "text/plain"}, 415},
		{"create: too large", "POST", "/v1/pins", `{"board_id":"` + vecBoard + `","description":"` + strings.Repeat("x", 65<<10) + `"}`, nil, 413},
		{"create: data too large", "POST", "/v1/pins", `{"board_id":"` + vecBoard + `","data":{"x":"` + strings.Repeat("x", 9<<10) + `"}}`, nil, 413},
		{"create: wrong board type", "POST", "/v1/pins", `{"board_id":"` + vecUser + `"}`, nil, 400},
		{"list: bad limit", "GET", "/v1/boards/" + vecBoard + "/pins?limit=0", "", nil, 400},
		{"list: wrong type", "GET", "/v1/boards/" + vecPin + "/pins", "", nil, 404},
		{"move: two anchors", "PUT", "/v1/boards/" + vecBoard + "/pins/" + vecPin + "/position", `{"before":"68719476737","after":"68719476738"}`, nil, 400},
		{"follow: self", "PUT", "/v1/users/" + vecUser + "/following/" + vecUser, "", nil, 400},
		{"multi-get: malformed", "GET", "/v1/pins?ids=1,x", "", nil, 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &fakeStore{}
			s, _, _ := newTestServer(t, st)
			w := do(s, c.method, c.path, c.body, c.headers...)
			if w.Code != c.status {
				t.Fatalf("status %d, want %d: %s", w.Code, c.status, w.Body)
			}
			problemOf(t, w)
			if len(st.calls) > 0 {
				t.Fatalf("the store was called: %v", st.calls)
			}
		})
	}
}
