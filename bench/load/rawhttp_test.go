package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// The lean client against a real net/http server: lengths, chunked
// bodies, no body, error statuses, request bodies, and connection reuse.
func TestLeanClient(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/len":
			w.Header().Set("Content-Length", "13")
			io.WriteString(w, `{"id":"1234"}`)
		case "/chunked":
			fl := w.(http.Flusher)
			io.WriteString(w, `{"id":`)
			fl.Flush()
			io.WriteString(w, `"chunked"}`)
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/echo":
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"`+r.Method+" "+r.Header.Get("Content-Type")+" "+string(b)+" "+r.Header.Get("Authorization")+`"}`)
		default:
			http.Error(w, "no such thing", http.StatusNotFound)
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	l, err := newLeanClient(srv.URL, "Bearer tok", 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var c created
	for _, tc := range []struct{ path, want string }{{"/len", "1234"}, {"/chunked", "chunked"}} {
		c = created{}
		if err := l.do(ctx, "GET", tc.path, "", nil, &c); err != nil || c.ID != tc.want {
			t.Fatalf("GET %s: %+v, %v", tc.path, c, err)
		}
	}
	if err := l.do(ctx, "DELETE", "/empty", "", nil, nil); err != nil {
		t.Fatalf("204: %v", err)
	}
	if err := l.do(ctx, "POST", "/echo", "application/json", []byte(`x`), &c); err != nil || c.ID != "POST application/json x Bearer tok" {
		t.Fatalf("POST: %+v, %v", c, err)
	}
	var he *httpError
	if err := l.do(ctx, "GET", "/missing", "", nil, nil); !errors.As(err, &he) || he.status != 404 || !strings.Contains(he.body, "no such thing") {
		t.Fatalf("404: %v", err)
	}
	if err := l.do(ctx, "GET", "/len", "", nil, &c); err != nil {
		t.Fatal(err)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for sequential requests, want 1 (keep-alive)", n)
	}
}
