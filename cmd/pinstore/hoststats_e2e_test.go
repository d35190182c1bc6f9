package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/fleet"
)

// hostSeries is a round-trip series of the server's /metrics for one host
// as master: the query count or the error count.
func hostSeries(metric, host string) string {
	return fmt.Sprintf("%s{host=%q,role=\"master\"}", metric, host)
}

// fleetTrips is each host's round trips as master, from the fleet route.
func (s *server) fleetTrips() map[string]fleet.RoundTripStats {
	s.t.Helper()
	var st fleet.FleetStatus
	s.must(http.StatusOK, http.MethodGet, "/v1/admin/fleet", nil).decode(s.t, &st)
	out := map[string]fleet.RoundTripStats{}
	for _, h := range st.Hosts {
		for _, rt := range h.RoundTrips {
			if rt.Role == "master" {
				out[h.Name] = rt
			}
		}
	}
	return out
}

// TestServeHostStats: the server measures its round trips to each MySQL
// host. With traffic to both hosts, /metrics counts queries on both and
// the fleet route shows a query rate and a p99 for each; with h1 stopped,
// the requests that reach it fail, and its error count and error rate
// rise while h0's stay at zero.
func TestServeHostStats(t *testing.T) {
	th := startTwoHosts(t)
	s := th.server
	s.fleetTrips() // the first look: the next one's rates are since now

	var pins []string
	for _, host := range []string{"h0", "h1"} {
		u := th.userOn(host, "stats"+host)
		b := s.create("/v1/boards", map[string]any{"owner_id": u.ID, "name": "b"})
		for i := range 3 {
			p := s.create("/v1/pins", map[string]any{"board_id": b.ID, "description": fmt.Sprint("pin ", i)})
			s.get("/v1/pins/" + p.ID)
			pins = append(pins, p.ID)
		}
	}
	queries := map[string]float64{}
	for _, host := range []string{"h0", "h1"} {
		queries[host] = s.metric(hostSeries("pinstore_shard_query_seconds_count", host))
		if queries[host] == 0 {
			t.Fatalf("/metrics counts no query to %s after pins were created and read there", host)
		}
		if n := s.metric(hostSeries("pinstore_shard_query_errors_total", host)); n != 0 {
			t.Fatalf("%s: %v errors with both hosts up", host, n)
		}
	}
	trips := s.fleetTrips()
	for _, host := range []string{"h0", "h1"} {
		rt, ok := trips[host]
		if !ok || rt.Total == 0 || rt.RatePerSec <= 0 || rt.WindowSeconds <= 0 || rt.P99Seconds <= 0 || rt.ErrorsPerSec != 0 {
			t.Fatalf("fleet route, %s as master: %+v (present %v), want queries, a rate and a p99, no errors", host, rt, ok)
		}
	}

	// h1 stops: reads and writes of its objects fail, h0's still work.
	th.h1.Stop(t)
	for _, id := range pins[3:] {
		s.fail(http.StatusServiceUnavailable, "unavailable", http.MethodGet, "/v1/pins/"+id, nil)
	}
	for _, id := range pins[:3] {
		s.get("/v1/pins/" + id)
	}
	if n := s.metric(hostSeries("pinstore_shard_query_errors_total", "h1")); n < 3 {
		t.Fatalf("h1 down: %v errors after 3 failed reads of its pins", n)
	}
	if n := s.metric(hostSeries("pinstore_shard_query_errors_total", "h0")); n != 0 {
		t.Fatalf("h1 down: h0 counts %v errors", n)
	}
	if n := s.metric(hostSeries("pinstore_shard_query_seconds_count", "h0")); n <= queries["h0"] {
		t.Fatalf("h0's queries did not rise (%v → %v) while its pins were read", queries["h0"], n)
	}
	time.Sleep(10 * time.Millisecond) // a window that is not zero
	trips = s.fleetTrips()
	if h1 := trips["h1"]; h1.Errors < 3 || h1.ErrorsPerSec <= 0 {
		t.Fatalf("fleet route, h1 down: %+v, want its errors and an error rate", h1)
	}
	if h0 := trips["h0"]; h0.Errors != 0 || h0.ErrorsPerSec != 0 || h0.RatePerSec <= 0 {
		t.Fatalf("fleet route, h1 down: h0 %+v, want a rate and no errors", h0)
	}
}
