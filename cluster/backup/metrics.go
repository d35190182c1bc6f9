package backup

import (
	"io/fs"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// NewCollector reports, at each scrape, the backups found under dir (a
// manifest.json at most three directories down): per host, the age of the
// newest backup and of the newest one verified good (+Inf when none is),
// so an alert can fire on a host whose last good backup is too old.
func NewCollector(dir string) prometheus.Collector {
	return &collector{
		dir:   dir,
		good:  prometheus.NewDesc("pinstore_backup_last_good_age_seconds", "Seconds since the end of the host's newest backup that pinstore backup verify found good (+Inf: none).", []string{"host"}, nil),
		any:   prometheus.NewDesc("pinstore_backup_last_age_seconds", "Seconds since the end of the host's newest backup, verified or not.", []string{"host"}, nil),
		cache: map[string]cached{},
	}
}

type collector struct {
	dir       string
	good, any *prometheus.Desc
	mu        sync.Mutex
	cache     map[string]cached // manifest path → what it says, by modification time
}

type cached struct {
	mod  time.Time
	host string
	end  time.Time
	ok   bool
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.good
	ch <- c.any
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	good, last := map[string]time.Time{}, map[string]time.Time{}
	seen := map[string]bool{}
	root := filepath.Clean(c.dir)
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if rel, _ := filepath.Rel(root, p); rel != "." && strings.Count(rel, string(filepath.Separator)) >= 3 {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != ManifestFile {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		seen[p] = true
		e, ok := c.cache[p]
		if !ok || !e.mod.Equal(fi.ModTime()) {
			m, err := ReadManifest(filepath.Dir(p))
			if err != nil {
				delete(c.cache, p)
				return nil
			}
			e = cached{mod: fi.ModTime(), host: m.Host, end: m.Ended, ok: m.Verified != nil && m.Verified.OK}
			c.cache[p] = e
		}
		if e.end.After(last[e.host]) {
			last[e.host] = e.end
		}
		if e.ok && e.end.After(good[e.host]) {
			good[e.host] = e.end
		}
		return nil
	})
	for p := range c.cache {
		if !seen[p] {
			delete(c.cache, p)
		}
	}
	now := time.Now()
	for host, end := range last {
		ch <- prometheus.MustNewConstMetric(c.any, prometheus.GaugeValue, now.Sub(end).Seconds(), host)
		age := math.Inf(1)
		if g, ok := good[host]; ok {
			age = now.Sub(g).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(c.good, prometheus.GaugeValue, age, host)
	}
}
