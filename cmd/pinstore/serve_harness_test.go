package main

// The end-to-end harness: it migrates a private set of shards, starts the
// real server (runServe) on a free 127.0.0.1 port against the real MariaDB
// and Redis, and gives tests an HTTP client whose every response is
// validated against openapi.yaml.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	_ "github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	pinstore "github.com/pinstore/pinstore"
	"github.com/pinstore/pinstore/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

// e2eShards is the small shard count the end-to-end tests migrate.
const e2eShards = 8

// server is a running pinstore serve.
type server struct {
	t      *testing.T
	base   string // http://127.0.0.1:PORT
	client *http.Client
	logs   *logLines
	stop   func() error // cancels serve's context and waits for it to return
	dsn    string       // the MariaDB the server uses, naming no database ("root@tcp(127.0.0.1:3306)/")
	prefix string       // the server's private database-name prefix: its shards are prefix+"%05d"
}

// logLines collects the server's JSON log lines and reports the address
// of the "listening" line.
type logLines struct {
	mu    sync.Mutex
	lines []string
	buf   []byte
	addr  chan string
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		line := string(l.buf[:i])
		l.buf = l.buf[i+1:]
		l.lines = append(l.lines, line)
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
			select {
			case l.addr <- rec.Addr:
			default:
			}
		}
	}
	return len(p), nil
}

// Lines returns the log lines so far.
func (l *logLines) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// startServer migrates e2eShards fresh shards and runs `pinstore serve`
// on them until the test ends; then it checks the server shut down
// cleanly and drops the databases.
func startServer(t *testing.T) *server {
	t.Helper()
	return startServerEnv(t, nil)
}

// startServerEnv is startServer with extra or overriding environment. By
// default the server accepts the service token e2eAdminToken (every
// scope) and user tokens signed with e2eTokenSecret, and the client sends
// e2eAdminToken (see auth_e2e_test.go).
func startServerEnv(t *testing.T, extra map[string]string) *server {
	t.Helper()
	return startServerMigrated(t, extra, true)
}

// startServerMigrated is startServerEnv, with migrate false: the server
// starts on shards nobody migrated.
func startServerMigrated(t *testing.T, extra map[string]string, migrate bool) *server {
	t.Helper()
	dsn := testenv.MySQLDSN(t)
	redisAddr := testenv.RedisAddr(t)
	prefix := testenv.UniquePrefix(t, "e2e")
	env := map[string]string{
		"PINSTORE_MYSQL_DSN":           dsn,
		"PINSTORE_REDIS_ADDRS":         redisAddr,
		"PINSTORE_SHARDS":              fmt.Sprint(e2eShards),
		"PINSTORE_DB_PREFIX":           prefix,
		"PINSTORE_REDIS_PREFIX":        prefix + "o:",
		"PINSTORE_OBJECT_CACHE_PREFIX": prefix + "c:",
		"PINSTORE_CURSOR_SECRET":       "e2e-cursor-secret",
		"PINSTORE_LOG_LEVEL":           "info",
		"PINSTORE_TOKENS_FILE":         e2eTokensFile(t),
		"PINSTORE_TOKEN_SECRET":        e2eTokenSecret,
	}
	for k, v := range extra {
		env[k] = v
	}
	getenv := func(k string) string { return env[k] }
	t.Cleanup(func() {
		testenv.DropDatabases(t, dsn, prefix)
		testenv.DropKeys(t, redisAddr, prefix)
	})

	if migrate {
		var migrateOut bytes.Buffer
		if err := run(context.Background(), []string{"migrate"}, getenv, &migrateOut, &migrateOut); err != nil {
			t.Fatalf("migrate: %v\n%s", err, migrateOut.String())
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	logs := &logLines{addr: make(chan string, 1)}
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, []string{"--addr", "127.0.0.1:0"}, getenv, io.Discard, logs) }()
	var addr string
	select {
	case addr = <-logs.addr:
	case err := <-done:
		cancel()
		t.Fatalf("serve exited before listening: %v\n%s", err, strings.Join(logs.Lines(), "\n"))
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("serve did not log a listening address in 30s\n%s", strings.Join(logs.Lines(), "\n"))
	}
	if strings.HasSuffix(addr, ":0") {
		t.Fatalf("serve logged %q, not the port it bound", addr)
	}
	var once sync.Once
	var stopErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(20 * time.Second):
				stopErr = errors.New("serve did not return within 20s of cancellation")
			}
		})
		return stopErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("serve returned %v after shutdown", err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", strings.Join(logs.Lines(), "\n"))
		}
	})

	base := "http://" + addr
	return &server{t: t, base: base, client: &http.Client{Timeout: 30 * time.Second, Transport: newSpecTransport(t, base)}, logs: logs, stop: stop, dsn: dsn, prefix: env["PINSTORE_DB_PREFIX"]}
}

