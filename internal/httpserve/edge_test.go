package httpserve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingListener counts the bytes the server reads from its
// connections.
type countingListener struct {
	net.Listener
	read *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, read: l.read}, nil
}

type countingConn struct {
	net.Conn
	read *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func (c *countingConn) CloseWrite() error { return c.Conn.(*net.TCPConn).CloseWrite() }

// startCounting is start on a listener that counts the bytes read.
func startCounting(t *testing.T, h http.Handler, c Config) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	read := new(atomic.Int64)
	s := New(h, c)
	done := make(chan error, 1)
	go func() { done <- s.Serve(countingListener{Listener: ln, read: read}) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-done
	})
	return ln.Addr().String(), read
}

type problem struct {
	Type, Title, Detail string
	Status              int
}

// readProblem reads a response from br and checks it is a problem
// document of status.
func readProblem(t *testing.T, br *bufio.Reader, status int) problem {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	defer resp.Body.Close()
	var p problem
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("answered %d %q, want %d application/problem+json", resp.StatusCode, resp.Header.Get("Content-Type"), status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || p.Status != status || p.Detail == "" {
		t.Fatalf("problem %+v, %v", p, err)
	}
	return p
}

// A body over the limit is refused as it arrives: with a Content-Length
// over it, the 413 problem comes back while the client is still sending
// (slowly) and the server reads hardly any of it; sent chunked as fast as
// the client can, the server reads the limit, the lingering bound and its
// buffer at most of 32 MiB, and the handler never runs.
func TestBodyOverLimitRefusedAsItArrives(t *testing.T) {
	var ran atomic.Bool
	addr, read := startCounting(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran.Store(true) }), Config{})
	const total = 2 << 20
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/pins HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", total)
	var sent atomic.Int64
	stop := make(chan struct{})
	go func() {
		chunk := []byte(strings.Repeat("x", 16<<10))
		for sent.Load() < total {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			n, err := conn.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	p := readProblem(t, bufio.NewReader(conn), http.StatusRequestEntityTooLarge)
	close(stop)
	if s := sent.Load(); s >= total {
		t.Errorf("the 413 came after the whole body was sent (%d bytes)", s)
	}
	if want := fmt.Sprintf("the request body is larger than %d bytes", DefaultMaxBodyBytes); p.Detail != want {
		t.Errorf("detail %q, want %q", p.Detail, want)
	}

	// Chunked, unbounded by any Content-Length, as fast as it goes.
	read.Store(0)
	conn2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	got := make(chan problem, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn2), nil)
		if err != nil {
			got <- problem{}
			return
		}
		defer resp.Body.Close()
		var p problem
		_ = json.NewDecoder(resp.Body).Decode(&p)
		got <- p
	}()
	fmt.Fprintf(conn2, "POST /v1/pins HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
	const chunked = 32 << 20
	chunk := []byte(fmt.Sprintf("4000\r\n%s\r\n", strings.Repeat("y", 16<<10)))
	var wrote int
	for wrote < chunked {
		n, err := conn2.Write(chunk)
		wrote += n
		if err != nil {
			break
		}
	}
	if p := <-got; p.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked: answered %+v, want a 413 problem", p)
	}
	if wrote >= chunked {
		t.Errorf("the client sent the whole %d bytes: the server read them all", wrote)
	}
	time.Sleep(lingerTime + 100*time.Millisecond) // the lingering read ends
	if n, bound := read.Load(), int64(DefaultMaxBodyBytes+lingerBytes+64<<10); n > bound {
		t.Errorf("the server read %d bytes of a chunked body over the limit, more than %d", n, bound)
	}
	if ran.Load() {
		t.Error("the handler ran on a body over the limit")
	}
}

// A body over the limit announced with Expect: 100-continue is refused
// before the client sends it: the 413 comes instead of the 100.
func TestBodyOverLimitRefusedBeforeContinue(t *testing.T) {
	addr, _ := startCounting(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), Config{})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", 1<<20)
	readProblem(t, bufio.NewReader(conn), http.StatusRequestEntityTooLarge)
}

