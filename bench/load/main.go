// Command load is pinstore's load harness: it seeds a data set through the
// HTTP API, then drives a running pinstore at -conns connections for
// -duration per scenario, and runs the same logical operations directly
// against MySQL (and Redis) with the same driver as a baseline, so the
// cost of the service layer (HTTP, JSON, routing, extra checks) shows as
// the api ÷ baseline throughput ratio.
//
//	go run ./bench/load -addr http://127.0.0.1:8080 -prefix bench_ -shards 64
//
// See BENCHMARKS.md ("Load: pinstore vs raw MySQL") for the scenarios,
// the LinkBench mapping and measured figures.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

type config struct {
	addr        string
	token       string
	dsn         string
	prefix      string
	shards      int
	redisAddr   string
	redisPrefix string
	cachePrefix string
	conns       int
	pool        int
	duration    time.Duration
	warmup      time.Duration
	scenarios   []string
	seedOnly    bool
	mode        string
	markdown    string
	state       string
	boardPins   int
	client      string
	rounds      int
	pids        cpuPIDs // the processes whose CPU is counted (cpu.go)
	loadStart   string  // the load average when the run began
}

var allScenarios = []string{"get-pin", "get-pin-bare", "create-pin", "board-page-d0", "board-page-d10k-cursor", "board-page-d10k-offset", "feed-200", "owners-1000", "linkbench",
	"board-page-viewer", "feed-viewer", "like-one-pin", "like-many-pins", "edge-check", "edge-check-one", "tao-mix"}

