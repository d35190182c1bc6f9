package main

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// TestQueuedWorkTraced runs the server with tracing on against an
// OTLP/HTTP receiver. A follow (with a traceparent) writes both sides of
// the pair and the follower's feed within the request: its round trips
// are children of the request's span. A create-pin (with another) queues
// the pin's feed fan-out, which runs after the response: its span
// (feed.fanout) is in a trace of its own, linked to the create's span,
// says what it wrote (kind, rows, shards, hosts) and has a child per host
// with the host and its shards. The cache_outbox drain of the create's
// invalidations is linked to the create's span too. No span carries the
// token, the body or a DSN.
func TestQueuedWorkTraced(t *testing.T) {
	s, sink := startTracedServer(t)
	author := s.create("/v1/users", map[string]any{"username": "queued-author"})
	follower := s.create("/v1/users", map[string]any{"username": "queued-follower"})
	board := s.create("/v1/boards", map[string]any{"owner_id": author.ID, "name": "queued"})

	const (
		marker      = "queued-marker-7c2d"
		followTrace = "5bf92f3577b34da6a3ce929d0e0e4736"
		createTrace = "6bf92f3577b34da6a3ce929d0e0e4736"
	)
	auth := "Bearer " + e2eAdminToken
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+follower.ID+"/following/"+author.ID, nil,
		"Authorization", auth, "traceparent", "00-"+followTrace+"-00f067aa0ba902b7-01")
	var pin object
	s.must(http.StatusCreated, http.MethodPost, "/v1/pins",
		map[string]any{"board_id": board.ID, "description": marker},
		"Authorization", auth, "traceparent", "00-"+createTrace+"-00f067aa0ba902b8-01").decode(t, &pin)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if feed, _ := s.all("/v1/users/"+follower.ID+"/feed", 10); slices.Contains(feed, pin.ID) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the pin did not reach its author's follower's feed within 10 s")
		}
	}
	spans := sink.after(t, s, e2eAdminToken, marker)
	server := func(traceID string) *tracepb.Span {
		for _, sp := range spans {
			if sp.Kind == tracepb.Span_SPAN_KIND_SERVER && hexID(sp.TraceId) == traceID {
				return sp
			}
		}
		t.Fatalf("no server span in trace %s among %d spans", traceID, len(spans))
		return nil
	}
	children := func(parent *tracepb.Span, name string) []*tracepb.Span {
		var out []*tracepb.Span
		for _, sp := range spans {
			if sp.Name == name && bytes.Equal(sp.ParentSpanId, parent.SpanId) && bytes.Equal(sp.TraceId, parent.TraceId) {
				out = append(out, sp)
			}
		}
		return out
	}
	linkedTo := func(name string, req *tracepb.Span) *tracepb.Span {
		for _, sp := range spans {
			for _, l := range sp.Links {
				if sp.Name == name && bytes.Equal(l.TraceId, req.TraceId) && bytes.Equal(l.SpanId, req.SpanId) {
					return sp
				}
			}
		}
		return nil
	}

	// The follow's work runs within it: the pair's two sides (two
	// shards' round trips, on the follower's and the author's shard).
	follow := server(followTrace)
	shards := map[int64]bool{}
	for _, sp := range children(follow, "shard.roundtrip") {
		shards[attr(sp, "pinstore.shard").GetIntValue()] = true
	}
	if want := map[int64]bool{int64(shardOf(t, follower.ID)): true, int64(shardOf(t, author.ID)): true}; len(shards) < len(want) {
		t.Errorf("the follow's round trips touch shards %v, want the follower's and the author's %v", shards, want)
	}

	create := server(createTrace)
	fan := linkedTo("feed.fanout", create)
	if fan == nil {
		t.Fatalf("no feed.fanout span linked to the create's span")
	}
	t.Logf("feed.fanout %s links %d", attrString(fan), len(fan.Links))
	if hexID(fan.TraceId) == createTrace || len(fan.ParentSpanId) != 0 || fan.Kind != tracepb.Span_SPAN_KIND_CONSUMER {
		t.Errorf("feed.fanout is in the create's trace or has a parent (kind %v)", fan.Kind)
	}
	if attr(fan, "pinstore.work").GetStringValue() != "feed fan-out" || attr(fan, "pinstore.fanout.adds").GetIntValue() < 1 ||
		attr(fan, "pinstore.fanout.rows").GetIntValue() < 1 || attr(fan, "pinstore.shards").GetIntValue() < 1 ||
		attr(fan, "pinstore.hosts").GetIntValue() < 1 || attr(fan, "pinstore.fanout.retried").GetIntValue() != 0 {
		t.Errorf("feed.fanout attributes: %s", attrString(fan))
	}
	hosts := children(fan, "feed.fanout.host")
	if len(hosts) == 0 {
		t.Fatal("feed.fanout has no host span")
	}
	var onFollowerShard bool
	for _, h := range hosts {
		if attr(h, "pinstore.host").GetStringValue() == "" || attr(h, "pinstore.fanout.rows").GetIntValue() < 1 {
			t.Errorf("feed.fanout.host attributes: %s", attrString(h))
		}
		for _, v := range attr(h, "pinstore.shards").GetArrayValue().GetValues() {
			onFollowerShard = onFollowerShard || v.GetIntValue() == int64(shardOf(t, follower.ID))
		}
	}
	if !onFollowerShard {
		t.Errorf("no feed.fanout.host span names the follower's shard %d", shardOf(t, follower.ID))
	}

	drain := linkedTo("cache.outbox.drain", create)
	if drain == nil {
		t.Fatal("no cache.outbox.drain span linked to the create's span")
	}
	if attr(drain, "pinstore.work").GetStringValue() != "cache outbox drain" || attr(drain, "pinstore.cache.rows").GetIntValue() < 1 ||
		len(children(drain, "cache.outbox.host")) == 0 || strings.HasPrefix(hexID(drain.TraceId), createTrace) {
		t.Errorf("cache.outbox.drain: %s; host spans %d", attrString(drain), len(children(drain, "cache.outbox.host")))
	}
}
