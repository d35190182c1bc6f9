package httpserve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// start serves h on a loopback port and returns its base URL; the server
// shuts down when the test ends.
func start(t *testing.T, h http.Handler, c Config) (string, *Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := New(h, c)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String(), s
}

func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// The handler sees the request as net/http would give it, and its status,
// headers and body reach the client as written.
func TestRequestAndResponse(t *testing.T) {
	base, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Error(err)
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Etag", `"7"`)
		h.Add("Vary", "Authorization")
		h.Add("Vary", "Accept")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "%s %s %s q=%s host=%s a=%q auth=%s len=%d body=%s proto=%s remote=%t",
			r.Method, r.URL.Path, r.RequestURI, r.URL.Query().Get("q"), r.Host, r.Header.Values("X-A"),
			r.Header.Get("Authorization"), r.ContentLength, body, r.Proto, r.RemoteAddr != "")
	}), Config{})

	req, _ := http.NewRequest(http.MethodPost, base+"/v1/pins/12?q=a%20b", strings.NewReader(`{"x":1}`))
	req.Header.Set("Authorization", "Bearer t0k")
	req.Header.Add("X-A", "1")
	req.Header.Add("X-A", "2")
	resp, body := do(t, req)
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("status %d", resp.StatusCode)
	}
	host := strings.TrimPrefix(base, "http://")
	want := `POST /v1/pins/12 /v1/pins/12?q=a%20b q=a b host=` + host + ` a=["1" "2"] auth=Bearer t0k len=7 body={"x":1} proto=HTTP/1.1 remote=true`
	if body != want {
		t.Errorf("handler saw\n%s\nwant\n%s", body, want)
	}
	if got := resp.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type %q", got)
	}
	if got := resp.Header.Get("Etag"); got != `"7"` {
		t.Errorf("Etag %q", got)
	}
	if got := resp.Header.Values("Vary"); len(got) != 2 || got[0] != "Authorization" || got[1] != "Accept" {
		t.Errorf("Vary %q", got)
	}
	if resp.ContentLength != int64(len(want)) {
		t.Errorf("Content-Length %d, want %d", resp.ContentLength, len(want))
	}
	if resp.Header.Get("Date") == "" {
		t.Error("no Date header")
	}
	if got := resp.Header.Get("Server"); got != "" {
		t.Errorf("Server header %q: the server should not name itself", got)
	}
}

