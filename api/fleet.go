package api

import (
	"context"
	_ "embed"
	"math"
	"net/http"
	"sort"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/model"
)

// The fleet page (GET /fleet) is a static page embedded in the binary: it
// holds no fleet data. It asks for an admin token, keeps it in the
// browser's sessionStorage (never in a URL), and polls GET
// /v1/admin/fleet with it every 1.5 seconds; without a token the page
// shows a sign-in form, with a token the route refuses it shows the
// refusal and nothing else.

//go:embed fleet/index.html
var fleetHTML []byte

// fleetCSP lets the page run its own inline script and style and call
// this server only.
const fleetCSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// FleetHome is what the fleet route reads from where the map lives (the
// map file beside its lock, or etcd).
type FleetHome interface {
	// Move is the move in progress as its mover records it; nil, nil
	// when there is none.
	Move(ctx context.Context) (*fleet.MoveStatus, error)
	// Failover is the failover in progress, or the last one, as
	// recorded; nil, nil when none is.
	Failover(ctx context.Context) (*fleet.FailoverStatus, error)
	// LastRewrite is the note the last tool to rewrite the map left at
	// its top; empty when none (or the map could not be read).
	LastRewrite(ctx context.Context) string
}

// fleetPage: GET /fleet, the page. It is public: it carries no data.
func (s *Server) fleetPage(w http.ResponseWriter, r *http.Request) error {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", fleetCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	_, _ = w.Write(fleetHTML)
	return nil
}

// fleet: GET /v1/admin/fleet, what the fleet page shows (fleet.FleetStatus).
func (s *Server) fleet(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	st := fleet.FleetStatus{ShardMapInfo: s.ops.ShardMapInfo(ctx), Server: r.Host, Backups: []fleet.BackupStatus{}}
	if len(st.Servers) == 0 && st.Revision == 0 {
		// A map file: this server is the only one the route knows of.
		st.Servers = []fleet.ServerInfo{{ID: "this server", Addr: r.Host, Version: st.Version}}
	}
	if s.fleetHome != nil {
		mv, err := s.fleetHome.Move(ctx)
		if err != nil {
			st.MoveError = model.ErrorMessage(err)
		}
		st.Move = mv
		fo, err := s.fleetHome.Failover(ctx)
		if err != nil {
			st.FailoverError = model.ErrorMessage(err)
		}
		st.Failover = fo
		st.LastRewrite = s.fleetHome.LastRewrite(ctx)
	}
	if fams, err := s.registry.Gather(); err == nil {
		st.Requests = s.rates.look(fams, st.Hosts, time.Now())
		st.WriteBuffer, st.Backups = writeBuffer(fams), backups(fams)
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusOK, st)
}

// fleetRoutes are not counted in the request rates: the page's own
// polling would be most of an idle server's traffic.
var fleetRoutes = map[string]bool{"/v1/admin/fleet": true, "/fleet": true, "/metrics": true}

// requestRates turns the request counters, and each host's round-trip
// metrics, into rates between two looks.
type requestRates struct {
	mu   sync.Mutex
	at   time.Time
	last map[string]fleet.RequestStats // by series: "" the requests, else roundTripKey
}

// look reads this server's traffic from fams: its HTTP requests, which it
// returns, and its round trips to each of hosts, which it sets there.
func (rr *requestRates) look(fams []*dto.MetricFamily, hosts []fleet.HostInfo, now time.Time) fleet.RequestStats {
	st := requests(fams)
	trips := roundTrips(fams)
	by := map[string]*fleet.RequestStats{"": &st}
	for k, rt := range trips {
		by[k] = &rt.RequestStats
	}
	rr.rates(by, now)
	for i := range hosts {
		for _, role := range []string{"master", "replica"} { // the label values of the round-trip metrics
			if rt := trips[roundTripKey(hosts[i].Name, role)]; rt != nil {
				hosts[i].RoundTrips = append(hosts[i].RoundTrips, *rt)
			}
		}
	}
	return st
}

// rates sets the rates of each series of by over the interval since the
// previous look, and keeps their totals for the next. A series the
// previous look did not see counts from zero; on the first look, every
// rate is zero.
func (rr *requestRates) rates(by map[string]*fleet.RequestStats, now time.Time) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if d := now.Sub(rr.at).Seconds(); !rr.at.IsZero() && d > 0 {
		for k, st := range by {
			prev := rr.last[k]
			st.WindowSeconds = d
			st.RatePerSec = max(st.Total-prev.Total, 0) / d
			st.ErrorsPerSec = max(st.Errors-prev.Errors, 0) / d
		}
	}
	rr.at, rr.last = now, make(map[string]fleet.RequestStats, len(by))
	for k, st := range by {
		rr.last[k] = *st
	}
}

