package main

// TypeScript clients generated from the spec, run against the real server:
// one from openapi.yaml (clients/ts/current.ts) and one from the previous
// release's spec (clients/ts/previous.ts). See clients/ts/README.md.

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	pinstore "github.com/pinstore/pinstore"
	"github.com/pinstore/pinstore/internal/testenv"
)

// TestTypeScriptClients generates each client's types with
// openapi-typescript (into the gitignored clients/ts/gen), type-checks the
// scripts with tsc, and runs each with tsx against one real server. The
// scripts talk to the server through a proxy that validates every
// exchange, as the harness does for Go requests: the current client's
// against openapi.yaml; the previous release's against the previous spec
// read as its generated client reads it (fields it does not know are
// ignored, so its closed objects are opened), which checks every field the
// old client was generated with is still there with its type.
//
// It needs node 20 or later and npm; it installs the packages of
// package-lock.json itself (npm ci at the repository root) when
// node_modules does not hold them. Without node it fails when CI=true
// and skips otherwise.
func TestTypeScriptClients(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bin := tsToolchain(t, root)
	ts := filepath.Join(root, "clients", "ts")
	specs := []struct {
		name, spec, script string
		doc                *openapi3.T
	}{
		{"current", "openapi.yaml", "current.ts", loadSpec(t, "openapi.yaml", pinstore.OpenAPI)},
		{"previous", filepath.Join("clients", "ts", "previous", "openapi.yaml"), "previous.ts", nil},
	}
	prev, err := os.ReadFile(filepath.Join(root, specs[1].spec))
	if err != nil {
		t.Fatal(err)
	}
	specs[1].doc = tolerantReader(loadSpec(t, specs[1].spec, prev))

	if err := os.MkdirAll(filepath.Join(ts, "gen"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range specs {
		runTool(t, root, 2*time.Minute, nil, bin("openapi-typescript"), c.spec, "--redocly", filepath.Join("clients", "ts", "redocly.yaml"), "--output", filepath.Join("clients", "ts", "gen", c.name+".ts"))
	}
	runTool(t, root, 3*time.Minute, nil, bin("tsc"), "--noEmit", "-p", filepath.Join("clients", "ts"))

	s := startServer(t)
	for _, c := range specs {
		t.Run(c.name, func(t *testing.T) {
			proxy := newSpecProxy(t, s.base, newSpecTransportFor(t, s.base, c.spec, c.doc))
			env := []string{"PINSTORE_URL=" + proxy.URL, "PINSTORE_TOKEN=" + e2eAdminToken}
			out := runTool(t, root, 3*time.Minute, env, bin("tsx"), filepath.Join("clients", "ts", c.script))
			if !strings.Contains(out, " passed, 0 failed") {
				t.Errorf("%s: no closing line with 0 failed", c.script)
			}
		})
	}
}

// tsToolchain makes sure node and the packages package-lock.json pins are
// installed (testenv.NodeModules runs npm ci when they are not), and
// returns the path of a package binary by name. Without node or npm the
// test fails when CI=true and skips otherwise.
func tsToolchain(t *testing.T, root string) func(string) string {
	t.Helper()
	binDir := testenv.NodeModules(t, root)
	return func(name string) string { return filepath.Join(binDir, name) }
}

// runTool runs a command in dir with extra environment, logs its output,
// and fails the test if it fails or outlives timeout.
func runTool(t *testing.T, dir string, timeout time.Duration, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	start := time.Now()
	err := cmd.Run()
	what := filepath.Base(name) + " " + strings.Join(args, " ")
	t.Logf("%s (%.1fs):\n%s", what, time.Since(start).Seconds(), out.String())
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return out.String()
}

// newSpecProxy serves target through st: every request is forwarded as
// is, and every exchange is checked against st's spec.
func newSpecProxy(t *testing.T, target string, st *specTransport) *httptest.Server {
	t.Helper()
	st.token = "" // the client sends its own
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out, err := http.NewRequestWithContext(r.Context(), r.Method, target+r.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out.Header = r.Header.Clone()
		resp, err := st.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(proxy.Close)
	return proxy
}

// tolerantReader opens every closed object of doc's responses: a client
// generated from doc ignores the fields it does not know, so what it
// relies on is each field it names, required where doc requires it, with
// its type. Requests stay as doc says, and so does any schema a request
// shares with a response.
func tolerantReader(doc *openapi3.T) *openapi3.T {
	seen := map[*openapi3.Schema]bool{}
	var walk func(ref *openapi3.SchemaRef, open bool)
	walk = func(ref *openapi3.SchemaRef, open bool) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		if has := s.AdditionalProperties.Has; open && has != nil && !*has {
			s.AdditionalProperties.Has = nil
		}
		for _, p := range s.Properties {
			walk(p, open)
		}
		walk(s.Items, open)
		walk(s.AdditionalProperties.Schema, open)
		for _, group := range []openapi3.SchemaRefs{s.AllOf, s.OneOf, s.AnyOf} {
			for _, r := range group {
				walk(r, open)
			}
		}
	}
	for _, responses := range []bool{false, true} {
		for _, path := range doc.Paths.Keys() {
			for _, op := range doc.Paths.Value(path).Operations() {
				switch {
				case !responses && op.RequestBody != nil:
					for _, mt := range op.RequestBody.Value.Content {
						walk(mt.Schema, false)
					}
				case responses:
					for _, resp := range op.Responses.Map() {
						for _, mt := range resp.Value.Content {
							walk(mt.Schema, true)
						}
					}
				}
			}
		}
	}
	return doc
}
