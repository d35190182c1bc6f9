// Command chaos is pinstore's load-and-faults harness ("nothing lost").
//
// It builds nothing and needs a pinstore binary: it starts a private
// redis-server and the pinstore server itself (so it can kill them), runs
// `pinstore migrate`, drives a mixed write load through the HTTP API at
// -conns connections for -duration (create users, boards and pins,
// follow/unfollow, like/unlike, PATCH pins and boards, delete pins, some
// reads), and remembers every acknowledged (2xx) write and the state it
// implies. Optionally it SIGKILLs and restarts the server every
// -kill-every and stops and restarts Redis every -redis-flap-every. Then,
// with no command run, it waits until a dry-run repair finds nothing left
// to fix (pairs and feeds heal by themselves; it reports how long that
// took), verifies through the API that no acknowledged write was lost: objects readable (or deleted), last
// acknowledged field values, exact follow/like lists (every page), counts
// equal to list lengths, both sides of every pair, board/user lists, pin
// owners; and runs `pinstore repair`, which must find nothing. During the
// load, reads of pins and boards are checked against the version (and the
// delete) acknowledged before they began: a stale answer is allowed only
// within a few seconds of a fault's end (fresh.go). It exits 1 on any
// mismatch. Writes whose outcome is unknown (5xx,
// connection died) are tracked and excluded from exact checks.
//
//	go build -o /tmp/pinstore-chaos ./cmd/pinstore
//	go run ./bench/chaos -bin /tmp/pinstore-chaos -duration 2m
//	go run ./bench/chaos -bin /tmp/pinstore-chaos -duration 3m -kill-every 20s -redis-flap-every 30s -markdown
//
// It uses the MariaDB at -dsn with databases -db-prefix (default chaos_,
// -shards 64); -drop drops them before and after. It is not part of
// `go test ./...`. See bench/chaos/RESULTS.md for measured runs.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
)

