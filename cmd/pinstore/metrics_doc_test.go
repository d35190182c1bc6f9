package main

import (
	"bufio"
	"encoding/json"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
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
	out, conditional := allDocumentedMetrics(t, root)
	out = slices.DeleteFunc(out, func(n string) bool { return conditional[n] })
	if len(conditional) > 0 {
		t.Logf("left out, documented as only with serve --backups or replicas: %v", slices.Sorted(maps.Keys(conditional)))
	}
	return out
}

// allDocumentedMetrics is every metric of the metrics tables, and those
// of them that a server has only when started with backups or replicas.
func allDocumentedMetrics(t *testing.T, root string) ([]string, map[string]bool) {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	_ = filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	var out []string
	// A row that says its metrics come "with `serve --backups" (or "one
	// series per replica"): those are on /metrics only of a server started
	// so (or with replicas), not of this one.
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
				onlyWith := strings.Contains(line, "with `serve --backups") || strings.Contains(line, "one series per replica")
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
	if len(out) < 20 {
		t.Fatalf("found %d metrics in the documentation's metrics table (%v): the table was not found", len(out), out)
	}
	return out, conditional
}

// metricInExpr finds pinstore's metric names in a PromQL expression.
var metricInExpr = regexp.MustCompile(`\bpinstore_[a-z_]+`)

// TestAlertsAndDashboardUseDocumentedMetrics: every pinstore metric that
// the example alert rules and the Grafana dashboard query is in the
// metrics table, which TestDocumentedMetricsOnMetrics holds to what
// /metrics serves; and every alert the metrics table's alerts section
// promises is among the rules.
func TestAlertsAndDashboardUseDocumentedMetrics(t *testing.T) {
	all, _ := allDocumentedMetrics(t, "../..")
	documented := map[string]bool{}
	for _, m := range all {
		documented[m] = true
	}
	check := func(where, expr string) {
		t.Helper()
		names := metricInExpr.FindAllString(expr, -1)
		if len(names) == 0 {
			t.Errorf("%s: %q names no pinstore metric", where, expr)
		}
		for _, n := range names {
			base := n
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				base = strings.TrimSuffix(base, suf)
			}
			if !documented[n] && !documented[base] {
				t.Errorf("%s: %s is not a metric pinstore exports (not in docs/operations/metrics.md)", where, n)
			}
		}
	}

	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	b, err := os.ReadFile("../../deploy/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	alerts := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
			check("alerts.yaml "+r.Alert, r.Expr)
		}
	}
	doc, err := os.ReadFile("../../docs/operations/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile("`(Pinstore[A-Za-z]+)`").FindAllStringSubmatch(string(doc), -1)
	if len(named) < 5 {
		t.Fatalf("the alerts section of metrics.md names %d alerts", len(named))
	}
	for _, m := range named {
		if !alerts[m[1]] {
			t.Errorf("metrics.md names the alert %s, which alerts.yaml lacks", m[1])
		}
	}

	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	b, err = os.ReadFile("../../deploy/grafana/pinstore.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("pinstore.json: %v", err)
	}
	if len(dash.Panels) == 0 {
		t.Fatal("pinstore.json has no panels")
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			check("pinstore.json "+p.Title, q.Expr)
		}
	}
}
