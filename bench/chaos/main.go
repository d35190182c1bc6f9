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
	"encoding/json"
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

// summary is what the run prints.
type summary struct {
	cfg            config
	elapsed        time.Duration
	st             *stats
	unknownCreates map[string]int
	kills          int
	flaps          int
	killErrors     []string
	repair         string
	repairDry      string
	backlogWait    string // how long the feed fan-out took to drain before the checks
	heal           heal   // how long until no pair or feed row was left to repair
	// reads checked against the acknowledged version (fresh.go): stale ones
	// within staleBound of a fault, the longest such window, and the others
	freshChecked int64
	staleWithin  int
	staleLongest time.Duration
	staleBad     []string
	res          *results
	objects      map[string]int
	pairs        map[string]int
	verifyTime   time.Duration
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

	sum := &summary{cfg: c, st: st, unknownCreates: map[string]int{}}
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

// dropDatabases drops the shard databases <prefix>NNNNN.
func dropDatabases(db *sql.DB, prefix string) error {
	if db == nil {
		return fmt.Errorf("-drop needs -dsn")
	}
	rows, err := db.Query("SHOW DATABASES")
	if err != nil {
		return err
	}
	re := regexp.MustCompile("^" + regexp.QuoteMeta(prefix) + `\d{5}$`)
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		if re.MatchString(n) {
			names = append(names, n)
		}
	}
	rows.Close()
	for _, n := range names {
		if _, err := db.Exec("DROP DATABASE `" + n + "`"); err != nil {
			return err
		}
	}
	if len(names) > 0 {
		fmt.Printf("chaos: dropped %d databases %s*\n", len(names), prefix)
	}
	return nil
}

