package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/auth"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// benchStore answers every read by id with one stored pin, as a warm
// object cache would, and records nothing.
type benchStore struct {
	*fakeStore
	pin model.Object
}

func (b *benchStore) Get(_ context.Context, id uint64, typ idcodec.Type) (model.Object, error) {
	o := b.pin
	o.ID, o.Type = id, typ
	return o, nil
}

// cachedPin is a benchStore holding a pin of usual size, its id and its
// owner's.
func cachedPin() (pin, user uint64, st *benchStore) {
	pin = idcodec.MustEncode(3, idcodec.TypePin, 9)
	board := idcodec.MustEncode(3, idcodec.TypeBoard, 1)
	user = idcodec.MustEncode(3, idcodec.TypeUser, 1)
	at := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	st = &benchStore{fakeStore: &fakeStore{}, pin: model.Object{Version: 3, CreatedAt: at, UpdatedAt: at, Counts: []int64{1, 2, 3},
		Doc: []byte(`{"board_id":"` + idString(board) + `","owner_id":"` + idString(user) + `","link":"https://example.com/p/9","description":"a pin with a description of usual length","image_url":"https://img.example.com/9.jpg","active":true}`)}}
	return pin, user, st
}

// discardWriter is a ResponseWriter that keeps the headers and drops the
// body, so the benchmark measures the server, not a recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

// The benchmarks' service token (scope read) and user-token secret.
const (
	benchSecret     = "bench-service-token-0123456789abcdef"
	benchUserSecret = "bench-user-token-secret-0123456789abcdef"
)

// benchAuthenticator accepts benchSecret and user tokens signed with
// benchUserSecret, at a rate limit no benchmark reaches.
func benchAuthenticator(b *testing.B) *auth.Authenticator {
	tokens, err := auth.ParseServiceTokens([]byte(auth.HashLine("bench", auth.ScopeRead, benchSecret)))
	if err != nil {
		b.Fatal(err)
	}
	authn, err := auth.New(auth.Config{Service: tokens, UserSecret: []byte(benchUserSecret), Rate: 1e9, Burst: 1e9})
	if err != nil {
		b.Fatal(err)
	}
	return authn
}

// BenchmarkServeCachedGet is pinstore's own work for a cached GET
// /v1/pins/{id} above the store: routing, the middleware (request id,
// panic recovery, metrics, access log), authentication and the rate limit
// when on, and the response, with an access log that discards its lines.
func BenchmarkServeCachedGet(b *testing.B) {
	pin, user, st := cachedPin()
	const secret = benchSecret
	authn := benchAuthenticator(b)
	signer, _ := auth.NewSigner([]byte(benchUserSecret))
	userTok, err := signer.Mint(user, time.Now().Add(time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name, token string
		auth        func(http.Handler) http.Handler
	}{
		{"auth-off", "", nil},
		{"service-token", secret, auth.Middleware(authn, AuthFailure(nil))},
		{"user-token", userTok, auth.Middleware(authn, AuthFailure(nil))},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, err := New(Config{Store: st, Logger: slog.New(slog.DiscardHandler), AccessLog: io.Discard, Registry: prometheus.NewRegistry(), Auth: c.auth})
			if err != nil {
				b.Fatal(err)
			}
			r := httptest.NewRequest(http.MethodGet, "/v1/pins/"+idString(pin), nil)
			if c.token != "" {
				r.Header.Set("Authorization", "Bearer "+c.token)
			}
			w := &discardWriter{h: http.Header{}}
			s.ServeHTTP(w, r)
			if w.h.Get("ETag") == "" {
				b.Fatalf("no ETag: not a 200 (%v)", w.h)
			}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				s.ServeHTTP(w, r)
			}
		})
	}
}

// edgeStore answers every edge check with held, and the checked objects
// with its stored pin, as a warm edge cache would.
type edgeStore struct {
	*benchStore
	held bool
}

func (e *edgeStore) HasManyLive(_ context.Context, _ model.Mapping, _ uint64, tos []uint64) ([]bool, []model.Object, error) {
	has, objs := make([]bool, len(tos)), make([]model.Object, len(tos))
	for i, to := range tos {
		has[i], objs[i] = e.held, e.pin
		objs[i].ID, objs[i].Type = to, idcodec.TypeOf(to)
	}
	return has, objs, nil
}

// BenchmarkServeEdgeCheck is pinstore's own work for GET
// /v1/users/{id}/likes/{pin_id} above the store, as BenchmarkServeCachedGet
// measures a get's, with a service token: held (204) and not held (404,
// with its problem document).
func BenchmarkServeEdgeCheck(b *testing.B) {
	pin := idcodec.MustEncode(3, idcodec.TypePin, 9)
	user := idcodec.MustEncode(3, idcodec.TypeUser, 1)
	at := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	const secret = benchSecret
	authn := benchAuthenticator(b)
	for _, c := range []struct {
		name string
		held bool
		want int
	}{{"held", true, http.StatusNoContent}, {"not-held", false, http.StatusNotFound}} {
		b.Run(c.name, func(b *testing.B) {
			st := &edgeStore{benchStore: &benchStore{fakeStore: &fakeStore{}, pin: model.Object{Version: 3, CreatedAt: at, UpdatedAt: at,
				Doc: []byte(`{"owner_id":"` + idString(user) + `","active":true}`)}}, held: c.held}
			s, err := New(Config{Store: st, Logger: slog.New(slog.DiscardHandler), AccessLog: io.Discard, Registry: prometheus.NewRegistry(),
				Auth: auth.Middleware(authn, AuthFailure(nil))})
			if err != nil {
				b.Fatal(err)
			}
			r := httptest.NewRequest(http.MethodGet, "/v1/users/"+idString(user)+"/likes/"+idString(pin), nil)
			r.Header.Set("Authorization", "Bearer "+secret)
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, r)
			if rec.Code != c.want {
				b.Fatalf("status %d, want %d: %s", rec.Code, c.want, rec.Body)
			}
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				s.ServeHTTP(w, r)
			}
		})
	}
}