func main() {
	var c config
	var scen string
	flag.StringVar(&c.addr, "addr", "http://127.0.0.1:8080", "base URL (or host:port) of a running pinstore")
	flag.StringVar(&c.token, "token", os.Getenv("PINSTORE_BENCH_TOKEN"), "bearer token sent with every API request: a service token with scopes read, write and admin (/metrics); default $PINSTORE_BENCH_TOKEN, none when empty")
	flag.StringVar(&c.dsn, "dsn", "root@tcp(127.0.0.1:3306)/", "MySQL DSN for the baseline (same host the server uses)")
	flag.StringVar(&c.prefix, "prefix", "db", "shard database prefix (the server's PINSTORE_DB_PREFIX)")
	flag.IntVar(&c.shards, "shards", 4096, "shard count (the server's PINSTORE_SHARDS)")
	flag.StringVar(&c.redisAddr, "redis", "127.0.0.1:6379", "Redis address for the owner-cache baseline")
	flag.StringVar(&c.redisPrefix, "redis-prefix", "pinstore:o:", "owner cache key prefix (the server's PINSTORE_REDIS_PREFIX)")
	flag.StringVar(&c.cachePrefix, "cache-prefix", "pinstore:c:", "object cache key prefix (the server's PINSTORE_OBJECT_CACHE_PREFIX), for the Redis limit of the reads by id")
	flag.IntVar(&c.conns, "conns", 32, "concurrent connections (workers)")
	flag.IntVar(&c.pool, "pool", 64, "baseline MySQL pool size (the server's PINSTORE_POOL_SIZE, default 64)")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "measured time per scenario and mode")
	flag.DurationVar(&c.warmup, "warmup", time.Second, "unmeasured warm-up before each measurement")
	flag.StringVar(&scen, "scenarios", strings.Join(allScenarios, ","), "comma-separated scenarios: "+strings.Join(allScenarios, ","))
	flag.BoolVar(&c.seedOnly, "seed-only", false, "seed (or load -state) and exit")
	flag.StringVar(&c.mode, "mode", "both", "api, baseline or both")
	flag.StringVar(&c.markdown, "markdown", "", "also write the Markdown summary to this file")
	flag.StringVar(&c.state, "state", "", "seed state JSON: loaded when it exists, written after seeding otherwise")
	flag.IntVar(&c.boardPins, "board-pins", 10050, "pins on the big board (>= 10050 for depth-10,000 pages)")
	flag.IntVar(&c.rounds, "rounds", 4, "alternate api and baseline this many times per scenario, each for duration/rounds")
	flag.StringVar(&c.client, "client", "lean", "HTTP client for the api side: lean (minimal keep-alive HTTP/1.1, little CPU) or net (Go's net/http)")
	flag.Parse()
	if !strings.Contains(c.addr, "://") {
		c.addr = "http://" + c.addr
	}
	c.addr = strings.TrimRight(c.addr, "/")
	for _, s := range strings.Split(scen, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.scenarios = append(c.scenarios, s)
		}
	}
	if c.rounds < 1 {
		fmt.Fprintln(os.Stderr, "load: -rounds must be at least 1")
		os.Exit(2)
	}
	if c.client != "lean" && c.client != "net" {
		fmt.Fprintln(os.Stderr, "load: -client must be lean or net")
		os.Exit(2)
	}
	if c.mode != "api" && c.mode != "baseline" && c.mode != "both" {
		fmt.Fprintln(os.Stderr, "load: -mode must be api, baseline or both")
		os.Exit(2)
	}
	c.loadStart = loadAvg()
	c.pids = findCPUPIDs(map[string]string{"pinstore": hostPort(c.addr), "mariadbd": dsnAddr(c.dsn), "redis-server": c.redisAddr})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	api := newAPIClient(c.addr, c.token, c.conns)
	if c.client == "lean" {
		lean, err := newLeanClient(c.addr, api.auth, c.conns)
		if err != nil {
			return err
		}
		api.lean = lean
	}
	st, err := loadOrSeed(ctx, c, api)
	if err != nil {
		return err
	}
	if c.seedOnly {
		return nil
	}
	var base *baseline
	if c.mode != "api" {
		if base, err = openBaseline(ctx, c, st); err != nil {
			return err
		}
		defer base.close()
	}
	var results []scenarioResult
	for _, name := range c.scenarios {
		sc, err := buildScenario(name, c, st, api, base)
		if err != nil {
			return err
		}
		r := scenarioResult{name: name, note: sc.note}
		// Alternate api and baseline in -rounds slices of the duration, so
		// that the machine's drift (other tenants, CPU steal) hits both
		// sides alike; the slices are summed.
		rc := c
		rc.duration = c.duration / time.Duration(c.rounds)
		for round := 0; round < c.rounds && ctx.Err() == nil; round++ {
			if round > 0 {
				rc.warmup = min(c.warmup, 250*time.Millisecond) // pools are warm already
			}
			if c.mode != "baseline" {
				fmt.Fprintf(os.Stderr, "running %s (api) for %s at %d conns, round %d/%d…\n", name, rc.duration, c.conns, round+1, c.rounds)
				before := api.readCacheCounts(ctx)
				res := measure(ctx, rc, sc.api)
				r.cache.add(before, api.readCacheCounts(ctx))
				fmt.Fprintln(os.Stderr, "  ", res.summary())
				r.api.merge(res)
			}
			if c.mode != "api" {
				fmt.Fprintf(os.Stderr, "running %s (baseline) for %s at %d conns, round %d/%d…\n", name, rc.duration, c.conns, round+1, c.rounds)
				res := measure(ctx, rc, sc.base)
				fmt.Fprintln(os.Stderr, "  ", res.summary())
				r.base.merge(res)
			}
			if c.mode != "api" && sc.limit != nil {
				fmt.Fprintf(os.Stderr, "running %s (redis limit) for %s at %d conns, round %d/%d…\n", name, rc.duration, c.conns, round+1, c.rounds)
				res := measure(ctx, rc, sc.limit)
				fmt.Fprintln(os.Stderr, "  ", res.summary())
				r.limit.merge(res)
			}
		}
		results = append(results, r)
		if ctx.Err() != nil {
			break
		}
	}
	md := renderMarkdown(c, results)
	fmt.Print(md)
	if c.markdown != "" {
		return os.WriteFile(c.markdown, []byte(md), 0o644)
	}
	return nil
}

// hostPort is the host:port of a base URL.
func hostPort(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	return u.Host
}

// dsnAddr is the host:port of a TCP MySQL DSN ("" for another network).
func dsnAddr(dsn string) string {
	mc, err := mysql.ParseDSN(dsn)
	if err != nil || mc.Net != "tcp" {
		return ""
	}
	return mc.Addr
}