// What the loop refuses itself (a request line that is not HTTP, a target
// that is no URI, headers over their limit) goes to Config.Refuse with its
// status, and by default is an about:blank problem document.
func TestRefusalsAreProblems(t *testing.T) {
	type refusal struct {
		status int
		path   string
		id     string
	}
	var mu sync.Mutex
	var seen []refusal
	addr, _ := startCounting(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), Config{
		MaxHeaderBytes: 4 << 10,
		Refuse: func(w http.ResponseWriter, r *http.Request, status int, detail string) {
			mu.Lock()
			seen = append(seen, refusal{status, r.URL.Path, r.Header.Get("X-Request-Id")})
			mu.Unlock()
			refuseAboutBlank(w, r, status, detail)
		},
	})
	for _, c := range []struct {
		name, req string
		status    int
	}{
		{"not a request line", "HELLO\r\n\r\n", 400},
		{"a request line of spaces", "GET  / HTTP/1.1 x\r\nHost: x\r\n\r\n", 400},
		{"a target that is no URI", "GET %zz HTTP/1.1\r\nHost: x\r\n\r\n", 400},
		{"headers over the limit", "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("z", 8<<10) + "\r\n\r\n", 431},
		{"a body over the limit", fmt.Sprintf("PUT /a/b HTTP/1.1\r\nHost: x\r\nX-Request-Id: r-1\r\nContent-Length: %d\r\n\r\n", 1<<20), 413},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_, _ = io.WriteString(conn, c.req)
			p := readProblem(t, bufio.NewReader(conn), c.status)
			if p.Type != "about:blank" || p.Title != http.StatusText(c.status) {
				t.Errorf("problem %+v", p)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 5 {
		t.Fatalf("Refuse saw %+v, want 5 refusals", seen)
	}
	if last := seen[4]; last != (refusal{413, "/a/b", "r-1"}) {
		t.Errorf("the body's refusal saw %+v: its path and headers were read", last)
	}
}

// startBlocking serves a handler that signals it runs, then waits for its
// context (or 10 s) and reports what ended it.
func startBlocking(t *testing.T) (string, *Server, chan struct{}, chan error) {
	t.Helper()
	inside, ended := make(chan struct{}, 4), make(chan error, 4)
	base, s := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A context derived from the request's, as a store's statement
		// takes one: it ends with it.
		ctx, cancel := context.WithTimeout(r.Context(), time.Hour)
		defer cancel()
		inside <- struct{}{}
		select {
		case <-ctx.Done():
			ended <- r.Context().Err()
		case <-time.After(10 * time.Second):
			ended <- nil
		}
		_, _ = io.WriteString(w, "done")
	}), Config{})
	return strings.TrimPrefix(base, "http://"), s, inside, ended
}

// A request's context ends when its client closes the connection, and
// not before: a pipelined request arriving behind it leaves it running.
func TestClientGoneCancelsTheContext(t *testing.T) {
	addr, _, inside, ended := startBlocking(t)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(conn, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-inside
	_, _ = io.WriteString(conn, "GET /next HTTP/1.1\r\nHost: x\r\n\r\n") // data, not a close
	select {
	case err := <-ended:
		t.Fatalf("the context ended (%v) while the client was there", err)
	case <-time.After(300 * time.Millisecond):
	}
	start := time.Now()
	conn.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ended with %v, want context.Canceled", err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("the context ended %v after the client left", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the context did not end within 5 s of its client leaving")
	}
}

// A shutdown lets a request run for its grace, then cancels its context;
// the request still answers, and Shutdown returns the grace's error once
// the handler has returned.
func TestShutdownCancelsAfterItsGrace(t *testing.T) {
	addr, s, inside, ended := startBlocking(t)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-inside
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = s.Shutdown(ctx)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("shutdown: %v, want the grace's deadline", err)
	}
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the request ended with %v, want context.Canceled", err)
		}
	default:
		t.Fatal("Shutdown returned before the handler did")
	}
	if took < 300*time.Millisecond || took > 3*time.Second {
		t.Errorf("shutdown took %v with a 300ms grace", took)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "done" || !resp.Close {
		t.Errorf("answered %q close=%t, want done and the connection closed", b, resp.Close)
	}
}

// A request's context ends when its handler returns, as under net/http.
func TestContextEndsWithTheHandler(t *testing.T) {
	kept := make(chan context.Context, 1)
	base, _ := start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Err() != nil {
			t.Error("the context ended before the handler")
		}
		kept <- r.Context()
	}), Config{})
	do(t, must(http.NewRequest(http.MethodGet, base+"/", nil)))
	ctx := <-kept
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
		t.Fatal("the context did not end with its handler")
	}
}