// specTransport validates every response against openapi.yaml: its status
// must be documented for the operation, and its headers and body must
// match. A request that the server answered 2xx must be valid by the spec
// too (what the server accepts, a generated client can send). Requests
// the spec doesn't route (unknown paths, wrong methods) must get a 404 or
// 405 problem document.
type specTransport struct {
	t       *testing.T
	name    string // the spec's name in messages
	doc     *openapi3.T
	router  routers.Router
	problem *openapi3.Schema
	codes   map[string]bool // Problem.code's known values (x-extensible-enum); nil: the schema alone decides
	base    http.RoundTripper
	token   string // bearer token for requests without an Authorization key (auth_e2e_test.go)
}

// registerDecoders teaches openapi3filter the one media type of ours it
// lacks: /docs is HTML and its renderer JavaScript, checked as strings.
var registerDecoders = sync.OnceFunc(func() {
	asString := func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(body)
		return string(b), err
	}
	openapi3filter.RegisterBodyDecoder("text/html", asString)
	openapi3filter.RegisterBodyDecoder("text/javascript", asString)
	// NDJSON (GET /v1/changes): the spec's schema is one line's; the first
	// line is checked here, every line by the change stream's own tests.
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(body)
		if err != nil {
			return nil, err
		}
		first, _, _ := bytes.Cut(b, []byte("\n"))
		var v any
		if err := json.Unmarshal(first, &v); err != nil {
			return nil, fmt.Errorf("an NDJSON line that is not JSON: %w", err)
		}
		return v, nil
	})
})

func newSpecTransport(t *testing.T, base string) *specTransport {
	t.Helper()
	return newSpecTransportFor(t, base, "openapi.yaml", loadSpec(t, "openapi.yaml", pinstore.OpenAPI))
}

// loadSpec loads and validates an OpenAPI document.
func loadSpec(t *testing.T, name string, spec []byte) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(spec)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("%s is invalid: %v", name, err)
	}
	return doc
}

// newSpecTransportFor validates responses from base against doc, called
// name in messages.
func newSpecTransportFor(t *testing.T, base, name string, doc *openapi3.T) *specTransport {
	t.Helper()
	registerDecoders()
	doc.Servers = openapi3.Servers{{URL: base}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatalf("openapi router: %v", err)
	}
	problem := doc.Components.Schemas["Problem"].Value
	var codes map[string]bool
	if known, ok := problem.Properties["code"].Value.Extensions["x-extensible-enum"].([]any); ok {
		codes = map[string]bool{}
		for _, c := range known {
			codes[fmt.Sprint(c)] = true
		}
	}
	return &specTransport{t: t, name: name, doc: doc, router: router, problem: problem, codes: codes, base: http.DefaultTransport, token: e2eAdminToken}
}

func (s *specTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.GetBody != nil {
		rc, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		reqBody, _ = io.ReadAll(rc)
		rc.Close()
	}
	if _, set := req.Header["Authorization"]; !set && s.token != "" {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	s.check(req, reqBody, resp, body)
	return resp, nil
}

// check fails the test with every finding about one exchange.
func (s *specTransport) check(req *http.Request, reqBody []byte, resp *http.Response, body []byte) {
	s.t.Helper()
	for _, f := range s.findings(req, reqBody, resp, body) {
		s.t.Error(f)
	}
}

// findings returns what is wrong with one exchange by the spec: nothing
// when the response (and, if it succeeded, the request) matches it.
func (s *specTransport) findings(req *http.Request, reqBody []byte, resp *http.Response, body []byte) []string {
	var out []string
	errorf := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	what := req.Method + " " + req.URL.RequestURI()
	if rid := resp.Header.Get("X-Request-Id"); rid == "" {
		errorf("%s: no X-Request-Id in the response", what)
	}
	route, params, err := s.router.FindRoute(req)
	if err != nil {
		// Not an operation of the spec: the server must refuse it with a
		// problem document.
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			errorf("%s: not in the spec (%v), yet answered %d", what, err, resp.StatusCode)
		}
		return append(out, s.problemFindings(what, resp, body)...)
	}
	ctx := context.Background()
	rvi := &openapi3filter.RequestValidationInput{
		Request:    req,
		PathParams: params,
		Route:      route,
		Options:    &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true},
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: rvi,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(ctx, in); err != nil {
		errorf("%s: response %d does not match %s: %v\nbody: %s", what, resp.StatusCode, s.name, err, truncate(body))
	}
	if resp.StatusCode >= 400 && route.Path != "/readyz" { // a 503 readiness report is a Readiness body
		out = append(out, s.problemFindings(what, resp, body)...)
	}
	if resp.StatusCode < 300 {
		// Validate a copy of the request: the spec must accept what the
		// server accepted.
		r2 := req.Clone(ctx)
		r2.Body = io.NopCloser(bytes.NewReader(reqBody))
		rvi.Request = r2
		if err := openapi3filter.ValidateRequest(ctx, rvi); err != nil {
			errorf("%s: the server accepted (%d) a request that %s refuses: %v", what, resp.StatusCode, s.name, err)
		}
	}
	return out
}

