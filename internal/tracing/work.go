package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Phase runs one step of a long command (a move's phase, a backup's step)
// as a child span named name of the span in ctx, when that span records;
// the command's progress lines stay events of its own span. fn's error
// marks the step's span, and is returned.
func Phase(ctx context.Context, name string, fn func(context.Context) error) error {
	ctx, span := Child(ctx, name, trace.SpanKindInternal)
	err := fn(ctx)
	if span != nil {
		Fail(span, err)
		span.End()
	}
	return err
}

// Link names a sampled span (a request's) that queued work links to: its
// trace and span ids, 24 bytes to keep with each queued item. The zero
// Link names none.
type Link struct {
	Trace trace.TraceID
	ID    trace.SpanID
}

// Origin is the sampled span in ctx (a request's), for work the request
// queues to run after it answers (Queued); the zero Link when there is
// none, or tracing is off.
func Origin(ctx context.Context) Link {
	if !on.Load() {
		return Link{}
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return Link{}
	}
	return Link{sc.TraceID(), sc.SpanID()}
}

// maxLinks bounds the links of one span of queued work (a batch of a
// thousand pins links to its first maxLinks requests).
const maxLinks = 64

// Links is a bounded set of the origins of queued work, for Queued.
type Links struct{ scs []Link }

// Add keeps s when it names a span and there is room; it reports whether
// the set is full.
func (l *Links) Add(s Link) bool {
	if s.Trace.IsValid() && s.ID.IsValid() && len(l.scs) < maxLinks {
		l.scs = append(l.scs, s)
	}
	return len(l.scs) >= maxLinks
}

// Len is the number of origins kept.
func (l *Links) Len() int { return len(l.scs) }

// Queued starts the span of work that requests queued and that runs after
// they answered (a feed fan-out batch, a cache outbox drain): the root of
// a trace of its own, linked to the span of each request in links (it
// outlives them, so it is no child of theirs), sampled because they were.
// With no link, or tracing off, it returns ctx and a nil span: work no
// sampled request asked for is not traced. End a non-nil span only.
func Queued(ctx context.Context, name string, links Links, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !on.Load() || len(links.scs) == 0 {
		return ctx, nil
	}
	ls := make([]trace.Link, len(links.scs))
	for i, s := range links.scs {
		ls[i] = trace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: s.Trace, SpanID: s.ID, TraceFlags: trace.FlagsSampled, Remote: true,
		})}
	}
	return Tracer().Start(ctx, name, trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(ls...), trace.WithAttributes(attrs...))
}
