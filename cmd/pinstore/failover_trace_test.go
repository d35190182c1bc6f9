package main

import (
	"maps"
	"net/http/httptest"
	"testing"
)

// TestFailoverTraced runs a planned `pinstore failover` of a host with a
// replica with tracing on against an OTLP/HTTP receiver: the command's
// span has a child span for each step the failover record names, inside
// it, and no span carries the DSN's credentials.
func TestFailoverTraced(t *testing.T) {
	f := startReplFleet(t, nil, 1)
	sink := &otlpSink{}
	collector := httptest.NewServer(sink)
	defer collector.Close()
	env := maps.Clone(f.env)
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.URL
	env["OTEL_TRACES_SAMPLER"] = "always_on"
	if out, err := runCmd(t, env, "failover", "--host", "a", "--to", f.hosts[0].replicas[0].Addr()); err != nil {
		t.Fatalf("failover: %v\n%s", err, out)
	}
	spans := sink.received(t, "@tcp(")
	steps := commandSteps(t, spans, "pinstore failover", "failover ")
	for _, w := range []string{"lock", "read map", "probe old master", "probe replicas", "choose", "hold writes", "fence old master", "wait applied", "promote", "repoint", "map rewrite"} {
		if !steps[w] {
			t.Errorf("no child span for the failover's step %q; its steps: %v", w, steps)
		}
	}
}