// waitFeedBacklog polls the server's pinstore_feed_fanout_backlog gauge
// until it reads 0 (or limit passes) and says how long that took.
func waitFeedBacklog(c *client, limit time.Duration) string {
	start := time.Now()
	for time.Since(start) < limit {
		a := c.do(context.Background(), "GET", "/metrics", nil, "")
		for _, line := range strings.Split(string(a.body), "\n") {
			if line == "pinstore_feed_fanout_backlog 0" {
				return time.Since(start).Round(100 * time.Millisecond).String()
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "not drained within " + limit.String()
}

// heal is how long pairs and feeds took to be whole with no command run.
type heal struct {
	marksCleared          time.Duration // since the last server start, until no pair_outbox mark was left (-1: not measured)
	afterLoad, afterStart time.Duration // since the load ended, since the last server start: a dry-run repair found nothing
	checks                int           // dry-run repairs run
	healed                bool
	left                  string // what the last dry run found, when not healed
}

func (h heal) String() string {
	if !h.healed {
		return fmt.Sprintf("NOT healed after %s (%d dry runs): %s", h.afterLoad.Round(100*time.Millisecond), h.checks, h.left)
	}
	marks := ""
	if h.marksCleared >= 0 {
		marks = fmt.Sprintf("every pair_outbox mark settled %s after the last server start; ", h.marksCleared.Round(100*time.Millisecond))
	}
	return fmt.Sprintf("%sa dry-run repair found nothing %s after the load ended, %s after the last server start (%d dry-run repairs)",
		marks, h.afterLoad.Round(100*time.Millisecond), h.afterStart.Round(100*time.Millisecond), h.checks)
}

// waitHealed waits until no shard holds a pair_outbox mark (with db; every
// 100 ms), then runs `pinstore repair --dry-run` until it finds no pair
// and no feed row to fix, or limit passes.
func waitHealed(srv *server, db *sql.DB, prefix string, shards int, loadEnd time.Time, limit time.Duration) heal {
	h := heal{marksCleared: -1}
	if db != nil {
		var q strings.Builder
		q.WriteString("SELECT 0")
		for n := range shards {
			fmt.Fprintf(&q, " + (SELECT COUNT(*) FROM %s%05d.pair_outbox)", prefix, n)
		}
		for time.Since(loadEnd) < limit {
			var left int
			if err := db.QueryRow(q.String()).Scan(&left); err == nil && left == 0 {
				h.marksCleared = time.Since(srv.startedAt())
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for time.Since(loadEnd) < limit {
		out, err := srv.runTool(context.Background(), "repair", "--dry-run")
		h.checks++
		p, f := broken(string(out))
		if err == nil && p+f == 0 {
			h.healed = true
			h.afterLoad, h.afterStart = time.Since(loadEnd), time.Since(srv.startedAt())
			return h
		}
		h.left = fmt.Sprintf("%d pairs, %d feed rows (%v)", p, f, err)
		time.Sleep(500 * time.Millisecond)
	}
	h.afterLoad = time.Since(loadEnd)
	return h
}

// broken counts what a repair report fixed (or, dry, would fix): pairs
// with a dead end, a missing or an orphan inverse, and feed rows missing or
// stale. An unreadable report counts as one of each.
func broken(js string) (pairs, feeds int) {
	var r struct {
		Pairs []struct {
			DeadEndpoint   int `json:"dead_endpoint"`
			MissingInverse int `json:"missing_inverse"`
			OrphanInverse  int `json:"orphan_inverse"`
		} `json:"pairs"`
		Feeds struct {
			Missing, Stale int
		} `json:"feeds"`
	}
	if json.Unmarshal([]byte(strings.TrimSpace(js)), &r) != nil {
		return 1, 1
	}
	for _, p := range r.Pairs {
		pairs += p.DeadEndpoint + p.MissingInverse + p.OrphanInverse
	}
	return pairs, r.Feeds.Missing + r.Feeds.Stale
}

// repairLine summarizes repair's JSON report.
func repairLine(js string) string {
	var r struct {
		DryRun bool `json:"dry_run"`
		Pairs  []struct {
			Mapping        string `json:"mapping"`
			Checked        int    `json:"checked"`
			MissingInverse int    `json:"missing_inverse"`
			OrphanInverse  int    `json:"orphan_inverse"`
		} `json:"pairs"`
		Feeds struct {
			Follows, Rows, Missing, Stale int
		} `json:"feeds"`
	}
	if json.Unmarshal([]byte(js), &r) != nil {
		return js
	}
	var parts []string
	for _, p := range r.Pairs {
		parts = append(parts, fmt.Sprintf("%s: %d rows checked, %d missing inverse added, %d orphan inverse removed", p.Mapping, p.Checked, p.MissingInverse, p.OrphanInverse))
	}
	f := r.Feeds
	parts = append(parts, fmt.Sprintf("user_feed: %d follows and %d rows checked, %d missing rows added, %d stale removed", f.Follows, f.Rows, f.Missing, f.Stale))
	return strings.Join(parts, "; ")
}

func (s *summary) print(w io.Writer) {
	st := s.st
	att, ack := sum(st.attempted), sum(st.acked)
	fmt.Fprintf(w, "\n=== chaos summary ===\n")
	fmt.Fprintf(w, "load: %s at %d connections; kills %d (every %s), redis flaps %d (every %s, %s, down %s)\n",
		s.elapsed.Round(time.Second), s.cfg.conns, s.kills, durOrNever(s.cfg.killEvery), s.flaps, durOrNever(s.cfg.flapEvery), s.cfg.redisMode, s.cfg.redisDown)
	fmt.Fprintf(w, "operations attempted %d, acknowledged %d (%.0f/s acknowledged)\n", att, ack, float64(ack)/s.elapsed.Seconds())
	fmt.Fprintf(w, "  %-16s %9s %9s %8s\n", "op", "attempted", "acked", "mean ms")
	for _, op := range sortedKeys(st.attempted) {
		fmt.Fprintf(w, "  %-16s %9d %9d %8.1f\n", op, st.attempted[op], st.acked[op], float64(st.latency[op].Milliseconds())/float64(st.attempted[op]))
	}
	fmt.Fprintf(w, "writes attempted %d, acknowledged %d; write outcomes: %s\n", sum(st.outcomes), st.outcomes[acked.String()], kv(st.outcomes))
	fmt.Fprintf(w, "errors by kind: %s\n", kv(st.kinds))
	fmt.Fprintf(w, "creates with unknown outcome (IDs never learnt): %s\n", kv(s.unknownCreates))
	for _, e := range s.killErrors {
		fmt.Fprintf(w, "fault injection error: %s\n", e)
	}
	fmt.Fprintf(w, "tracked: %s; pairs %s\n", kv(s.objects), kv(s.pairs))
	fmt.Fprintf(w, "feed fan-out backlog drained in %s\n", s.backlogWait)
	fmt.Fprintf(w, "healing, no command run: %s\n", s.heal)
	fmt.Fprintf(w, "fresh reads: %d reads checked against the version acknowledged before them; %d stale within %v of a fault's end (longest %v); %d stale outside\n",
		s.freshChecked, s.staleWithin, staleBound, s.staleLongest.Round(time.Millisecond), len(s.staleBad))
	fmt.Fprintf(w, "repair, after the checks: %s\n", repairLine(s.repair))
	fmt.Fprintf(w, "repair --dry-run afterwards: %s\n", repairLine(s.repairDry))
	fmt.Fprintf(w, "verification (%s): %d checks passed, %d mismatches\n", s.verifyTime.Round(time.Millisecond), sum(s.res.checks), sum(s.res.mismatches))
	for _, k := range sortedKeys(s.res.checks) {
		fmt.Fprintf(w, "  ok       %7d  %s\n", s.res.checks[k], k)
	}
	for _, k := range sortedKeys(s.res.excluded) {
		fmt.Fprintf(w, "  excluded %7d  %s\n", s.res.excluded[k], k)
	}
	for _, k := range sortedKeys(s.res.explained) {
		fmt.Fprintf(w, "  explained %6d  %s\n", s.res.explained[k], k)
	}
	for _, k := range sortedKeys(s.res.mismatches) {
		fmt.Fprintf(w, "  MISMATCH %7d  %s\n", s.res.mismatches[k], k)
	}
	for i, d := range s.res.explDetail {
		if i >= s.cfg.maxListPrinted {
			fmt.Fprintf(w, "  … %d more\n", len(s.res.explDetail)-i)
			break
		}
		fmt.Fprintf(w, "  explained: %s\n", d)
	}
	for i, d := range s.res.details {
		if i >= s.cfg.maxListPrinted {
			fmt.Fprintf(w, "  … %d more\n", len(s.res.details)-i)
			break
		}
		fmt.Fprintf(w, "  MISMATCH: %s\n", d)
	}
	if sum(s.res.mismatches) == 0 {
		fmt.Fprintf(w, "result: PASS — no acknowledged write lost, every count equals its list\n")
	} else {
		fmt.Fprintf(w, "result: FAIL — %d mismatches\n", sum(s.res.mismatches))
	}
}

func (s *summary) printMarkdown(w io.Writer) {
	st := s.st
	att, ack := sum(st.attempted), sum(st.acked)
	fmt.Fprintf(w, "\n| figure | value |\n| --- | ---: |\n")
	row := func(k string, v any) { fmt.Fprintf(w, "| %s | %v |\n", k, v) }
	row("duration, connections", fmt.Sprintf("%s, %d", s.elapsed.Round(time.Second), s.cfg.conns))
	row("server kills (SIGKILL + restart)", s.kills)
	row("Redis flaps ("+s.cfg.redisMode+", down "+s.cfg.redisDown.String()+")", s.flaps)
	row("operations attempted", att)
	row("acknowledged", fmt.Sprintf("%d (%.0f/s)", ack, float64(ack)/s.elapsed.Seconds()))
	row("writes attempted / acknowledged", fmt.Sprintf("%d / %d", sum(st.outcomes), st.outcomes[acked.String()]))
	row("write outcomes", kv(st.outcomes))
	row("errors by kind", kv(st.kinds))
	row("creates with unknown outcome", kv(s.unknownCreates))
	row("tracked objects / pairs", kv(s.objects)+"; "+kv(s.pairs))
	row("healing, no command run", s.heal)
	row("fresh reads checked / stale within the bound (longest) / stale outside", fmt.Sprintf("%d / %d (%v) / %d", s.freshChecked, s.staleWithin, s.staleLongest.Round(time.Millisecond), len(s.staleBad)))
	row("repair, after the checks", repairLine(s.repair))
	row("checks passed", sum(s.res.checks))
	row("excluded (unknown outcome)", sum(s.res.excluded))
	row("explained by an unacknowledged delete", sum(s.res.explained))
	row("**mismatches**", fmt.Sprintf("**%d**", sum(s.res.mismatches)))
}

func durOrNever(d time.Duration) string {
	if d == 0 {
		return "never"
	}
	return d.String()
}

func kv(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