// A handler that writes nothing answers 200 with an empty body; one that
// writes without a status answers 200 with its sniffed type; a 204 and a
// HEAD carry no body; a second WriteHeader is ignored.
func TestStatusDefaults(t *testing.T) {
	base, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/nothing":
		case "/text":
			_, _ = io.WriteString(w, "hello")
		case "/none":
			w.WriteHeader(http.StatusNoContent)
		case "/twice":
			w.WriteHeader(http.StatusConflict)
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, "c")
		case "/head":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"a":1}`)
		}
	}), Config{})
	for _, c := range []struct {
		method, path string
		status       int
		ctype, body  string
	}{
		{"GET", "/nothing", 200, "", ""},
		{"GET", "/text", 200, "text/plain; charset=utf-8", "hello"},
		{"DELETE", "/none", 204, "", ""},
		{"GET", "/twice", 409, "", "c"},
		{"HEAD", "/head", 200, "application/json", ""},
	} {
		req, _ := http.NewRequest(c.method, base+c.path, nil)
		resp, body := do(t, req)
		if resp.StatusCode != c.status || resp.Header.Get("Content-Type") != c.ctype || body != c.body {
			t.Errorf("%s %s: %d %q %q, want %d %q %q", c.method, c.path, resp.StatusCode,
				resp.Header.Get("Content-Type"), body, c.status, c.ctype, c.body)
		}
	}
}

// What a handler keeps of a request (a header's value, the path) stays
// what it was after the server has served other requests on the same
// connection with the same buffers.
func TestKeptStringsStayTheirs(t *testing.T) {
	var mu sync.Mutex
	var kept []string
	base, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		kept = append(kept, r.Header.Get("X-Key")+" "+r.URL.Path, r.Header.Get("X-Key"), r.URL.Path)
		mu.Unlock()
	}), Config{})
	const n = 50
	for i := range n {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/k/%03d", base, i), nil)
		req.Header.Set("X-Key", fmt.Sprintf("key-%03d", i))
		do(t, req)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(kept) != 3*n {
		t.Fatalf("%d kept, want %d", len(kept), 3*n)
	}
	for i := range n {
		key, path := fmt.Sprintf("key-%03d", i), fmt.Sprintf("/k/%03d", i)
		if kept[3*i] != key+" "+path || kept[3*i+1] != key || kept[3*i+2] != path {
			t.Errorf("request %d: kept %q %q %q, want %q %q", i, kept[3*i], kept[3*i+1], kept[3*i+2], key, path)
		}
	}
}

// Several requests on one kept-alive connection, each answered in turn,
// then three pipelined in one write, answered in order.
func TestKeepAliveAndPipelining(t *testing.T) {
	base, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Path)
	}), Config{})
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	read := func(want string) {
		t.Helper()
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != want {
			t.Errorf("answered %q, want %q", b, want)
		}
	}
	for i := range 5 {
		path := fmt.Sprintf("/r%d", i)
		if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
			t.Fatal(err)
		}
		read(path)
	}
	if _, err := io.WriteString(conn, "GET /p0 HTTP/1.1\r\nHost: x\r\n\r\nGET /p1 HTTP/1.1\r\nHost: x\r\n\r\nGET /p2 HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		read(fmt.Sprintf("/p%d", i))
	}
}

// A body over the limit is refused before the handler runs.
func TestBodyLimit(t *testing.T) {
	ran := false
	base, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran = true }), Config{MaxBodyBytes: 1 << 10})
	req, _ := http.NewRequest(http.MethodPost, base+"/", strings.NewReader(strings.Repeat("x", 4<<10)))
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("status %d, want 413", resp.StatusCode)
		}
	}
	if ran {
		t.Error("the handler ran on a body over the limit")
	}
}

// A panic that reaches the server (the API recovers its own; this is the
// last line) answers 500 and closes the connection, and the server goes
// on serving.
func TestPanicClosesTheConnection(t *testing.T) {
	base, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/panic" {
			_, _ = io.WriteString(w, "partial")
			panic("boom")
		}
		if r.URL.Path == "/abort" {
			panic(http.ErrAbortHandler)
		}
		_, _ = io.WriteString(w, "fine")
	}), Config{})
	resp, body := do(t, must(http.NewRequest(http.MethodGet, base+"/panic", nil)))
	if resp.StatusCode != http.StatusInternalServerError || strings.Contains(body, "partial") || !resp.Close {
		t.Errorf("panic: %d %q close=%t, want 500 without the partial body, connection closed", resp.StatusCode, body, resp.Close)
	}
	resp, _ = do(t, must(http.NewRequest(http.MethodGet, base+"/abort", nil)))
	if resp.StatusCode != http.StatusInternalServerError || !resp.Close {
		t.Errorf("abort: %d close=%t", resp.StatusCode, resp.Close)
	}
	if resp, body := do(t, must(http.NewRequest(http.MethodGet, base+"/", nil))); resp.StatusCode != 200 || body != "fine" {
		t.Errorf("after the panics: %d %q", resp.StatusCode, body)
	}
}

// Shutdown lets a request in flight finish and answer; its context is not
// cancelled by it.
func TestShutdownLetsRequestsFinish(t *testing.T) {
	inside, release := make(chan struct{}), make(chan struct{})
	base, s := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inside)
		<-release
		if err := r.Context().Err(); err != nil {
			t.Errorf("request context ended: %v", err)
		}
		_, _ = io.WriteString(w, "done")
	}), Config{})
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get(base + "/slow")
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	<-inside
	stopped := make(chan error, 1)
	go func() { stopped <- s.Shutdown(context.Background()) }()
	select {
	case err := <-stopped:
		t.Fatalf("shutdown returned with a request in flight: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if b := <-got; b != "done" {
		t.Errorf("request in flight answered %q, want done", b)
	}
	if err := <-stopped; err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if _, err := http.Get(base + "/"); err == nil || !isRefused(err) {
		t.Errorf("after shutdown: %v, want connection refused", err)
	}
}

func isRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A chunked request body reaches the handler whole and plain, a
// multipart one as sent; headers over the limit are refused with 431.
func TestChunkedBodyAndHeaderLimit(t *testing.T) {
	base, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d %s te=%q", r.ContentLength, b, r.Header.Get("Transfer-Encoding"))
	}), Config{MaxHeaderBytes: 4 << 10})
	req, _ := http.NewRequest(http.MethodPost, base+"/", io.MultiReader(strings.NewReader("ab"), strings.NewReader("cd")))
	req.ContentLength = -1 // unknown: the client sends it chunked
	if resp, body := do(t, req); resp.StatusCode != 200 || body != `4 abcd te=""` {
		t.Errorf("chunked: %d %q", resp.StatusCode, body)
	}
	// A body that says it is multipart reaches the handler as sent, even
	// one that is not: the server leaves the body to the handler.
	const notMultipart = "this is not a multipart body"
	req, _ = http.NewRequest(http.MethodPost, base+"/", strings.NewReader(notMultipart))
	req.Header.Set("Content-Type", "multipart/form-data; boundary=xyz")
	if resp, body := do(t, req); resp.StatusCode != 200 || body != fmt.Sprintf("%d %s te=\"\"", len(notMultipart), notMultipart) {
		t.Errorf("multipart: %d %q, want the body as sent", resp.StatusCode, body)
	}
	req, _ = http.NewRequest(http.MethodGet, base+"/", nil)
	req.Header.Set("X-Big", strings.Repeat("y", 8<<10))
	if resp, _ := do(t, req); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("big headers: %d, want 431", resp.StatusCode)
	}
}
