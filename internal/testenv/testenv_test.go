package testenv

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) {
	if os.Getenv("TESTENV_ORPHAN_HELPER") == "1" {
		orphanHelper()
		return
	}
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// fakeTB records how a helper ended a test, running it on its own goroutine
// so Fatalf and Skipf can stop it with runtime.Goexit as testing does.
type fakeTB struct {
	testing.TB
	mu       sync.Mutex
	failed   bool
	skipped  bool
	msgs     []string
	cleanups []func()
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) record(failed, skipped bool, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = f.failed || failed
	f.skipped = f.skipped || skipped
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Errorf(format string, args ...any) { f.record(true, false, format, args...) }
func (f *fakeTB) Logf(format string, args ...any)   { f.record(false, false, format, args...) }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.record(true, false, format, args...)
	runtime.Goexit()
}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.record(false, true, format, args...)
	runtime.Goexit()
}
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

// run runs fn(f) to completion or Goexit, then f's cleanups.
func (f *fakeTB) run(fn func(tb testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

func (f *fakeTB) text() string { return strings.Join(f.msgs, "\n") }

func openDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := openMySQL(dsn, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestHostStopStart(t *testing.T) {
	start := time.Now()
	h := StartHost(t, "stopstart")
	t.Logf("host started in %v on port %d, datadir %s", time.Since(start), h.Port(), h.Dir())

	if want := fmt.Sprintf("root@tcp(127.0.0.1:%d)/", h.Port()); h.DSN() != want {
		t.Fatalf("DSN() = %q, want %q", h.DSN(), want)
	}
	if h.Port() == 3306 {
		t.Fatal("host took the primary's port")
	}
	ctx := context.Background()
	db := openDB(t, h.DSN())
	var cs, user string
	if err := db.QueryRowContext(ctx, "SELECT @@character_set_server, CURRENT_USER()").Scan(&cs, &user); err != nil {
		t.Fatal(err)
	}
	if cs != "utf8mb4" || !strings.HasPrefix(user, "root@") {
		t.Fatalf("character set %q user %q, want utf8mb4 and root", cs, user)
	}
	for _, q := range []string{
		"CREATE DATABASE t_stopstart",
		"CREATE TABLE t_stopstart.kv (k INT PRIMARY KEY, v VARCHAR(64)) ENGINE=InnoDB",
		"INSERT INTO t_stopstart.kv VALUES (1, 'pin \U0001F4CC')",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	stopAt := time.Now()
	h.Stop(t)
	t.Logf("host stopped in %v", time.Since(stopAt))
	if h.Running() {
		t.Fatal("Running() after Stop")
	}
	refusedWithin(t, h.Port(), 3*time.Second)
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err == nil {
		t.Fatal("ping succeeded on a stopped host")
	}

	restartAt := time.Now()
	h.Start(t)
	t.Logf("host restarted in %v", time.Since(restartAt))
	var v string
	if err := db.QueryRowContext(ctx, "SELECT v FROM t_stopstart.kv WHERE k = 1").Scan(&v); err != nil {
		t.Fatalf("row after restart: %v", err)
	}
	if v != "pin \U0001F4CC" {
		t.Fatalf("value after restart = %q", v)
	}

	// A crash keeps committed rows too.
	if _, err := db.ExecContext(ctx, "INSERT INTO t_stopstart.kv VALUES (2, 'two')"); err != nil {
		t.Fatal(err)
	}
	h.Kill(t)
	refusedWithin(t, h.Port(), 3*time.Second)
	h.Start(t)
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM t_stopstart.kv").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("rows after crash and restart = %d, want 2", n)
	}
}

// refusedWithin fails t unless a TCP connection to port is refused within d.
func refusedWithin(t *testing.T, port int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err != nil && errors.Is(err, syscall.ECONNREFUSED) {
			return
		}
		if c != nil {
			c.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("port %d not refusing connections after %v (last: %v)", port, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestHostMisuseFails(t *testing.T) {
	h := SharedHost(t, "shared")
	f := &fakeTB{TB: t}
	f.run(func(tb testing.TB) { h.Start(tb) })
	if !f.failed || !strings.Contains(f.text(), "already running") {
		t.Fatalf("Start on a running host: failed=%v msgs=%q", f.failed, f.text())
	}
	h.Stop(t)
	f = &fakeTB{TB: t}
	f.run(func(tb testing.TB) { h.Stop(tb) })
	if !f.failed || !strings.Contains(f.text(), "not running") {
		t.Fatalf("Stop on a stopped host: failed=%v msgs=%q", f.failed, f.text())
	}
	// SharedHost hands back the stopped host running again.
	if h2 := SharedHost(t, "shared"); h2 != h || !h2.Running() {
		t.Fatalf("SharedHost after Stop: same=%v running=%v", h2 == h, h2.Running())
	}
	if err := pingMySQL(h.DSN()); err != nil {
		t.Fatal(err)
	}
}

func TestSharedHost(t *testing.T) {
	a := SharedHost(t, "shared")
	b := SharedHost(t, "shared")
	if a != b {
		t.Fatal("SharedHost returned two hosts for one name")
	}
	c := SharedHost(t, "shared2")
	if c == a || c.Port() == a.Port() || c.Dir() == a.Dir() {
		t.Fatalf("second shared host collides: ports %d %d dirs %s %s", a.Port(), c.Port(), a.Dir(), c.Dir())
	}
	for _, h := range []*Host{a, c} {
		if err := pingMySQL(h.DSN()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStartHostBadName(t *testing.T) {
	f := &fakeTB{TB: t}
	f.run(func(tb testing.TB) { StartHost(tb, "../etc") })
	if !f.failed {
		t.Fatalf("StartHost with a path in its name did not fail: %q", f.text())
	}
}

func TestCleanupKillsHostsAndRemovesDirs(t *testing.T) {
	a := SharedHost(t, "cleanup")
	b, err := startHost("cleanup-unshared")
	if err != nil {
		t.Fatal(err)
	}
	Cleanup()
	for _, h := range []*Host{a, b} {
		refusedWithin(t, h.Port(), 3*time.Second)
		if _, err := os.Stat(h.Dir()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("datadir %s still there after Cleanup: %v", h.Dir(), err)
		}
	}
	Cleanup() // idempotent
	if c := SharedHost(t, "cleanup"); c == a || !c.Running() {
		t.Fatalf("SharedHost after Cleanup: new=%v running=%v", c != a, c.Running())
	}
}

// orphanHelper runs in a child test binary: it starts a host, prints its
// port and data directory, and waits to be killed.
func orphanHelper() {
	h, err := startHost("orphan")
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Println("HOST", h.Port(), h.Dir())
	time.Sleep(time.Minute)
	os.Exit(2)
}

func TestKilledBinaryLeavesNoServer(t *testing.T) {
	if _, err := findBinary(binDirs, "mariadbd", "mysqld"); err != nil {
		report(t, err, hostHowTo)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "TESTENV_ORPHAN_HELPER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %v", err)
	}
	var port int
	var dir string
	if _, err := fmt.Sscanf(line, "HOST %d %s", &port, &dir); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper said %q", line)
	}
	if err := pingMySQL(fmt.Sprintf("root@tcp(127.0.0.1:%d)/", port)); err != nil {
		t.Fatalf("helper's host not up: %v", err)
	}
	cmd.Process.Kill() // SIGKILL: no Cleanup, no deferred calls
	cmd.Wait()
	refusedWithin(t, port, 5*time.Second)

	// The next process's sweep removes the dead owner's data directory.
	if !strings.HasPrefix(dir, filepath.Join(os.TempDir(), dirPrefix)) {
		t.Fatalf("helper datadir %s not under %s", dir, os.TempDir())
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("helper datadir: %v", err)
	}
	hosts.mu.Lock()
	hosts.swept = false
	hosts.mu.Unlock()
	sweepStale()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale datadir %s survived the sweep: %v", dir, err)
	}
}

func TestSweepKeepsLiveOwners(t *testing.T) {
	h := StartHost(t, "sweeplive")
	hosts.mu.Lock()
	hosts.swept = false
	hosts.mu.Unlock()
	sweepStale()
	if _, err := os.Stat(h.Dir()); err != nil {
		t.Fatalf("sweep removed a live host's datadir: %v", err)
	}
	if err := pingMySQL(h.DSN()); err != nil {
		t.Fatalf("sweep hurt a live host: %v", err)
	}
}

func TestMySQLDSN(t *testing.T) {
	dsn := MySQLDSN(t)
	if !strings.HasSuffix(dsn, ")/") {
		t.Fatalf("DSN %q names a database", dsn)
	}
	if err := pingMySQL(dsn); err != nil {
		t.Fatal(err)
	}
}

func TestRedisAddr(t *testing.T) {
	addr := RedisAddr(t)
	if err := pingRedis(addr); err != nil {
		t.Fatal(err)
	}
}

func TestResolve(t *testing.T) {
	refused := fmt.Sprintf("127.0.0.1:%d", FreePort(t)) // nothing listens there
	noDocker := func() (string, error) { return "", fmt.Errorf("no engine: %w", errUnavailable) }
	brokenDocker := func() (string, error) { return "", errors.New("pull failed") }
	goodDocker := func() (string, error) { return "docker:1", nil }
	cases := []struct {
		name     string
		ping     func(string) error
		docker   func() (string, error)
		ci       string
		wantAddr string
		failed   bool
		skipped  bool
	}{
		{"reachable", func(string) error { return nil }, noDocker, "true", refused, false, false},
		{"docker fallback", pingRedis, goodDocker, "true", "docker:1", false, false},
		{"missing outside CI skips", pingRedis, noDocker, "", "", false, true},
		{"missing with CI=false skips", pingRedis, noDocker, "false", "", false, true},
		{"missing in CI fails", pingRedis, noDocker, "true", "", true, false},
		{"broken docker fails even outside CI", pingRedis, brokenDocker, "", "", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("CI", c.ci)
			addr, err := resolve("Redis", refused, c.ping, c.docker)
			f := &fakeTB{TB: t}
			f.run(func(tb testing.TB) { report(tb, err, redisHowTo) })
			if f.failed != c.failed || f.skipped != c.skipped {
				t.Fatalf("failed=%v skipped=%v, want %v %v; msgs %q", f.failed, f.skipped, c.failed, c.skipped, f.text())
			}
			if err == nil && addr != c.wantAddr {
				t.Fatalf("addr %q, want %q", addr, c.wantAddr)
			}
			if (c.failed || c.skipped) && !strings.Contains(f.text(), refused) {
				t.Fatalf("message doesn't name the address %s: %q", refused, f.text())
			}
			if c.failed && c.ci == "true" && !strings.Contains(f.text(), "redis-server") {
				t.Fatalf("CI failure doesn't say how to start Redis: %q", f.text())
			}
		})
	}
}

func TestPingMySQLUnreachableIsQuick(t *testing.T) {
	start := time.Now()
	err := pingMySQL(fmt.Sprintf("root@tcp(127.0.0.1:%d)/", FreePort(t)))
	if err == nil {
		t.Fatal("ping of a closed port succeeded")
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("ping took %v", d)
	}
}

func TestMissingBinary(t *testing.T) {
	_, err := findBinary([]string{t.TempDir()}, "no-such-mariadbd-binary")
	if !errors.Is(err, errUnavailable) {
		t.Fatalf("err = %v, want errUnavailable", err)
	}
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		f := &fakeTB{TB: t}
		f.run(func(tb testing.TB) { report(tb, err, hostHowTo) })
		if f.failed != (ci == "true") || f.skipped != (ci != "true") {
			t.Fatalf("CI=%q: failed=%v skipped=%v", ci, f.failed, f.skipped)
		}
		if !strings.Contains(f.text(), "apt-get install -y mariadb-server") {
			t.Fatalf("message lacks the fix: %q", f.text())
		}
	}
}

func TestFreePort(t *testing.T) {
	seen := map[int]bool{}
	for range 20 {
		p := FreePort(t)
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d not free: %v", p, err)
		}
		l.Close()
	}
}

func TestUniquePrefix(t *testing.T) {
	seen := map[string]bool{}
	for _, base := range []string{"", "t", "store", "abcdefghi", "a1"} {
		for range 50 {
			p := UniquePrefix(t, base)
			if !prefixRe.MatchString(p) || !strings.HasSuffix(p, "_") {
				t.Fatalf("UniquePrefix(%q) = %q, not a valid prefix", base, p)
			}
			if seen[p] {
				t.Fatalf("UniquePrefix returned %q twice", p)
			}
			seen[p] = true
			if strings.HasPrefix(fmt.Sprintf("db%05d", 0), p) {
				t.Fatalf("prefix %q matches a real shard", p)
			}
		}
	}
	for _, base := range []string{"Store", "1t", "a-b", "a_b", "abcdefghij", "t`", "db; DROP"} {
		f := &fakeTB{TB: t}
		f.run(func(tb testing.TB) { UniquePrefix(tb, base) })
		if !f.failed {
			t.Errorf("UniquePrefix(%q) did not fail", base)
		}
	}
}

func TestDropDatabases(t *testing.T) {
	dsn := MySQLDSN(t)
	db := openDB(t, dsn)
	ctx := context.Background()
	prefix := UniquePrefix(t, "drop")
	other := UniquePrefix(t, "keep")
	t.Cleanup(func() { DropDatabases(t, dsn, other) })
	names := []string{prefix + "00000", prefix + "00001", other + "00000"}
	for _, n := range names {
		if _, err := db.ExecContext(ctx, "CREATE DATABASE `"+n+"`"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "CREATE TABLE `"+n+"`.x (id INT PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
	}
	DropDatabases(t, dsn, prefix)
	exists := func(n string) bool {
		var c int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", n).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c == 1
	}
	if exists(names[0]) || exists(names[1]) {
		t.Fatal("prefixed databases survived DropDatabases")
	}
	if !exists(names[2]) {
		t.Fatal("DropDatabases dropped a database with another prefix")
	}
	if !exists("mysql") {
		t.Fatal("mysql schema gone")
	}

	for _, bad := range []string{"", "d", "db", "db0", "mysql", "performance", "t1`;", "Tabc_", "abcdefghijklmnopq_"} {
		f := &fakeTB{TB: t}
		f.run(func(tb testing.TB) { DropDatabases(tb, dsn, bad) })
		if !f.failed {
			t.Errorf("DropDatabases(%q) did not fail", bad)
		}
	}
	// performance_ is a valid prefix but never drops a system schema.
	DropDatabases(t, dsn, "performance_")
	if !exists("performance_schema") {
		t.Fatal("performance_schema dropped")
	}
}

func TestDropKeys(t *testing.T) {
	addr := RedisAddr(t)
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	prefix, other := UniquePrefix(t, "drop"), UniquePrefix(t, "keep")
	t.Cleanup(func() { DropKeys(t, addr, other) })
	for i := range 2500 { // more than one SCAN page
		if err := c.Set(ctx, fmt.Sprintf("%s:o:%d", prefix, i), "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Set(ctx, other+":o:1", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	DropKeys(t, addr, prefix)
	if keys, err := c.Keys(ctx, prefix+"*").Result(); err != nil || len(keys) != 0 {
		t.Fatalf("%d keys under %s survived DropKeys: %v", len(keys), prefix, err)
	}
	if n, err := c.Exists(ctx, other+":o:1").Result(); err != nil || n != 1 {
		t.Fatalf("DropKeys took a key of another prefix: %d %v", n, err)
	}
	for _, bad := range []string{"", "*", "a*", "db"} {
		f := &fakeTB{TB: t}
		f.run(func(tb testing.TB) { DropKeys(tb, addr, bad) })
		if !f.failed {
			t.Errorf("DropKeys(%q) did not fail", bad)
		}
	}
}
