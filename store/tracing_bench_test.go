package store

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/tracing"
	"github.com/pinstore/pinstore/model"
)

// BenchmarkCreatePinTracing is what tracing costs a create-pin against
// the real MariaDB and Redis: each create runs under a request span, as
// the API starts it, with tracing off, sampling 1 % and sampling every
// request, the spans exported over OTLP/HTTP to a sink that discards
// them.
//
//	go test -run '^$' -bench CreatePinTracing -benchtime 2000x -count 3 ./store
func BenchmarkCreatePinTracing(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer sink.Close()
	s, _ := openTestB(b)
	u, err := s.CreateUser(ctx, model.UserDoc{Username: "tracebench"})
	if err != nil {
		b.Fatal(err)
	}
	bd, err := s.Create(ctx, idcodec.TypeBoard, &model.BoardDoc{OwnerID: model.ID(u.ID), Name: "b"}, 0)
	if err != nil {
		b.Fatal(err)
	}
	doc := model.PinDoc{BoardID: model.ID(bd.ID), Link: "https://example.com/p"}
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
			r := httptest.NewRequest(http.MethodPost, "/v1/pins", nil)
			b.ReportAllocs()
			for b.Loop() {
				rctx, span := tracing.StartRequest(ctx, r)
				if _, err := s.CreatePin(rctx, doc, 0); err != nil {
					b.Fatal(err)
				}
				tracing.EndRequest(span, http.MethodPost, "/v1/pins", http.StatusCreated, "service")
			}
		})
	}
}
