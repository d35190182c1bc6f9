package api

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/store/replicas"
)

// fakeTokens records what the middleware asked and answers a fixed token.
type fakeTokens struct {
	write bool
	sent  string
}

type tokenKey struct{}

func (f *fakeTokens) Begin(ctx context.Context, write bool, token string) (context.Context, error) {
	if token == "bad" {
		return ctx, errors.New("does not parse")
	}
	f.write, f.sent = write, token
	return context.WithValue(ctx, tokenKey{}, "merged("+token+")"), nil
}

func (f *fakeTokens) Token(ctx context.Context) string {
	s, _ := ctx.Value(tokenKey{}).(string)
	return s
}

func TestConsistencyMiddleware(t *testing.T) {
	tests := []struct {
		name, method, path, sent string
		status                   int
		wantStatus               int
		wantHeader               string
		wantWrite                bool
	}{
		{"a write answers its token", http.MethodPost, "/v1/pins", "a=0-1-1", http.StatusCreated, http.StatusCreated, "merged(a=0-1-1)", true},
		{"a read", http.MethodGet, "/v1/pins/1", "a=0-1-1", http.StatusOK, http.StatusOK, "merged(a=0-1-1)", false},
		{"an error carries none", http.MethodGet, "/v1/pins/1", "a=0-1-1", http.StatusNotFound, http.StatusNotFound, "", false},
		{"a bad token is the client's error", http.MethodGet, "/v1/pins/1", "bad", http.StatusOK, http.StatusBadRequest, "", false},
		{"operational routes are left alone", http.MethodGet, "/healthz", "bad", http.StatusOK, http.StatusOK, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeTokens{}
			s := observingServer(t, f)
			h := s.observe(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
			}))
			req := httptest.NewRequest(tt.method, tt.path, nil)
			req.Header.Set(ConsistencyHeader, tt.sent)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus || rec.Header().Get(ConsistencyHeader) != tt.wantHeader {
				t.Fatalf("status %d, token %q; want %d, %q", rec.Code, rec.Header().Get(ConsistencyHeader), tt.wantStatus, tt.wantHeader)
			}
			if tt.wantStatus < 300 && tt.path != "/healthz" && f.write != tt.wantWrite {
				t.Fatalf("Begin got write=%v, want %v", f.write, tt.wantWrite)
			}
		})
	}
}

// observingServer is a Server with only what observe needs, and tokens.
func observingServer(tb testing.TB, tokens Consistency) *Server {
	tb.Helper()
	m, err := newHTTPMetrics(prometheus.NewRegistry())
	if err != nil {
		tb.Fatal(err)
	}
	return &Server{tokens: tokens, logger: slog.New(slog.DiscardHandler), accessLog: io.Discard, metrics: m}
}

// BenchmarkConsistencyMiddleware is the outermost middleware (observe)
// without consistency tokens and with those of package replicas, for a
// read that sends no token (the common request) and for a write.
func BenchmarkConsistencyMiddleware(b *testing.B) {
	for _, tt := range []struct {
		name, method string
		tokens       Consistency
	}{{"read-none", http.MethodGet, nil}, {"read", http.MethodGet, replicas.Tokens{}}, {"write", http.MethodPost, replicas.Tokens{}}} {
		b.Run(tt.name, func(b *testing.B) {
			s := observingServer(b, tt.tokens)
			h := s.observe(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
			req := httptest.NewRequest(tt.method, "/v1/pins/1", nil)
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				h.ServeHTTP(w, req)
			}
		})
	}
}
