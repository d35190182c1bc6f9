package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// otlpSink is an OTLP/HTTP trace receiver: it decodes each export as the
// protocol's own protobuf message and keeps its spans.
type otlpSink struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	bad   []string
}

func (o *otlpSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &req)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
		o.bad = append(o.bad, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type")+" "+errString(err))
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func attr(s *tracepb.Span, key string) *commonpb.AnyValue {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

// TestTracingEndToEnd runs the server with tracing on at 100% sampling
// against an OTLP/HTTP receiver, sends a create-pin and a get-pin that
// carry a traceparent and a bearer token, and checks the spans exported:
// each request's span continues the client's trace under its parent,
// names its route and status, and has shard round trips (with shard,
// host and role) and Redis commands as children; no span carries the
// token or the body's content; and the access line names the trace.
func TestTracingEndToEnd(t *testing.T) {
	s, sink := startTracedServer(t)
	user := s.create("/v1/users", map[string]any{"username": "tracer"})
	board := s.create("/v1/boards", map[string]any{"owner_id": user.ID, "name": "traced"})

	const (
		marker      = "body-marker-5f1e9c"
		createTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		createPar   = "00f067aa0ba902b7"
		getTrace    = "0af7651916cd43dd8448eb211c80319c"
		getPar      = "b7ad6b7169203331"
	)
	auth := "Bearer " + e2eAdminToken
	r := s.must(http.StatusCreated, http.MethodPost, "/v1/pins",
		map[string]any{"board_id": board.ID, "link": "https://example.com/" + marker, "description": marker},
		"Authorization", auth, "traceparent", "00-"+createTrace+"-"+createPar+"-01")
	var pin object
	r.decode(t, &pin)
	s.must(http.StatusOK, http.MethodGet, "/v1/pins/"+pin.ID, nil,
		"Authorization", auth, "traceparent", "00-"+getTrace+"-"+getPar+"-01")

	// Read again until the near copy (objcache) answers, as its counter
	// says (it serves once its subscription is live): its hit is an event
	// on the request's span.
	for i := 0; !nearHits(s); i++ {
		if i == 200 {
			t.Fatal("the near copy answered none of 200 gets")
		}
		s.must(http.StatusOK, http.MethodGet, "/v1/pins/"+pin.ID, nil, "Authorization", auth)
	}

	spans := sink.after(t, s, e2eAdminToken, marker)

	for _, c := range []struct {
		method, route, trace, parent string
		status                       int64
		wantRole                     string // a shard round trip of this role, "" for any
		wantRedis                    bool
	}{
		{"POST", "/v1/pins", createTrace, createPar, 201, "master", true},
		{"GET", "/v1/pins/{id}", getTrace, getPar, 200, "", true},
	} {
		var req *tracepb.Span
		for _, sp := range spans {
			if sp.Kind == tracepb.Span_SPAN_KIND_SERVER && hexID(sp.TraceId) == c.trace {
				req = sp
			}
		}
		if req == nil {
			t.Errorf("%s %s: no server span in trace %s among %d spans", c.method, c.route, c.trace, len(spans))
			continue
		}
		if got := hexID(req.ParentSpanId); got != c.parent {
			t.Errorf("%s: parent %s, want the client's %s", c.route, got, c.parent)
		}
		if req.Name != c.method+" "+c.route {
			t.Errorf("%s: span named %q", c.route, req.Name)
		}
		if v := attr(req, "http.route"); v.GetStringValue() != c.route {
			t.Errorf("%s: http.route %v", c.route, v)
		}
		if v := attr(req, "http.response.status_code"); v.GetIntValue() != c.status {
			t.Errorf("%s: status %v, want %d", c.route, v, c.status)
		}
		if v := attr(req, "pinstore.principal.kind"); v.GetStringValue() != "service" {
			t.Errorf("%s: principal kind %v, want service", c.route, v)
		}
		var shardKids, redisKids int
		for _, sp := range spans {
			if !bytes.Equal(sp.ParentSpanId, req.SpanId) || !bytes.Equal(sp.TraceId, req.TraceId) {
				continue
			}
			if sp.Name == "shard.roundtrip" {
				role := attr(sp, "pinstore.shard.role").GetStringValue()
				if attr(sp, "pinstore.shard") == nil || attr(sp, "pinstore.host").GetStringValue() == "" || role == "" {
					t.Errorf("%s: shard round trip without shard, host or role: %v", c.route, sp.Attributes)
				}
				if c.wantRole == "" || role == c.wantRole {
					shardKids++
				}
			}
			if attr(sp, "db.system.name").GetStringValue() == "redis" || attr(sp, "db.system").GetStringValue() == "redis" {
				redisKids++
			}
		}
		if shardKids == 0 {
			t.Errorf("%s: no shard round trip (role %q) under the request's span", c.route, c.wantRole)
		}
		if c.wantRedis && redisKids == 0 {
			t.Errorf("%s: no Redis command under the request's span", c.route)
		}
	}

	var nearHit bool
	for _, sp := range spans {
		for _, ev := range sp.Events {
			if ev.Name == "near copy hit" && sp.Kind == tracepb.Span_SPAN_KIND_SERVER {
				nearHit = true
			}
		}
	}
	if !nearHit {
		t.Errorf("no request span notes a near copy hit")
	}

	var logged bool
	for _, line := range s.logs.Lines() {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["msg"] != "http request" {
			continue
		}
		if m["route"] == "/v1/pins/{id}" && m["trace_id"] == getTrace {
			logged = true
		}
		if strings.Contains(line, e2eAdminToken) {
			t.Errorf("access line carries the token: %s", line)
		}
	}
	if !logged {
		t.Errorf("no access line of GET /v1/pins/{id} names trace %s", getTrace)
	}
}

// startTracedServer starts the server with tracing on, every trace
// sampled, exporting to an OTLP/HTTP receiver of the test's.
func startTracedServer(t *testing.T) (*server, *otlpSink) {
	t.Helper()
	sink := &otlpSink{}
	collector := httptest.NewServer(sink)
	t.Cleanup(collector.Close)
	s := startServerEnv(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL,
		"OTEL_TRACES_SAMPLER":         "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":     "1",
		"OTEL_SERVICE_NAME":           "pinstore-e2e",
	})
	return s, sink
}

// after stops s, which flushes the spans it queued, and returns the
// spans received (received).
func (o *otlpSink) after(t *testing.T, s *server, secrets ...string) []*tracepb.Span {
	t.Helper()
	if err := s.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	return o.received(t, secrets...)
}

// received returns the spans received; it fails t when an export was
// refused or a span carries one of secrets, or a DSN or password.
func (o *otlpSink) received(t *testing.T, secrets ...string) []*tracepb.Span {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.bad) > 0 {
		t.Fatalf("the receiver refused exports: %v", o.bad)
	}
	for _, sp := range o.spans {
		j, _ := protojson.Marshal(sp)
		t.Logf("span %s %x<-%x %s", sp.Name, sp.SpanId, sp.ParentSpanId, attrString(sp))
		for _, secret := range append(secrets, "@tcp(", "password") {
			if bytes.Contains(j, []byte(secret)) {
				t.Errorf("span %q carries %q: %s", sp.Name, secret, j)
			}
		}
	}
	return slices.Clone(o.spans)
}

