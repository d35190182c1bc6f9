package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/store/topology"
)

func TestMapPoll(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
		err  bool
	}{{"", topology.DefaultMapPoll, false}, {"500ms", 500 * time.Millisecond, false}, {"0s", 0, true}, {"soon", 0, true}} {
		got, err := mapPoll(func(string) string { return tt.in })
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("%q: %v, %v", tt.in, got, err)
		}
	}
}

func TestFeedSweep(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
		err  bool
	}{{"", defaultFeedSweep, false}, {"30s", 30 * time.Second, false}, {"0", 0, false}, {"-1s", 0, true}, {"often", 0, true}} {
		got, err := feedSweep(func(string) string { return tt.in })
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("%q: %v, %v", tt.in, got, err)
		}
	}
}

// TestFeedPullThreshold: PINSTORE_FEED_PULL_THRESHOLD reaches the store's
// Config (0 there means the store's default); anything but a positive
// number is refused, naming the variable.
func TestFeedPullThreshold(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
		err  bool
	}{{"", 0, false}, {"3", 3, false}, {"1000000", 1000000, false}, {"0", 0, true}, {"-5", 0, true}, {"many", 0, true}} {
		cfg, err := storeConfig(func(k string) string {
			if k == "PINSTORE_FEED_PULL_THRESHOLD" {
				return tt.in
			}
			return ""
		})
		if (err != nil) != tt.err || err == nil && cfg.FeedPullThreshold != tt.want {
			t.Errorf("%q: %v, %v", tt.in, cfg.FeedPullThreshold, err)
		}
		if err != nil && !strings.Contains(err.Error(), "PINSTORE_FEED_PULL_THRESHOLD") {
			t.Errorf("%q: the error does not name the variable: %v", tt.in, err)
		}
	}
}

// TestObjectCacheNear: PINSTORE_OBJECT_CACHE_NEAR reaches the store's
// Config, 100,000 objects when unset and none at 0; anything but a
// number of objects is refused, naming the variable.
func TestObjectCacheNear(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
		err  bool
	}{{"", defaultObjectCacheNear, false}, {"0", 0, false}, {"5000", 5000, false}, {"-1", 0, true}, {"lots", 0, true}} {
		cfg, err := storeConfig(func(k string) string {
			if k == "PINSTORE_OBJECT_CACHE_NEAR" {
				return tt.in
			}
			return ""
		})
		if (err != nil) != tt.err || err == nil && cfg.ObjectCache.Near != tt.want {
			t.Errorf("%q: %v, %v", tt.in, cfg.ObjectCache.Near, err)
		}
		if err != nil && !strings.Contains(err.Error(), "PINSTORE_OBJECT_CACHE_NEAR") {
			t.Errorf("%q: the error does not name the variable: %v", tt.in, err)
		}
	}
}

// TestRateLimitConfig: the rate limit and burst as docs/configuration.md's
// table gives them: the rate defaults to 1000 a second, the burst to twice
// the rate in force (at least 1), PINSTORE_RATE_LIMIT=0 turns limiting off,
// and a burst that is not a positive integer (0 included) is refused,
// naming the variable.
func TestRateLimitConfig(t *testing.T) {
	for _, tt := range []struct {
		rate, burst string
		wantRate    float64
		wantBurst   int
		err         bool
	}{
		{"", "", 1000, 2000, false},
		{"10", "", 10, 20, false},
		{"0.2", "", 0.2, 1, false},
		{"0", "", 0, 1, false},
		{"10", "3", 10, 3, false},
		{"", "0", 0, 0, true},
		{"", "-1", 0, 0, true},
		{"", "many", 0, 0, true},
		{"-1", "", 0, 0, true},
	} {
		c, err := loadAuthConfig(authEnv{dev: "true", rateLimit: tt.rate, rateBurst: tt.burst}, "127.0.0.1:8080")
		if (err != nil) != tt.err || err == nil && (c.rate != tt.wantRate || c.burst != tt.wantBurst) {
			t.Errorf("rate %q burst %q: rate %v burst %d, %v", tt.rate, tt.burst, c.rate, c.burst, err)
		}
		if err != nil && !strings.Contains(err.Error(), "PINSTORE_RATE_") {
			t.Errorf("rate %q burst %q: the error does not name the variable: %v", tt.rate, tt.burst, err)
		}
	}
}

