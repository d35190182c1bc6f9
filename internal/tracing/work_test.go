package tracing

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestPhaseChildren: a command's steps are child spans of its span, a
// failed step marked; without a recording span a step runs untraced.
func TestPhaseChildren(t *testing.T) {
	exp := inMemory(t)
	if err := Phase(context.Background(), "backup orphan", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	ctx, _, end := Operation(context.Background(), "pinstore backup", &discard{})
	_ = Phase(ctx, "backup copy", func(ctx context.Context) error {
		if !trace.SpanFromContext(ctx).IsRecording() {
			t.Error("the step's context holds no recording span")
		}
		return nil
	})
	boom := errors.New("boom")
	if err := Phase(ctx, "backup checksums", func(context.Context) error { return boom }); err != boom {
		t.Errorf("Phase returned %v, want the step's error", err)
	}
	end(boom)
	spans := exp.GetSpans()
	if len(spans) != 3 {
		t.Fatalf("%d spans (%v), want the command's and its two steps'", len(spans), spans)
	}
	root := spans[2]
	for i, want := range []string{"backup copy", "backup checksums"} {
		if spans[i].Name != want || spans[i].Parent.SpanID() != root.SpanContext.SpanID() {
			t.Errorf("span %d: %q under %s, want %q under the command's", i, spans[i].Name, spans[i].Parent.SpanID(), want)
		}
	}
	if spans[1].Status.Code != 1 || spans[0].Status.Code == 1 {
		t.Errorf("statuses %v %v: want only the failed step marked", spans[0].Status, spans[1].Status)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestQueuedLinked: queued work's span is a new trace linked to the
// sampled requests that queued it, and sampled because they were even
// when the sampler would drop a new trace; without a sampled origin there
// is no span.
func TestQueuedLinked(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithSampler(requestRooted{sdktrace.ParentBased(sdktrace.NeverSample())}))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	on.Store(true)
	t.Cleanup(func() { on.Store(false); otel.SetTracerProvider(prev); _ = tp.Shutdown(context.Background()) })

	sampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, Remote: true})
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{3}, SpanID: trace.SpanID{4}, Remote: true})
	reqCtx := trace.ContextWithSpanContext(context.Background(), sampled)
	if o := Origin(reqCtx); o.Trace != sampled.TraceID() || o.ID != sampled.SpanID() || Origin(trace.ContextWithSpanContext(context.Background(), unsampled)) != (Link{}) {
		t.Fatal("Origin: want the sampled span context only")
	}

	var none Links
	none.Add(Origin(trace.ContextWithSpanContext(context.Background(), unsampled)))
	if _, sp := Queued(context.Background(), "feed.fanout", none); sp != nil {
		t.Fatal("a span for work no sampled request queued")
	}
	var links Links
	for range maxLinks + 10 {
		links.Add(Origin(reqCtx))
	}
	if links.Len() != maxLinks {
		t.Errorf("%d links kept, want at most %d", links.Len(), maxLinks)
	}
	_, sp := Queued(reqCtx, "feed.fanout", links, attribute.Int("pinstore.fanout.jobs", 3))
	if sp == nil || !sp.IsRecording() {
		t.Fatal("queued work of a sampled request is not sampled")
	}
	sp.End()
	got := exp.GetSpans()
	if len(got) != 1 {
		t.Fatalf("%d spans", len(got))
	}
	s := got[0]
	if s.Parent.IsValid() || s.SpanContext.TraceID() == sampled.TraceID() {
		t.Errorf("queued work is in the request's trace (parent %v)", s.Parent)
	}
	if len(s.Links) != maxLinks || s.Links[0].SpanContext.SpanID() != sampled.SpanID() || s.SpanKind != trace.SpanKindConsumer {
		t.Errorf("links %d (first %v), kind %v", len(s.Links), s.Links[0].SpanContext, s.SpanKind)
	}
}