func hexID(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

func attrString(s *tracepb.Span) string {
	var b strings.Builder
	for _, kv := range s.Attributes {
		b.WriteString(kv.Key + "=" + strings.TrimSpace(kv.Value.String()) + " ")
	}
	return b.String()
}

// nearHits reports whether the server's near copy has answered a read.
func nearHits(s *server) bool {
	body := s.must(http.StatusOK, http.MethodGet, "/metrics", nil).Body
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "pinstore_object_cache_near_hits_total "); ok {
			return v != "0"
		}
	}
	return false
}

// TestMoveTraced runs `pinstore move-shards --finish` with tracing on
// against an OTLP/HTTP receiver: the command's span has a child span for
// each phase of the move, inside it, in the same trace.
func TestMoveTraced(t *testing.T) {
	sink := &otlpSink{}
	collector := httptest.NewServer(sink)
	defer collector.Close()
	env, _, _ := twoHostMapFile(t, "cmd-move-traced")
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.URL
	env["OTEL_TRACES_SAMPLER"] = "always_on"
	if out, err := runCmd(t, env, "move-shards", "--range", "0-1", "--to", "h1", "--settle", "100ms", "--finish"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	phases := commandSteps(t, sink.spans, "pinstore move-shards", "move-shards ")
	for _, want := range []string{"copy and catch-up", "hold and switch", "keep", "finish"} {
		if !phases[want] {
			t.Errorf("no child span for the phase %q; the command's children: %v", want, phases)
		}
	}
}

// commandSteps finds the span of a command (named root) among spans, and
// returns the names of its child spans named with prefix (the prefix cut),
// failing t when one is not inside the command's span, in its trace.
func commandSteps(t *testing.T, spans []*tracepb.Span, root, prefix string) map[string]bool {
	t.Helper()
	var r *tracepb.Span
	for _, sp := range spans {
		if sp.Name == root {
			r = sp
		}
	}
	if r == nil {
		t.Fatalf("no span %q among %d spans", root, len(spans))
	}
	steps := map[string]bool{}
	for _, sp := range spans {
		if bytes.Equal(sp.ParentSpanId, r.SpanId) && strings.HasPrefix(sp.Name, prefix) {
			if !bytes.Equal(sp.TraceId, r.TraceId) || sp.StartTimeUnixNano < r.StartTimeUnixNano || sp.EndTimeUnixNano > r.EndTimeUnixNano {
				t.Errorf("step %s is not inside the span of %s", sp.Name, root)
			}
			steps[strings.TrimPrefix(sp.Name, prefix)] = true
		}
	}
	return steps
}

// TestBackupTraced runs `pinstore backup`, `backup verify` and `restore`
// of a host (its own mariadbd, with writes in its shards) with tracing on
// against an OTLP/HTTP receiver, as an administrator with a password:
// each command's span has a child span for each of its steps, inside it,
// and no span carries the password or a DSN.
func TestBackupTraced(t *testing.T) {
	const password = "pw-secret-91a7"
	f := startReplFleet(t, nil, 0)
	f.hosts[0].master.Exec(t,
		"CREATE USER 'bkadmin'@'%' IDENTIFIED BY '"+password+"'", "GRANT ALL PRIVILEGES ON *.* TO 'bkadmin'@'%'",
		"CREATE USER 'bkadmin'@'localhost' IDENTIFIED BY '"+password+"'", "GRANT ALL PRIVILEGES ON *.* TO 'bkadmin'@'localhost'")
	s := startServerEnv(t, f.env)
	u := s.create("/v1/users", map[string]any{"username": "backed-up"})
	s.create("/v1/boards", map[string]any{"owner_id": u.ID, "name": "kept"})
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	sink := &otlpSink{}
	collector := httptest.NewServer(sink)
	defer collector.Close()
	env := maps.Clone(f.env)
	env["PINSTORE_MYSQL_ADMIN"] = "bkadmin:" + password
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.URL
	env["OTEL_TRACES_SAMPLER"] = "always_on"
	dir := t.TempDir()
	bk := filepath.Join(dir, "backup")
	for _, args := range [][]string{
		{"backup", "--host", "a", "--to", bk},
		{"backup", "verify", bk},
		{"restore", "--backup", bk, "--datadir", filepath.Join(dir, "restored")},
	} {
		if out, err := runCmd(t, env, args...); err != nil {
			t.Fatalf("%s: %v\n%s", args, err, out)
		}
	}
	spans := sink.received(t, password, "bkadmin:")
	for _, c := range []struct {
		root, prefix string
		want         []string
	}{
		{"pinstore backup", "backup ", []string{"choose source", "mariadb-backup", "checksums", "binlog copy", "manifest"}},
		{"pinstore backup verify", "verify ", []string{"check", "copy", "prepare", "start", "replay", "checksums"}},
		{"pinstore restore", "restore ", []string{"check", "copy", "prepare", "start", "replay", "shards"}},
	} {
		steps := commandSteps(t, spans, c.root, c.prefix)
		for _, w := range c.want {
			if !steps[w] {
				t.Errorf("%s: no child span for the step %q; its steps: %v", c.root, w, steps)
			}
		}
	}
	for _, sp := range spans {
		if sp.Name == "backup choose source" && attr(sp, "pinstore.backup.source_role").GetStringValue() != "master" {
			t.Errorf("backup choose source: %s, want the master as the source", attrString(sp))
		}
	}
}