// requests is the HTTP traffic of fams, without its rates.
func requests(fams []*dto.MetricFamily) fleet.RequestStats {
	var st fleet.RequestStats
	var h histogram
	for _, f := range fams {
		switch f.GetName() {
		case "pinstore_http_requests_total":
			for _, m := range f.GetMetric() {
				if fleetRoutes[label(m, "route")] {
					continue
				}
				v := m.GetCounter().GetValue()
				st.Total += v
				if label(m, "status_class") == "5xx" {
					st.Errors += v
				}
			}
		case "pinstore_http_request_duration_seconds":
			for _, m := range f.GetMetric() {
				if !fleetRoutes[label(m, "route")] {
					h.add(m.GetHistogram())
				}
			}
		}
	}
	st.P99Seconds = h.p99()
	return st
}

// roundTrips is the round trips of fams by host and role (roundTripKey),
// without their rates.
func roundTrips(fams []*dto.MetricFamily) map[string]*fleet.RoundTripStats {
	out := map[string]*fleet.RoundTripStats{}
	hists := map[string]*histogram{}
	get := func(m *dto.Metric) (*fleet.RoundTripStats, *histogram) {
		k := roundTripKey(label(m, "host"), label(m, "role"))
		if out[k] == nil {
			out[k], hists[k] = &fleet.RoundTripStats{Role: label(m, "role")}, &histogram{}
		}
		return out[k], hists[k]
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "pinstore_shard_query_seconds":
				rt, h := get(m)
				h.add(m.GetHistogram())
				rt.Total = float64(h.count)
			case "pinstore_shard_query_errors_total":
				rt, _ := get(m)
				rt.Errors += m.GetCounter().GetValue()
			}
		}
	}
	for k, rt := range out {
		rt.P99Seconds = hists[k].p99()
	}
	return out
}

func roundTripKey(host, role string) string { return host + "\x00" + role }

// histogram is the sum of histograms' cumulative buckets and counts.
type histogram struct {
	buckets map[float64]uint64
	count   uint64
}

func (h *histogram) add(m *dto.Histogram) {
	if h.buckets == nil {
		h.buckets = map[float64]uint64{}
	}
	h.count += m.GetSampleCount()
	for _, b := range m.GetBucket() {
		h.buckets[b.GetUpperBound()] += b.GetCumulativeCount()
	}
}

func (h *histogram) p99() float64 { return quantile(0.99, h.buckets, h.count) }

// quantile estimates the q-quantile of a histogram from its cumulative
// buckets, by linear interpolation within the bucket, as Prometheus'
// histogram_quantile does; 0 with no samples. Past the last bound it
// answers the last bound.
func quantile(q float64, buckets map[float64]uint64, count uint64) float64 {
	if count == 0 {
		return 0
	}
	bounds := make([]float64, 0, len(buckets))
	for b := range buckets {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	rank := q * float64(count)
	lower, below := 0.0, uint64(0)
	for _, b := range bounds {
		c := buckets[b]
		if float64(c) >= rank {
			if math.IsInf(b, 1) {
				return lower // past the last finite bound: as far as it can tell
			}
			if c == below {
				return b
			}
			return lower + (b-lower)*(rank-float64(below))/float64(c-below)
		}
		lower, below = b, c
	}
	return lower
}

func writeBuffer(fams []*dto.MetricFamily) fleet.WriteBufferStats {
	var wb fleet.WriteBufferStats
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			switch f.GetName() {
			case "pinstore_write_buffer_waiting":
				wb.Waiting += m.GetGauge().GetValue()
			case "pinstore_write_buffer_waits_total":
				wb.Waited += m.GetCounter().GetValue()
			case "pinstore_write_buffer_expired_total":
				wb.Expired += m.GetCounter().GetValue()
			}
		}
	}
	return wb
}

// backups reads the backup loop's age gauges (serve --backups); an
// infinite age (no backup yet) is nil.
func backups(fams []*dto.MetricFamily) []fleet.BackupStatus {
	by := map[string]*fleet.BackupStatus{}
	get := func(host string) *fleet.BackupStatus {
		if b := by[host]; b != nil {
			return b
		}
		b := &fleet.BackupStatus{Host: host}
		by[host] = b
		return b
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			v := m.GetGauge().GetValue()
			age := &v
			if math.IsInf(v, 0) || math.IsNaN(v) {
				age = nil
			}
			switch f.GetName() {
			case "pinstore_backup_last_good_age_seconds":
				get(label(m, "host")).LastGoodAgeSeconds = age
			case "pinstore_backup_last_age_seconds":
				get(label(m, "host")).LastAgeSeconds = age
			}
		}
	}
	out := make([]fleet.BackupStatus, 0, len(by))
	for _, b := range by {
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
