package store

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinstore/pinstore/internal/tracing"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// The drain of cache_outbox rows (cleanTaken) runs after the writes that
// recorded them were acknowledged: its span (cache.outbox.drain) is the
// root of a trace of its own, linked to the sampled requests whose
// invalidations it clears, with a child per host (cache.outbox.host). A
// drain with no such request, and the sweep and resends of invalidations
// Redis did not take at first, are not traced.

// drainSpan starts the span of draining taken, linked to links; nil when
// no sampled request is among them.
func drainSpan(ctx context.Context, taken map[shardsql.DB][]shardsql.CachedMark, links tracing.Links) (context.Context, trace.Span) {
	if links.Len() == 0 {
		return ctx, nil
	}
	n := 0
	for _, marks := range taken {
		n += len(marks)
	}
	return tracing.Queued(ctx, "cache.outbox.drain", links,
		attribute.String("pinstore.work", "cache outbox drain"),
		attribute.Int("pinstore.cache.rows", n),
		attribute.Int("pinstore.shards", len(taken)),
	)
}

// drainHostSpan starts the span of one host's round trip of a drain,
// under the drain's span when it records.
func drainHostSpan(ctx context.Context, h *topology.Host, marks map[shardsql.DB][]shardsql.CachedMark) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	ns := make([]int, 0, len(marks))
	n := 0
	for db, m := range marks {
		ns = append(ns, db.N)
		n += len(m)
	}
	return tracing.Child(ctx, "cache.outbox.host", trace.SpanKindClient,
		attribute.String("pinstore.host", h.Name),
		attribute.IntSlice("pinstore.shards", ns),
		attribute.Int("pinstore.cache.rows", n),
		attribute.String("db.system.name", "mariadb"),
		attribute.String("db.operation.name", "DELETE"),
	)
}

// endSpan ends span when it is not nil.
func endSpan(span trace.Span) {
	if span != nil {
		span.End()
	}
}
