package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/auth"
	"github.com/pinstore/pinstore/internal/tracing"
)

// BenchmarkServeTracing is BenchmarkServeCachedGet's service-token get
// with tracing off, on at 1% sampling and on at 100%, the spans exported
// over OTLP/HTTP to a local receiver that discards them: what the request
// span, its sampling and its export cost a request above the store.
func BenchmarkServeTracing(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer sink.Close()
	pin, _, st := cachedPin()
	authn := benchAuthenticator(b)
	for _, c := range []struct{ name, ratio string }{{"off", ""}, {"sampled-1pct", "0.01"}, {"sampled-100pct", "1"}} {
		b.Run(c.name, func(b *testing.B) {
			env := map[string]string{}
			if c.ratio != "" {
				env = map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": sink.URL, "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": c.ratio}
			}
			stop, err := tracing.Setup(context.Background(), "pinstore-bench", func(k string) string { return env[k] })
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = stop(context.Background()) }()
			if tracing.On() != (c.ratio != "") {
				b.Fatalf("tracing on: %v", tracing.On())
			}
			s, err := New(Config{Store: st, Logger: slog.New(slog.DiscardHandler), AccessLog: io.Discard, Registry: prometheus.NewRegistry(), Auth: auth.Middleware(authn, AuthFailure(nil))})
			if err != nil {
				b.Fatal(err)
			}
			r := httptest.NewRequest(http.MethodGet, "/v1/pins/"+idString(pin), nil)
			r.Header.Set("Authorization", "Bearer "+benchSecret)
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
