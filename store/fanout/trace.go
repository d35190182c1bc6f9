package fanout

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinstore/pinstore/internal/tracing"
	"github.com/pinstore/pinstore/store/topology"
)

// A batch runs after the requests that queued its jobs answered, so its
// span (feed.fanout) is the root of a trace of its own, linked to theirs
// (Job.From), with a child per host written (feed.fanout.host). A batch
// of jobs that no sampled request queued (the sweep's) is not traced.

// batchSpan starts the span of batch, when a sampled request queued one
// of its jobs; nil otherwise.
func batchSpan(ctx context.Context, batch []Job) (context.Context, trace.Span) {
	if !tracing.On() {
		return ctx, nil
	}
	var links tracing.Links
	var adds, removes, pulls int
	for _, j := range batch {
		links.Add(j.From)
		switch {
		case j.Pull:
			pulls++
		case j.Remove:
			removes++
		default:
			adds++
		}
	}
	return tracing.Queued(ctx, "feed.fanout", links,
		attribute.String("pinstore.work", "feed fan-out"),
		attribute.Int("pinstore.fanout.jobs", len(batch)),
		attribute.Int("pinstore.fanout.adds", adds),
		attribute.Int("pinstore.fanout.removes", removes),
		attribute.Int("pinstore.fanout.pulls", pulls),
	)
}

// endBatch ends span (when not nil) with what the batch wrote: feed rows
// (one per follower and pin), shards, hosts, and the jobs left to retry.
func endBatch(span trace.Span, rows map[int]*shardRows, hosts, retried int, err error) {
	if span == nil {
		return
	}
	n := 0
	for _, r := range rows {
		n += len(r.add) + len(r.remove) + len(r.pull)
	}
	span.SetAttributes(
		attribute.Int("pinstore.fanout.rows", n),
		attribute.Int("pinstore.shards", len(rows)),
		attribute.Int("pinstore.hosts", hosts),
		attribute.Int("pinstore.fanout.retried", retried),
	)
	if retried > 0 {
		tracing.Fail(span, err)
	}
	span.End()
}

// hostSpan starts the span of one host's transaction of a batch, under
// the batch's span when it records.
func hostSpan(ctx context.Context, h *topology.Host, shards []topology.Shard, rows map[int]*shardRows) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	ns := make([]int, len(shards))
	n := 0
	for i, sh := range shards {
		ns[i] = sh.N
		r := rows[sh.N]
		n += len(r.add) + len(r.remove) + len(r.pull)
	}
	return tracing.Child(ctx, "feed.fanout.host", trace.SpanKindClient,
		attribute.String("pinstore.host", h.Name),
		attribute.IntSlice("pinstore.shards", ns),
		attribute.Int("pinstore.fanout.rows", n),
		attribute.String("db.system.name", "mariadb"),
	)
}
