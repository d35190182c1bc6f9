package main

import (
	"bufio"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocumentedMetricsOnMetrics: every metric the documentation's metrics
// table names is on /metrics of a freshly started server, before any
// request could have created a labelled series. The table is the Markdown
// table whose first column is "metric", in README.md or any docs/**/*.md.
func TestDocumentedMetricsOnMetrics(t *testing.T) {
	documented := documentedMetrics(t, "../..")
	s := startServer(t)
	// The HTTP metrics have a series per route, method and status class
	// that the first request to it makes: a scraper's first scrape makes
	// its own, and the second shows it. Every other family has its series
	// from the start.
	s.must(http.StatusOK, http.MethodGet, "/metrics", nil)
	body := string(s.must(http.StatusOK, http.MethodGet, "/metrics", nil).Body)
	exposed := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "# TYPE "); ok {
			name, _, _ = strings.Cut(name, " ")
			exposed[name] = true
			continue
		}
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			// A family with no series has a TYPE line and no sample: only
			// samples count.
			name := line[:strings.IndexAny(line, "{ ")]
			exposed[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")+"\x00sample"] = true
		}
	}
	for _, m := range documented {
		if !exposed[m+"\x00sample"] {
			t.Errorf("%s is in the metrics table but has no series on /metrics", m)
		}
	}
}

// metricCell finds the backquoted names of a metrics table's first cell.
var metricCell = regexp.MustCompile("`([a-z_]+)(\\{[a-z_,]*\\})?`")

// documentedMetrics reads the metrics table (first column "metric") of
// README.md and docs/**/*.md under root. A cell's shorthand "_misses_total"
// after "pinstore_x_hits_total" is "pinstore_x_misses_total".
func documentedMetrics(t *testing.T, root string) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	_ = filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	var out []string
	// A row that says its metrics come "with `serve --backups": those
	// are on /metrics only of a server started so, not of this one.
	conditional := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		in := false
		for line := range strings.SplitSeq(string(b), "\n") {
			cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
			switch {
			case !strings.HasPrefix(strings.TrimSpace(line), "|"):
				in = false
			case strings.TrimSpace(cells[0]) == "metric":
				in = true
			case in:
				base := ""
				onlyWith := strings.Contains(line, "with `serve --backups")
				for _, m := range metricCell.FindAllStringSubmatch(cells[0], -1) {
					name := m[1]
					if strings.HasPrefix(name, "_") && base != "" {
						name = base + name
					} else if i := strings.LastIndex(strings.TrimSuffix(name, "_total"), "_"); i > 0 {
						base = name[:i]
					}
					if onlyWith {
						conditional[name] = true
					}
					if strings.HasPrefix(name, "pinstore_") {
						out = append(out, name)
					}
				}
			}
		}
	}
	out = slices.DeleteFunc(out, func(n string) bool { return conditional[n] })
	if len(conditional) > 0 {
		t.Logf("left out, documented as only with serve --backups: %v", slices.Sorted(maps.Keys(conditional)))
	}
	if len(out) < 20 {
		t.Fatalf("found %d metrics in the documentation's metrics table (%v): the table was not found", len(out), out)
	}
	return out
}