// problemFindings checks an error response is a problem document that
// names the request path and id, whose code the spec documents and whose
// type links to that code's section of /docs.
func (s *specTransport) problemFindings(what string, resp *http.Response, body []byte) []string {
	var out []string
	errorf := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		errorf("%s: error %d has Content-Type %q", what, resp.StatusCode, ct)
		return out
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		errorf("%s: problem body is not JSON: %v", what, err)
		return out
	}
	if err := s.problem.VisitJSON(v); err != nil {
		errorf("%s: problem body does not match the Problem schema of %s: %v", what, s.name, err)
	}
	var p problem
	_ = json.Unmarshal(body, &p)
	if p.Status != resp.StatusCode || p.Type != "/docs#tag/errors/"+p.Code || p.RequestID != resp.Header.Get("X-Request-Id") {
		errorf("%s: inconsistent problem %+v (status %d, X-Request-Id %q)", what, p, resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}
	if s.codes != nil && !s.codes[p.Code] {
		errorf("%s: code %q is not among Problem.code's documented values", what, p.Code)
	}
	for _, leak := range []string{"SQL", "sql:", "tcp(", "goroutine ", "Error 1"} {
		if strings.Contains(p.Detail, leak) {
			errorf("%s: problem detail leaks %q: %s", what, leak, p.Detail)
		}
	}
	return out
}

type problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail"`
	Code      string `json:"code"`
	Instance  string `json:"instance"`
	RequestID string `json:"request_id"`
}

func truncate(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}

// response is what a test looks at.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// decode decodes the body into v, failing the test if it can't.
func (r *response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", truncate(r.Body), err)
	}
}

func (r *response) problem(t *testing.T) problem {
	t.Helper()
	var p problem
	r.decode(t, &p)
	return p
}

// req is one request: a body of []byte or string is sent as is, anything
// else as JSON; Content-Type defaults to application/json when there is a
// body. Headers are name, value pairs.
func (s *server) req(method, path string, body any, headers ...string) *response {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		var b []byte
		switch v := body.(type) {
		case []byte:
			b = v
		case string:
			b = []byte(v)
		default:
			var err error
			if b, err = json.Marshal(v); err != nil {
				s.t.Fatal(err)
			}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header[http.CanonicalHeaderKey(headers[i])] = nil // present but empty: sent as nothing, e.g. no Authorization
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.EOF) {
		s.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return &response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// must is req that fails the test unless the status is want.
func (s *server) must(want int, method, path string, body any, headers ...string) *response {
	s.t.Helper()
	r := s.req(method, path, body, headers...)
	if r.Status != want {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.Status, want, truncate(r.Body))
	}
	return r
}

// fail is req that expects an error status and code, and returns the
// problem.
func (s *server) fail(wantStatus int, wantCode, method, path string, body any, headers ...string) problem {
	s.t.Helper()
	r := s.req(method, path, body, headers...)
	if r.Status != wantStatus {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.Status, wantStatus, truncate(r.Body))
	}
	p := r.problem(s.t)
	if p.Code != wantCode {
		s.t.Fatalf("%s %s: code %q, want %q: %s", method, path, p.Code, wantCode, p.Detail)
	}
	return p
}

// object is the part of any object the tests look at.
type object struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Username    string          `json:"username"`
	Name        string          `json:"name"`
	OwnerID     string          `json:"owner_id"`
	BoardID     string          `json:"board_id"`
	PinID       string          `json:"pin_id"`
	SavedFrom   *string         `json:"saved_from"`
	SectionID   *string         `json:"section_id"`
	Secret      bool            `json:"secret"`
	Counts      map[string]int  `json:"counts"`
	AuthorID    string          `json:"author_id"`
	Description string          `json:"description"`
	Text        string          `json:"text"`
	Data        json.RawMessage `json:"data"`
	Version     int64           `json:"version"`
}

type list struct {
	Items      []object `json:"items"`
	NextCursor *string  `json:"next_cursor"`
	Count      *int64   `json:"count"`
}

func (l list) ids() []string {
	out := make([]string, len(l.Items))
	for i, o := range l.Items {
		out[i] = o.ID
	}
	return out
}

func (s *server) create(path string, body any) object {
	s.t.Helper()
	r := s.must(http.StatusCreated, http.MethodPost, path, body)
	var o object
	r.decode(s.t, &o)
	if loc := r.Header.Get("Location"); !strings.HasSuffix(loc, "/"+o.ID) {
		s.t.Fatalf("POST %s: Location %q does not name %s", path, loc, o.ID)
	}
	if et := r.Header.Get("ETag"); et != `"1"` || o.Version != 1 {
		s.t.Fatalf("POST %s: ETag %q, version %d; want \"1\", 1", path, et, o.Version)
	}
	return o
}

