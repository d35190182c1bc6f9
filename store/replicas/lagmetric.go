package replicas

import (
	"github.com/prometheus/client_golang/prometheus"
)

// lagCollector exports the tracker's measures of every replica of the map
// in force, read when /metrics is scraped:
//
//	pinstore_replica_lag_seconds{host,replica}  the tracker's lag (Lag);
//	                                            absent while not measured
//	pinstore_replica_replicating{host,replica}  1 when both replication
//	                                            threads ran at the last status
//	                                            read, 0 otherwise
type lagCollector struct {
	t                *Tracker
	lag, replicating *prometheus.Desc
}

func newLagCollector(t *Tracker) *lagCollector {
	labels := []string{"host", "replica"}
	return &lagCollector{t: t,
		lag: prometheus.NewDesc("pinstore_replica_lag_seconds",
			"How far behind its master a replica is, as this server measures it: no write acknowledged on the master longer ago than this is missing from it.", labels, nil),
		replicating: prometheus.NewDesc("pinstore_replica_replicating",
			"1 when both of a replica's replication threads ran at its last status read (every few seconds), 0 otherwise.", labels, nil),
	}
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.lag; ch <- c.replicating }

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	for _, h := range c.t.router.Current().Hosts() {
		for _, r := range h.Replicas {
			if lag, ok := c.t.Lag(h, r); ok {
				ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, lag.Seconds(), h.Name, r.Addr)
			}
			hs := c.t.state(h, false)
			if hs == nil {
				continue
			}
			hs.mu.Lock()
			rs := hs.replicas[r.DB]
			var running, seen bool
			if rs != nil && rs.status != nil {
				seen = true
				running = rs.status.Replica != nil && rs.status.Replica.Running()
			}
			hs.mu.Unlock()
			if seen {
				v := 0.0
				if running {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(c.replicating, prometheus.GaugeValue, v, h.Name, r.Addr)
			}
		}
	}
}
