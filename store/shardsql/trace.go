package shardsql

import (
	"context"
	"database/sql"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinstore/pinstore/internal/tracing"
)

// A Tx's round trips are traced here, by hand, not by a wrapper around
// the driver (such as otelsql): the connections Connector opens are keyed
// in sockets by the driver.Conn it hands database/sql (the driver's,
// inside its own meter), which a wrapping driver from outside would
// hide, and Tx sends its queued statements, START TRANSACTION and COMMIT
// as one text, so one span a round trip is what a driver-level span per
// statement could not say. The Tx knows its shard, host and role once
// its caller names them (Trace).

// txTrace is what a traced Tx's round-trip spans carry.
type txTrace struct {
	shard int
	host  string
	role  string
}

// Trace names the shard, host and role ("master" or "replica") of t's
// round trips, whose spans (shard.roundtrip) then go under the span in
// each statement's context, when tracing is on and that span records.
func (t *Tx) Trace(shard int, host, role string) {
	t.trace = &txTrace{shard: shard, host: host, role: role}
}

// roundTrip starts the span of one round trip of t sending query (the
// caller's statement: its first word is the statement kind), or returns a
// nil span when t is not traced or nothing records.
func (t *Tx) roundTrip(ctx context.Context, query string) (context.Context, trace.Span) {
	if t.trace == nil {
		return ctx, nil
	}
	return tracing.Child(ctx, "shard.roundtrip", trace.SpanKindClient,
		attribute.Int("pinstore.shard", t.trace.shard),
		attribute.String("pinstore.host", t.trace.host),
		attribute.String("pinstore.shard.role", t.trace.role),
		attribute.String("db.system.name", "mariadb"),
		attribute.String("db.operation.name", tracing.StatementKind(query)),
	)
}

// endRoundTrip ends span (when not nil) with err and, for a statement
// that changed rows, their number.
func endRoundTrip(span trace.Span, res sql.Result, err error) {
	if span == nil {
		return
	}
	if err == nil && res != nil {
		if n, rerr := res.RowsAffected(); rerr == nil {
			span.SetAttributes(attribute.Int64("db.response.affected_rows", n))
		}
	}
	tracing.Fail(span, err)
	span.End()
}