// TestConfigTableComplete: docs/configuration.md's table lists exactly
// the PINSTORE_* variables the binary reads (every one is named in a
// non-test file of this package).
func TestConfigTableComplete(t *testing.T) {
	nameRe := regexp.MustCompile(`"(PINSTORE_[A-Z0-9_]+)"`)
	read := map[string]bool{}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range nameRe.FindAllStringSubmatch(string(b), -1) {
			read[m[1]] = true
		}
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Every variable\n")
	if !ok {
		t.Fatal("docs/configuration.md has no \"Every variable\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rowRe := regexp.MustCompile("(?m)^\\| `(PINSTORE_[A-Z0-9_]+)` \\|")
	listed := map[string]bool{}
	for _, m := range rowRe.FindAllStringSubmatch(section, -1) {
		if listed[m[1]] {
			t.Errorf("docs/configuration.md's table lists %s twice", m[1])
		}
		listed[m[1]] = true
	}
	if len(read) < 20 || len(listed) < 20 {
		t.Fatalf("found %d variables read and %d listed: the patterns no longer match", len(read), len(listed))
	}
	for v := range read {
		if !listed[v] {
			t.Errorf("%s is read but not in docs/configuration.md's table", v)
		}
	}
	for v := range listed {
		if !read[v] {
			t.Errorf("docs/configuration.md's table lists %s, which nothing reads", v)
		}
	}
}

// TestBooleanVariables: every boolean PINSTORE_* variable is read by one
// parser: true/false, 1/0, yes/no, on/off in any case mean the same for
// each, unset is its default, and anything else is refused with an error
// naming the variable.
func TestBooleanVariables(t *testing.T) {
	vars := []struct {
		name string
		def  bool
		get  func(getenv func(string) string) (bool, error)
	}{
		{"PINSTORE_REDIS_CLUSTER", false, func(g func(string) string) (bool, error) {
			c, err := storeConfig(g)
			return c.Redis.Cluster, err
		}},
		{"PINSTORE_REDIS_DISABLED", false, func(g func(string) string) (bool, error) {
			c, err := storeConfig(g)
			return c.Redis.Disabled, err
		}},
		{"PINSTORE_OBJECT_CACHE", true, func(g func(string) string) (bool, error) {
			c, err := storeConfig(g)
			return !c.ObjectCache.Disabled, err
		}},
		{"PINSTORE_REPLICA_READS", false, func(g func(string) string) (bool, error) {
			c, err := storeConfig(g)
			return c.ReplicaReads, err
		}},
		{"PINSTORE_DEV", false, func(g func(string) string) (bool, error) {
			c, err := loadAuthConfig(readAuthEnv(g), "127.0.0.1:8080")
			if err != nil && strings.Contains(err.Error(), "no tokens configured") {
				err = nil // PINSTORE_DEV off and no tokens: read as false
			}
			return c.dev, err
		}},
	}
	spellings := map[string]bool{
		"true": true, "TRUE": true, "True": true, "1": true, "yes": true, "YES": true, "on": true, "On": true,
		"false": false, "FALSE": false, "0": false, "no": false, "No": false, "off": false, "OFF": false,
	}
	for _, v := range vars {
		env := func(val string) func(string) string {
			return func(k string) string {
				if k == v.name {
					return val
				}
				return ""
			}
		}
		if got, err := v.get(env("")); err != nil || got != v.def {
			t.Errorf("%s unset: %v, %v; want the default %v", v.name, got, err, v.def)
		}
		for in, want := range spellings {
			if got, err := v.get(env(in)); err != nil || got != want {
				t.Errorf("%s=%s: %v, %v; want %v", v.name, in, got, err, want)
			}
		}
		for _, bad := range []string{"2", "maybe", "yes please", "enabled", "-1"} {
			_, err := v.get(env(bad))
			if err == nil || !strings.Contains(err.Error(), v.name) || !strings.Contains(err.Error(), "not a boolean") {
				t.Errorf("%s=%s: %v; want an error naming the variable", v.name, bad, err)
			}
		}
	}
}