func (s *server) get(path string) object {
	s.t.Helper()
	var o object
	s.must(http.StatusOK, http.MethodGet, path, nil).decode(s.t, &o)
	return o
}

// page gets one page of a list.
func (s *server) page(path string) list {
	s.t.Helper()
	var l list
	s.must(http.StatusOK, http.MethodGet, path, nil).decode(s.t, &l)
	return l
}

// all walks a list by cursor, limit entries a page, checking every page
// has the same count and only the last lacks next_cursor.
func (s *server) all(path string, limit int) (ids []string, count int64) {
	s.t.Helper()
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			s.t.Fatalf("%s: more than 1000 pages", path)
		}
		q := fmt.Sprintf("%s%slimit=%d", path, sep, limit)
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		l := s.page(q)
		if l.Count != nil {
			if pages > 0 && *l.Count != count {
				s.t.Fatalf("%s: count changed from %d to %d between pages", path, count, *l.Count)
			}
			count = *l.Count
		}
		ids = append(ids, l.ids()...)
		if l.NextCursor == nil {
			return ids, count
		}
		if len(l.Items) > limit {
			s.t.Fatalf("%s: %d items on a page of %d", path, len(l.Items), limit)
		}
		cursor = *l.NextCursor
	}
}

// count returns a list's count field.
func (s *server) count(path string) int64 {
	s.t.Helper()
	l := s.page(path + "?limit=1")
	if l.Count == nil {
		s.t.Fatalf("%s: no count", path)
	}
	return *l.Count
}

// tableState is what dbState records of one table.
type tableState struct {
	Rows     int64
	Checksum sql.NullInt64 // CHECKSUM TABLE: NULL only for a table that is gone
}

// dbState returns the row count and CHECKSUM TABLE of every table of the
// server's shard databases (every database named with its private
// prefix), keyed "database.table". It fails the test when there are no
// such tables, so an empty state can never compare equal by accident.
func (s *server) dbState() map[string]tableState {
	s.t.Helper()
	db, err := sqlx.Open("mysql", s.dsn)
	if err != nil {
		s.t.Fatalf("open %s: %v", s.dsn, err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var tables []struct {
		Schema string `db:"TABLE_SCHEMA"`
		Name   string `db:"TABLE_NAME"`
	}
	// Only this test's schemas: information_schema over every database of a
	// server that other runs fill with thousands of shards takes minutes.
	// The prefix's "_" is escaped for LIKE; it is also checked exactly below.
	like := strings.NewReplacer(`\`, `\\`, "_", `\_`, "%", `\%`).Replace(s.prefix) + "%"
	if err := sqlx.SelectContext(ctx, db, &tables, "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA LIKE ? AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_SCHEMA, TABLE_NAME", like); err != nil {
		s.t.Fatalf("list tables: %v", err)
	}
	state := map[string]tableState{}
	schemas := map[string]bool{}
	for _, tb := range tables {
		if !strings.HasPrefix(tb.Schema, s.prefix) {
			continue
		}
		schemas[tb.Schema] = true
		name := quoteIdent(tb.Schema) + "." + quoteIdent(tb.Name)
		var st tableState
		if err := db.GetContext(ctx, &st.Rows, "SELECT COUNT(*) FROM "+name); err != nil {
			s.t.Fatalf("count %s: %v", name, err)
		}
		var table string
		if err := db.QueryRowContext(ctx, "CHECKSUM TABLE "+name).Scan(&table, &st.Checksum); err != nil {
			s.t.Fatalf("checksum %s: %v", name, err)
		}
		state[tb.Schema+"."+tb.Name] = st
	}
	if len(schemas) != e2eShards || len(state) == 0 {
		s.t.Fatalf("found %d tables in %d databases named %s*, want tables in %d shard databases", len(state), len(schemas), s.prefix, e2eShards)
	}
	return state
}

// requireSameDB fails the test unless two dbStates are equal, naming every
// table that differs.
func (s *server) requireSameDB(before, after map[string]tableState) {
	s.t.Helper()
	var diffs []string
	for name, b := range before {
		a, ok := after[name]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s: gone (had %d rows)", name, b.Rows))
		case a != b:
			diffs = append(diffs, fmt.Sprintf("%s: %d rows, checksum %v; now %d rows, checksum %v", name, b.Rows, b.Checksum.Int64, a.Rows, a.Checksum.Int64))
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			diffs = append(diffs, name+": new table")
		}
	}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		s.t.Fatalf("the shard databases changed:\n%s", strings.Join(diffs, "\n"))
	}
}

// quoteIdent quotes a MySQL identifier.
func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