type config struct {
	bin            string
	addr           string
	conns          int
	duration       time.Duration
	timeout        time.Duration
	killEvery      time.Duration
	restartDelay   time.Duration
	flapEvery      time.Duration
	redisDown      time.Duration
	redisMode      string
	redisPort      int
	redisBin       string
	dbPrefix       string
	shards         int
	dsn            string
	drop           bool
	env            multiFlag
	pullThreshold  int
	journal        string
	serverLog      string
	markdown       bool
	seed           uint64
	skipMigrate    bool
	maxListPrinted int
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

func main() {
	var c config
	flag.StringVar(&c.bin, "bin", "", "pinstore binary (required): go build -o /tmp/pinstore-chaos ./cmd/pinstore")
	flag.StringVar(&c.addr, "addr", "127.0.0.1:18090", "address the harness's pinstore server listens on")
	flag.IntVar(&c.conns, "conns", 32, "concurrent connections (workers)")
	flag.DurationVar(&c.duration, "duration", 3*time.Minute, "how long to drive load")
	flag.DurationVar(&c.timeout, "timeout", 30*time.Second, "HTTP client timeout per request")
	flag.DurationVar(&c.killEvery, "kill-every", 0, "SIGKILL the server and restart it this often (0: never)")
	flag.DurationVar(&c.restartDelay, "restart-delay", time.Second, "how long the killed server stays down")
	flag.DurationVar(&c.flapEvery, "redis-flap-every", 0, "stop and restart the private Redis this often (0: never)")
	flag.DurationVar(&c.redisDown, "redis-down", 5*time.Second, "how long Redis stays down per flap")
	flag.StringVar(&c.redisMode, "redis-flap-mode", "restart", "restart: SHUTDOWN NOSAVE then start again (cache emptied); pause: SIGSTOP then SIGCONT")
	flag.IntVar(&c.redisPort, "redis-port", 16399, "port of the private redis-server the harness starts and flaps")
	flag.StringVar(&c.redisBin, "redis-server", "redis-server", "redis-server binary")
	flag.StringVar(&c.dbPrefix, "db-prefix", "chaos_", "PINSTORE_DB_PREFIX of the server (never the production 'db')")
	flag.IntVar(&c.shards, "shards", 64, "PINSTORE_SHARDS of the server")
	flag.StringVar(&c.dsn, "dsn", "root@tcp(127.0.0.1:3306)/", "PINSTORE_MYSQL_DSN; the harness also reads raw rows here to diagnose a wrong count, and drops databases with -drop")
	flag.BoolVar(&c.drop, "drop", false, "drop the -db-prefix shard databases before the run and after it")
	flag.Var(&c.env, "env", "extra KEY=VALUE for the server and its tools (repeatable)")
	flag.IntVar(&c.pullThreshold, "pull-threshold", 0, "PINSTORE_FEED_PULL_THRESHOLD of the server: authors with this many followers are merged into feeds at read time (e.g. 3, so some are; 0: the server's default)")
	flag.StringVar(&c.journal, "journal", "", "write every write attempt and its outcome as JSON lines to this file")
	flag.StringVar(&c.serverLog, "server-log", "", "server, migrate and repair logs go here (default: a temp file)")
	flag.BoolVar(&c.markdown, "markdown", false, "also print the summary as a Markdown table")
	flag.Uint64Var(&c.seed, "seed", uint64(time.Now().UnixNano()), "random seed")
	flag.BoolVar(&c.skipMigrate, "skip-migrate", false, "don't run pinstore migrate first")
	flag.IntVar(&c.maxListPrinted, "max-details", 40, "mismatch lines printed")
	flag.Parse()
	if c.bin == "" {
		fmt.Fprintln(os.Stderr, "chaos: -bin is required (go build -o /tmp/pinstore-chaos ./cmd/pinstore)")
		os.Exit(2)
	}
	if !regexp.MustCompile(`^[a-z][a-z0-9_]*$`).MatchString(c.dbPrefix) || c.dbPrefix == "db" {
		fmt.Fprintln(os.Stderr, "chaos: -db-prefix must be a private prefix such as chaos_ (not the production db)")
		os.Exit(2)
	}
	if c.redisMode != "restart" && c.redisMode != "pause" {
		fmt.Fprintln(os.Stderr, "chaos: -redis-flap-mode is restart or pause")
		os.Exit(2)
	}
	code, err := run(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

// env is the server's environment: the harness's own, without any shard
// map, with the private databases, Redis and development mode, then -env.
func (c config) serverEnv() []string {
	set := map[string]string{
		"PINSTORE_DEV":                 "true",
		"PINSTORE_RATE_LIMIT":          "0",
		"PINSTORE_DB_PREFIX":           c.dbPrefix,
		"PINSTORE_SHARDS":              strconv.Itoa(c.shards),
		"PINSTORE_MYSQL_DSN":           c.dsn,
		"PINSTORE_REDIS_ADDRS":         "127.0.0.1:" + strconv.Itoa(c.redisPort),
		"PINSTORE_REDIS_PREFIX":        "chaos:o:",
		"PINSTORE_OBJECT_CACHE_PREFIX": "chaos:c:",
		"PINSTORE_CURSOR_SECRET":       "chaos-harness-cursor-secret-0123456789",
		"PINSTORE_LOG_LEVEL":           "warn",
	}
	if c.pullThreshold > 0 {
		set["PINSTORE_FEED_PULL_THRESHOLD"] = strconv.Itoa(c.pullThreshold)
	}
	for _, kv := range c.env {
		k, v, _ := strings.Cut(kv, "=")
		set[k] = v
	}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := set[k]; ok || k == "PINSTORE_SHARD_MAP" {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	return env
}

func run(c config) (int, error) {
	tempLog := c.serverLog == ""
	if tempLog {
		f, err := os.CreateTemp("", "chaos-server-*.log")
		if err != nil {
			return 0, err
		}
		c.serverLog = f.Name()
		f.Close()
	}
	f, err := os.Create(c.serverLog)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	logw := &syncWriter{w: f}
	fmt.Printf("chaos: server and tool logs in %s\n", c.serverLog)

	var db *sql.DB
	if c.dsn != "" {
		if db, err = sql.Open("mysql", c.dsn); err != nil {
			return 0, err
		}
		defer db.Close()
	}
	if c.drop {
		if err := dropDatabases(db, c.dbPrefix); err != nil {
			return 0, err
		}
	}

	rs := &redisServer{port: c.redisPort, bin: c.redisBin, mode: c.redisMode, log: logw}
	if err := rs.start(); err != nil {
		return 0, err
	}
	defer rs.stop()
	srv := &server{bin: c.bin, addr: c.addr, env: c.serverEnv(), log: logw}
	if !c.skipMigrate {
		start := time.Now()
		if _, err := srv.runTool(context.Background(), "migrate"); err != nil {
			return 0, err
		}
		fmt.Printf("chaos: migrate %d shards (%s*) in %s\n", c.shards, c.dbPrefix, time.Since(start).Round(time.Millisecond))
	}
	if err := srv.start(60 * time.Second); err != nil {
		return 0, err
	}
	defer srv.stop()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cl := newClient("http://"+c.addr, c.conns, c.timeout)
	st := newStats()
	g := &global{}
	j, err := openJournal(c.journal)
	if err != nil {
		return 0, err
	}
	runID := strconv.FormatUint(c.seed%100000, 36)
	workers := make([]*worker, c.conns)
	for i := range workers {
		workers[i] = newWorker(i, runID, c.seed, cl, st, g, j)
	}

	sum := &summary{cfg: c, st: st, unknownCreates: map[string]int{}, resolved: map[string]int{}}
	deadline := time.Now().Add(c.duration)
	loadCtx, cancelLoad := context.WithDeadline(ctx, deadline)
	defer cancelLoad()
	var faults sync.WaitGroup
	var kills, flaps atomic.Int64
	var faultErr sync.Mutex
	faultLoop := func(every time.Duration, fault func()) {
		if every <= 0 {
			return
		}
		faults.Go(func() {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-loadCtx.Done():
					return
				case <-t.C:
				}
				fault()
			}
		})
	}
	noteFault := func(msg string) {
		faultErr.Lock()
		sum.killErrors = append(sum.killErrors, msg)
		faultErr.Unlock()
	}
	faultLoop(c.killEvery, func() {
		f := g.faults.begin()
		defer g.faults.end(f)
		srv.kill()
		kills.Add(1)
		fmt.Printf("chaos: %s SIGKILLed the server (kill %d)\n", time.Now().Format("15:04:05"), kills.Load())
		time.Sleep(c.restartDelay)
		if err := srv.start(60 * time.Second); err != nil {
			noteFault(err.Error())
		}
	})
	faultLoop(c.flapEvery, func() {
		f := g.faults.begin()
		defer g.faults.end(f)
		fmt.Printf("chaos: %s Redis down (%s, %s)\n", time.Now().Format("15:04:05"), c.redisMode, c.redisDown)
		if err := rs.flap(c.redisDown); err != nil {
			noteFault("redis: " + err.Error())
		}
		flaps.Add(1)
	})
	progressDone := make(chan struct{})
	go func() {
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-progressDone:
				return
			case <-t.C:
				st.mu.Lock()
				a, k := sum2(st.attempted), sum2(st.acked)
				st.mu.Unlock()
				fmt.Printf("chaos: %s %d operations, %d acknowledged\n", time.Now().Format("15:04:05"), a, k)
			}
		}
	}()
	start := time.Now()
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() { defer wg.Done(); w.run(deadline) }()
	}
	wg.Wait()
	sum.elapsed = time.Since(start)
	cancelLoad()
	faults.Wait()
	close(progressDone)
	j.close()
	sum.kills, sum.flaps = int(kills.Load()), int(flaps.Load())
	for _, w := range workers {
		for k, n := range w.unknownCreates {
			sum.unknownCreates[k] += n
		}
		for k, n := range w.resolved {
			sum.resolved[k] += n
		}
	}
	loadEnd := time.Now()
	fmt.Printf("chaos: load done in %s; waiting for pairs and feeds to heal, then verifying\n", sum.elapsed.Round(time.Millisecond))

	// Everything up again, then repair, then verify.
	if err := rs.start(); err != nil {
		return 0, err
	}
	if !srv.alive() {
		if err := srv.start(60 * time.Second); err != nil {
			return 0, err
		}
	}
	// Let the server finish the feed fan-out it has queued (including what
	// its start-up sweep found), then wait, with no command run, until a
	// dry-run repair finds nothing: pairs and feeds heal by themselves.
	sum.backlogWait = waitFeedBacklog(cl, 60*time.Second)
	sum.heal = waitHealed(srv, db, c.dbPrefix, c.shards, loadEnd, 120*time.Second)

	// Verify what the server made of it on its own; repair runs after, and
	// what it still finds is reported.
	vstart := time.Now()
	v := newVerifier(cl, c.conns, workers, db, c.dbPrefix)
	v.run()
	sum.verifyTime = time.Since(vstart)
	out, err := srv.runTool(context.Background(), "repair")
	if err != nil {
		return 0, err
	}
	sum.repair = strings.TrimSpace(string(out))
	out, err = srv.runTool(context.Background(), "repair", "--dry-run")
	if err != nil {
		return 0, err
	}
	sum.repairDry = strings.TrimSpace(string(out))
	if p, f := broken(sum.repair); p+f > 0 {
		v.res.bad("repair after healing", "repair still fixed %d pairs and %d feed rows", p, f)
	}

	sum.res = v.res
	sum.objects = map[string]int{"users": len(v.users), "boards": len(v.boards), "pins": len(v.pins)}
	sum.pairs = map[string]int{"follow": len(v.follows), "like": len(v.likes)}
	for _, a := range st.anomalies {
		v.res.bad("runtime anomaly", "%s", a)
	}
	sum.freshChecked, sum.staleWithin, sum.staleLongest, sum.staleBad = g.stale.summary()
	for _, b := range sum.staleBad {
		v.res.bad("stale read outside a fault's window", "%s", b)
	}
	sum.print(os.Stdout)
	if c.markdown {
		sum.printMarkdown(os.Stdout)
	}
	srv.stop()
	rs.stop()
	if c.drop {
		if err := dropDatabases(db, c.dbPrefix); err != nil {
			return 0, err
		}
	}
	if sum2(v.res.mismatches) > 0 {
		fmt.Printf("chaos: server log kept in %s\n", c.serverLog)
		return 1, nil
	}
	if tempLog {
		_ = os.Remove(c.serverLog)
	}
	return 0, nil
}

func sum2(m map[string]int) int { return sum(m) }

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
