package tracing

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestConfigured: tracing is asked for by either endpoint, and
// OTEL_SDK_DISABLED=true wins over both.
func TestConfigured(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "TRUE"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "false"}, false},
	} {
		if got := Configured(env(c.env)); got != c.want {
			t.Errorf("Configured(%v) = %v, want %v", c.env, got, c.want)
		}
	}
}

// TestSetupOff: with no endpoint Setup leaves tracing off, and a request
// then allocates nothing for it.
func TestSetupOff(t *testing.T) {
	stop, err := Setup(context.Background(), "pinstore", env(nil))
	if err != nil || On() {
		t.Fatalf("Setup without an endpoint: on %v, err %v", On(), err)
	}
	_ = stop(context.Background())
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		if On() {
			t.Fatal("on")
		}
		_, sp := Child(ctx, "x", trace.SpanKindClient)
		if sp != nil {
			t.Fatal("a span while off")
		}
	}); n != 0 {
		t.Errorf("off: %v allocations a call, want 0", n)
	}
}

// TestSamplerFrom: the standard sampler names, and refusals of the rest.
func TestSamplerFrom(t *testing.T) {
	for _, name := range []string{"", "always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off", "parentbased_traceidratio"} {
		if _, err := samplerFrom(name, "0.5"); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
	for _, c := range [][2]string{{"jaeger_remote", ""}, {"traceidratio", "2"}, {"traceidratio", "half"}} {
		if _, err := samplerFrom(c[0], c[1]); err == nil {
			t.Errorf("%q %q accepted", c[0], c[1])
		}
	}
	stop, err := Setup(context.Background(), "pinstore", env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_SAMPLER": "nope"}))
	if err == nil || On() {
		t.Errorf("Setup with an unknown sampler: on %v, err %v", On(), err)
	}
	_ = stop(context.Background())
}

// inMemory turns tracing on with spans kept in memory, until the test
// ends.
func inMemory(t *testing.T) *tracetest.InMemoryExporter {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(requestRooted{sdktrace.AlwaysSample()}))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	on.Store(true)
	t.Cleanup(func() { on.Store(false); otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) })
	return exp
}

// TestOperationProgressEvents: a control-plane command's progress lines
// reach its writer unchanged and become its span's events; its error
// marks the span.
func TestOperationProgressEvents(t *testing.T) {
	exp := inMemory(t)
	var out bytes.Buffer
	_, w, end := Operation(context.Background(), "pinstore move-shards", &out)
	_, _ = w.Write([]byte("move-shards: copy\nmove-shards: catch-"))
	_, _ = w.Write([]byte("up 1\nmove-shards: done"))
	end(errors.New("boom"))
	if out.String() != "move-shards: copy\nmove-shards: catch-up 1\nmove-shards: done" {
		t.Errorf("progress written: %q", out.String())
	}
	spans := exp.GetSpans()
	if len(spans) != 1 || spans[0].Name != "pinstore move-shards" {
		t.Fatalf("spans: %v", spans)
	}
	var got []string
	for _, ev := range spans[0].Events {
		if ev.Name != "progress" {
			continue
		}
		for _, a := range ev.Attributes {
			got = append(got, a.Value.AsString())
		}
	}
	want := []string{"move-shards: copy", "move-shards: catch-up 1", "move-shards: done"}
	if len(got) != len(want) {
		t.Fatalf("events %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d %q, want %q", i, got[i], want[i])
		}
	}
	if spans[0].Status.Code != 1 { // codes.Error
		t.Errorf("status %v, want an error", spans[0].Status)
	}
}

// TestUnparentedClientSpansDropped: a client span without a parent (a
// background Redis command) is not sampled; under a request's span it is,
// and a request's span continues the client's traceparent.
func TestUnparentedClientSpansDropped(t *testing.T) {
	exp := inMemory(t)
	_, sp := Tracer().Start(context.Background(), "evalsha", trace.WithSpanKind(trace.SpanKindClient))
	if sp.IsRecording() {
		t.Error("an unparented client span records")
	}
	sp.End()
	r := httptest.NewRequest("GET", "/v1/pins/1", nil)
	r.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	ctx, req := StartRequest(context.Background(), r)
	_, child := Child(ctx, "shard.roundtrip", trace.SpanKindClient)
	if child == nil || !child.IsRecording() {
		t.Fatal("a request's child span does not record")
	}
	child.End()
	EndRequest(req, "GET", "/v1/pins/{id}", 200, "service")
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want the child and the request's", len(spans))
	}
	if got := spans[1].Parent.SpanID().String(); got != "00f067aa0ba902b7" || spans[1].Name != "GET /v1/pins/{id}" {
		t.Errorf("request span %q under %s", spans[1].Name, got)
	}
	if TraceID(req) != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("trace id %q", TraceID(req))
	}
}
