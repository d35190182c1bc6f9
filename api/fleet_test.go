package api

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/cluster/fleet"
)

// TestQuantile: the p99 the fleet route shows interpolates within the
// bucket the rank falls in, as Prometheus' histogram_quantile does.
func TestQuantile(t *testing.T) {
	for _, c := range []struct {
		name    string
		buckets map[float64]uint64
		count   uint64
		q, want float64
	}{
		{"no samples", map[float64]uint64{0.1: 0, math.Inf(1): 0}, 0, 0.99, 0},
		{"all in the first bucket", map[float64]uint64{0.1: 100, 1: 100, math.Inf(1): 100}, 100, 0.99, 0.099},
		{"within the second bucket", map[float64]uint64{0.1: 50, 1: 100, math.Inf(1): 100}, 100, 0.99, 0.1 + 0.9*49/50},
		{"past the last bound", map[float64]uint64{0.1: 0, 1: 0, math.Inf(1): 10}, 10, 0.99, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := quantile(c.q, c.buckets, c.count); math.Abs(got-c.want) > 1e-9 {
				t.Fatalf("quantile = %v, want %v", got, c.want)
			}
		})
	}
}

// TestRoundTripRates: the fleet route's per-host figures come from the
// round-trip metrics as the request figures do: totals since start, rates
// over the interval since the previous look (none on the first), a
// master's before its replicas', nothing for a host no series names.
func TestRoundTripRates(t *testing.T) {
	reg := prometheus.NewRegistry()
	secs := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "pinstore_shard_query_seconds", Buckets: []float64{.001, .01, .1}}, []string{"host", "role"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pinstore_shard_query_errors_total"}, []string{"host", "role"})
	reg.MustRegister(secs, errs)
	observe := func(host, role string, n int, d float64, failed int) {
		for range n {
			secs.WithLabelValues(host, role).Observe(d)
		}
		errs.WithLabelValues(host, role).Add(float64(failed))
	}
	look := func(rr *requestRates, at time.Time) []fleet.HostInfo {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		hosts := []fleet.HostInfo{{Name: "a"}, {Name: "b"}, {Name: "idle"}}
		rr.look(fams, hosts, at)
		return hosts
	}
	observe("a", "replica", 10, .005, 0)
	observe("a", "master", 100, .0005, 1)
	var rr requestRates
	t0 := time.Now()
	first := look(&rr, t0)
	if rts := first[0].RoundTrips; len(rts) != 2 || rts[0].Role != "master" || rts[0].Total != 100 || rts[0].Errors != 1 || rts[0].RatePerSec != 0 || rts[1].Role != "replica" {
		t.Fatalf("first look, host a: %+v", rts)
	}
	observe("a", "master", 40, .05, 4)
	observe("b", "master", 20, .0005, 0) // b's first series since the previous look: from zero
	hosts := look(&rr, t0.Add(2*time.Second))
	a, b := hosts[0].RoundTrips[0], hosts[1].RoundTrips[0]
	if a.Total != 140 || a.Errors != 5 || a.RatePerSec != 20 || a.ErrorsPerSec != 2 || a.WindowSeconds != 2 || a.P99Seconds <= .01 {
		t.Fatalf("second look, host a master: %+v", a)
	}
	if hosts[0].RoundTrips[1].RatePerSec != 0 {
		t.Fatalf("second look, host a replica had no round trips: %+v", hosts[0].RoundTrips[1])
	}
	if b.Total != 20 || b.RatePerSec != 10 || b.P99Seconds > .001 {
		t.Fatalf("second look, host b master: %+v", b)
	}
	if len(hosts[2].RoundTrips) != 0 {
		t.Fatalf("a host with no series: %+v", hosts[2].RoundTrips)
	}
}
