package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

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
			s := &Server{tokens: f, logger: slog.New(slog.DiscardHandler)}
			h := s.consistency(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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

// BenchmarkConsistencyMiddleware is what the middleware adds, with the
// tokens of package replicas, to a read that sends no token (the common
// request) and to a write.
func BenchmarkConsistencyMiddleware(b *testing.B) {
	for _, tt := range []struct{ name, method string }{{"read", http.MethodGet}, {"write", http.MethodPost}} {
		b.Run(tt.name, func(b *testing.B) {
			s := &Server{tokens: replicas.Tokens{}, logger: slog.New(slog.DiscardHandler)}
			h := s.consistency(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
			req := httptest.NewRequest(tt.method, "/v1/pins/1", nil)
			w := &statusWriter{ResponseWriter: httptest.NewRecorder()}
			b.ReportAllocs()
			for b.Loop() {
				w.status = 0
				h.ServeHTTP(w, req)
			}
		})
	}
}
