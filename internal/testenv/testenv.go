// Package testenv gives integration tests the servers they run against: the
// primary MariaDB and Redis, extra MariaDB hosts a test starts, stops and
// restarts itself, and database-name prefixes that keep test data away from
// real shards.
//
// Invariants:
//
//   - A server that isn't there never passes silently in CI: when MariaDB or
//     Redis is unreachable and no Docker engine can supply one, the test is
//     skipped, unless the environment variable CI is "true", in which case it
//     fails with a message naming the address and how to start the server.
//   - Every DSN this package returns names no database
//     ("root@tcp(127.0.0.1:3306)/"); callers append a database name or
//     "?param=value" themselves.
//   - Database names a test creates start with a prefix from [UniquePrefix],
//     which ends in "_", so they can never equal a real shard name
//     ("db%05d", no underscore), and [DropDatabases] only drops names that
//     start with such a prefix.
//   - Every mariadbd this package starts dies with the test binary (Pdeathsig),
//     even when the binary is killed; [Cleanup] also deletes their data
//     directories, and a later run removes directories left by a killed one.
//
// The package keeps per-process state (the resolved servers, the hosts it
// started): that is the point of it, since one test binary shares one server
// among its tests and must stop what it started when it exits.
package testenv

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
	"github.com/redis/go-redis/v9"
)

// Environment variables and defaults naming the primary servers.
const (
	EnvMySQLDSN      = "PINSTORE_TEST_MYSQL_DSN"
	EnvRedisAddr     = "PINSTORE_TEST_REDIS_ADDR"
	DefaultMySQLDSN  = "root@tcp(127.0.0.1:3306)/"
	DefaultRedisAddr = "127.0.0.1:6379"
)

const (
	pingTimeout      = 3 * time.Second
	hostStartTimeout = 60 * time.Second
	hostStopTimeout  = 60 * time.Second
	portCloseTimeout = 10 * time.Second
	dirPrefix        = "pinstore-testenv-"
	ownerFile        = "testenv.owner"
)

const (
	mysqlHowTo = "start MariaDB with: mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld && " +
		"start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd " +
		"(or set " + EnvMySQLDSN + " to a reachable server, e.g. " + DefaultMySQLDSN + ")"
	redisHowTo = "start Redis with: redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 " +
		"--save \"\" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log " +
		"(or set " + EnvRedisAddr + " to a reachable server, e.g. " + DefaultRedisAddr + ")"
	hostHowTo = "install them with: apt-get update && apt-get install -y mariadb-server"
)

// errUnavailable marks a missing server or binary: a skip outside CI, a
// failure in CI. Any other error is always a failure.
var errUnavailable = errors.New("unavailable")

// inCI reports whether missing servers must fail the test rather than skip it.
func inCI() bool { return os.Getenv("CI") == "true" }

// report ends tb according to err: nothing when err is nil, Skip or Fatal (in
// CI) when err wraps errUnavailable, Fatal otherwise.
func report(tb testing.TB, err error, howTo string) {
	tb.Helper()
	switch {
	case err == nil:
	case !errors.Is(err, errUnavailable):
		tb.Fatalf("testenv: %v", err)
	case inCI():
		tb.Fatalf("\n*** testenv: CI=true and a required server is missing; this is a failure, not a skip ***\n%v\nTo fix: %s", err, howTo)
	default:
		tb.Skipf("testenv: %v; skipping (set CI=true to make this a failure). To run it: %s", err, howTo)
	}
}

// resolution is the per-process answer to "where is the server?".
type resolution struct {
	once sync.Once
	addr string
	err  error
}

var (
	mysqlRes resolution
	redisRes resolution
)

// resolve returns addr if ping accepts it, else the address of a server
// started by docker. It wraps errUnavailable when ping fails and docker
// reports errUnavailable.
func resolve(what, addr string, ping func(string) error, docker func() (string, error)) (string, error) {
	perr := ping(addr)
	if perr == nil {
		return addr, nil
	}
	daddr, derr := docker()
	if derr == nil {
		return daddr, nil
	}
	if errors.Is(derr, errUnavailable) {
		return "", fmt.Errorf("%s is not reachable at %s (%v) and no Docker engine can start one (%v): %w",
			what, addr, perr, derr, errUnavailable)
	}
	return "", fmt.Errorf("%s is not reachable at %s (%v) and starting it in Docker failed: %v", what, addr, perr, derr)
}

// MySQLDSN returns the DSN of the primary MariaDB, without a database name
// (e.g. "root@tcp(127.0.0.1:3306)/"): the value of PINSTORE_TEST_MYSQL_DSN, or
// DefaultMySQLDSN, once it answers a ping within 3s. When it doesn't and a
// Docker engine is reachable, it starts mariadb:10.11 (once per process,
// removed by [Cleanup] or after 30 minutes) and returns its DSN. Otherwise it
// skips tb, or fails it when CI=true. The answer is computed once per process.
func MySQLDSN(tb testing.TB) string {
	tb.Helper()
	mysqlRes.once.Do(func() {
		mysqlRes.addr, mysqlRes.err = resolve("MariaDB", envOr(EnvMySQLDSN, DefaultMySQLDSN), pingMySQL, dockerMySQL)
	})
	report(tb, mysqlRes.err, mysqlHowTo)
	return mysqlRes.addr
}

// RedisAddr returns the host:port of the primary Redis: the value of
// PINSTORE_TEST_REDIS_ADDR, or DefaultRedisAddr, once it answers PING within
// 3s. When it doesn't and a Docker engine is reachable, it starts redis:7 with
// hash-max-listpack-entries 1024 (once per process) and returns its address.
// Otherwise it skips tb, or fails it when CI=true.
func RedisAddr(tb testing.TB) string {
	tb.Helper()
	redisRes.once.Do(func() {
		redisRes.addr, redisRes.err = resolve("Redis", envOr(EnvRedisAddr, DefaultRedisAddr), pingRedis, dockerRedis)
	})
	report(tb, redisRes.err, redisHowTo)
	return redisRes.addr
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// openMySQL opens a pool on dsn with connect, read and write timeouts of d.
func openMySQL(dsn string, d time.Duration) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse DSN %q: %w", dsn, err)
	}
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = d, d, d
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

func pingMySQL(dsn string) error {
	db, err := openMySQL(dsn, pingTimeout)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	return db.PingContext(ctx)
}

func pingRedis(addr string) error {
	c := redis.NewClient(&redis.Options{
		Addr:          addr,
		DialTimeout:   pingTimeout,
		ReadTimeout:   pingTimeout,
		WriteTimeout:  pingTimeout,
		MaxRetries:    -1,
		DialerRetries: 1,
	})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	return c.Ping(ctx).Err()
}

// docker holds the per-process Docker pool and the containers it started.
var docker struct {
	mu         sync.Mutex
	pool       *dockertest.Pool
	poolErr    error
	poolDone   bool
	containers []*dockertest.Resource
}

// dockerPool returns a pool on a Docker engine that answered a ping, or an
// error wrapping errUnavailable.
func dockerPool() (*dockertest.Pool, error) {
	docker.mu.Lock()
	defer docker.mu.Unlock()
	if !docker.poolDone {
		docker.poolDone = true
		docker.pool, docker.poolErr = newDockerPool()
	}
	return docker.pool, docker.poolErr
}

func newDockerPool() (*dockertest.Pool, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, errUnavailable)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	if err := pool.Client.PingWithContext(ctx); err != nil {
		return nil, fmt.Errorf("docker: %v: %w", err, errUnavailable)
	}
	pool.MaxWait = 2 * time.Minute
	return pool, nil
}

// runContainer starts opts, waits until ready(host:port of port) succeeds and
// returns that address. The container removes itself after 30 minutes even if
// Cleanup never runs.
func runContainer(opts *dockertest.RunOptions, port string, ready func(string) error) (string, error) {
	pool, err := dockerPool()
	if err != nil {
		return "", err
	}
	res, err := pool.RunWithOptions(opts, func(hc *dc.HostConfig) {
		hc.AutoRemove = true
		hc.RestartPolicy = dc.RestartPolicy{Name: "no"}
	})
	if err != nil {
		return "", fmt.Errorf("docker run %s:%s: %w", opts.Repository, opts.Tag, err)
	}
	docker.mu.Lock()
	docker.containers = append(docker.containers, res)
	docker.mu.Unlock()
	_ = res.Expire(30 * 60)
	addr := res.GetHostPort(port)
	if err := pool.Retry(func() error { return ready(addr) }); err != nil {
		return "", fmt.Errorf("docker %s:%s at %s never became ready: %w", opts.Repository, opts.Tag, addr, err)
	}
	return addr, nil
}

func dockerMySQL() (string, error) {
	addr, err := runContainer(&dockertest.RunOptions{
		Repository: "mariadb",
		Tag:        "10.11",
		Env:        []string{"MARIADB_ALLOW_EMPTY_ROOT_PASSWORD=1"},
		Cmd: []string{"--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci",
			"--skip-name-resolve", "--max-connections=500"},
	}, "3306/tcp", func(addr string) error { return pingMySQL("root@tcp(" + addr + ")/") })
	if err != nil {
		return "", err
	}
	return "root@tcp(" + addr + ")/", nil
}

func dockerRedis() (string, error) {
	return runContainer(&dockertest.RunOptions{
		Repository: "redis",
		Tag:        "7",
		Cmd:        []string{"redis-server", "--hash-max-listpack-entries", "1024"},
	}, "6379/tcp", pingRedis)
}

// ports remembers the ports FreePort handed out, so one process never hands
// out the same port twice (a stopped Host keeps its port).
var ports struct {
	mu   sync.Mutex
	used map[int]bool
}

// FreePort returns a TCP port on 127.0.0.1 that was free when it was chosen
// and that this process has not handed out before. Another process may still
// take it before the caller binds it.
func FreePort(tb testing.TB) int {
	tb.Helper()
	p, err := freePort()
	if err != nil {
		tb.Fatalf("testenv.FreePort: %v", err)
	}
	return p
}

func freePort() (int, error) {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.used == nil {
		ports.used = map[int]bool{}
	}
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !ports.used[p] {
			ports.used[p] = true
			return p, nil
		}
	}
	return 0, errors.New("no unused port after 100 tries")
}

var (
	baseRe   = regexp.MustCompile(`^[a-z][a-z0-9]{0,8}$`)
	prefixRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,15}$`)
	dbNameRe = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)
	hostRe   = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`)
)

// systemSchemas are never dropped, whatever the prefix.
var systemSchemas = map[string]bool{
	"mysql": true, "information_schema": true, "performance_schema": true, "sys": true,
}

// UniquePrefix returns a database-name prefix unique to this call:
// base, 6 random hex digits and "_", e.g. "store3fa91c_". base must match
// ^[a-z][a-z0-9]{0,8}$ ("" means "t"); the result always matches
// ^[a-z][a-z0-9_]{0,15}$ and ends in "_", so names built from it can never be
// a real shard ("db%05d"). Register [DropDatabases] with tb.Cleanup to remove
// what the test creates.
func UniquePrefix(tb testing.TB, base string) string {
	tb.Helper()
	if base == "" {
		base = "t"
	}
	if !baseRe.MatchString(base) {
		tb.Fatalf("testenv.UniquePrefix: base %q must match %s", base, baseRe)
		return ""
	}
	// A random start per process plus a counter: never the same suffix
	// twice in one process (24 random bits alone repeated within a few
	// hundred calls now and then), and unlikely across processes.
	prefixStart.Do(func() {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			tb.Fatalf("testenv.UniquePrefix: %v", err)
		}
		prefixSeq.Store(binary.BigEndian.Uint32(b[:]))
	})
	v := prefixSeq.Add(1) & 0xFFFFFF
	return base + hex.EncodeToString([]byte{byte(v >> 16), byte(v >> 8), byte(v)}) + "_"
}

var (
	prefixStart sync.Once
	prefixSeq   atomic.Uint32
)

// DropKeys deletes every key of the Redis at addr that starts with prefix,
// which must be one of UniquePrefix's (so it never matches a real key
// prefix). Failures are reported with tb.Errorf, so it is safe in
// tb.Cleanup.
func DropKeys(tb testing.TB, addr, prefix string) {
	tb.Helper()
	if !prefixRe.MatchString(prefix) || !strings.HasSuffix(prefix, "_") {
		tb.Errorf("testenv.DropKeys: prefix %q must match %s and end in \"_\"", prefix, prefixRe)
		return
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err == nil && len(keys) > 0 {
			err = c.Unlink(ctx, keys...).Err()
		}
		if err != nil {
			tb.Errorf("testenv.DropKeys %s*: %v", prefix, err)
			return
		}
		if cursor = next; cursor == 0 {
			return
		}
	}
}

// DropDatabases drops every database on the server at dsn whose name starts
// with prefix, except the system schemas. prefix must match
// ^[a-z][a-z0-9_]{0,15}$ and end in "_" (as UniquePrefix's do), so it can
// never match a real shard. Failures are reported with tb.Errorf, not Fatal,
// so it is safe in tb.Cleanup and the remaining cleanups still run.
func DropDatabases(tb testing.TB, dsn, prefix string) {
	tb.Helper()
	if err := dropDatabases(dsn, prefix); err != nil {
		tb.Errorf("testenv.DropDatabases: %v", err)
	}
}

func dropDatabases(dsn, prefix string) error {
	if !prefixRe.MatchString(prefix) || !strings.HasSuffix(prefix, "_") {
		return fmt.Errorf("prefix %q must match %s and end in \"_\"", prefix, prefixRe)
	}
	db, err := openMySQL(dsn, 30*time.Second)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SELECT schema_name FROM information_schema.schemata")
	if err != nil {
		return err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		if strings.HasPrefix(n, prefix) && !systemSchemas[n] {
			names = append(names, n)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, n := range names {
		if !dbNameRe.MatchString(n) {
			return fmt.Errorf("refusing to drop database with unexpected name %q", n)
		}
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+n+"`"); err != nil {
			return fmt.Errorf("drop %s: %w", n, err)
		}
	}
	return nil
}

// Host is a MariaDB server a test started with StartHost or SharedHost: its
// own data directory under os.TempDir(), its own port on 127.0.0.1, root with
// an empty password, utf8mb4 like the primary. Its methods are safe for
// concurrent use, but a test that stops a host must make sure no other test
// is using it at the same time.
type Host struct {
	name    string
	port    int
	dir     string // data directory, also holding socket, pid file and error log
	mariadb string // path of mariadbd

	mu   sync.Mutex
	proc *hostProc // nil while stopped
}

type hostProc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	err    error         // cmd.Wait's result, valid once exited is closed
}

// DSN returns "root@tcp(127.0.0.1:PORT)/", the host's DSN without a database.
// It stays the same across Stop and Start.
func (h *Host) DSN() string { return fmt.Sprintf("root@tcp(127.0.0.1:%d)/", h.port) }

// Port returns the TCP port the host listens on; it stays the same across
// Stop and Start.
func (h *Host) Port() int { return h.port }

// Name returns the name the host was started with.
func (h *Host) Name() string { return h.name }

// Dir returns the host's data directory (its error log is Dir()/error.log).
func (h *Host) Dir() string { return h.dir }

// Stop shuts the server down cleanly (SIGTERM, SIGKILL after 60s) and returns
// once the process has exited and connections to its port are refused. It
// fails tb if the host isn't running.
func (h *Host) Stop(tb testing.TB) {
	tb.Helper()
	if err := h.stop(syscall.SIGTERM); err != nil {
		tb.Fatalf("testenv: stop host %s: %v", h.name, err)
	}
}

// Kill kills the server with SIGKILL, as a crash would, and returns once the
// process has exited and connections to its port are refused. Committed
// transactions survive: the next Start runs InnoDB crash recovery. It fails
// tb if the host isn't running.
func (h *Host) Kill(tb testing.TB) {
	tb.Helper()
	if err := h.stop(syscall.SIGKILL); err != nil {
		tb.Fatalf("testenv: kill host %s: %v", h.name, err)
	}
}

// Start restarts a stopped server on the same port and data directory and
// returns once it accepts connections. It fails tb if the host is running or
// doesn't come up within 60s (the message holds the error log's tail).
func (h *Host) Start(tb testing.TB) {
	tb.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.proc != nil {
		tb.Fatalf("testenv: start host %s: already running", h.name)
	}
	if err := h.startLocked(); err != nil {
		tb.Fatalf("testenv: start host %s: %v", h.name, err)
	}
}

// Running reports whether the server process is running (started and not
// stopped or exited).
func (h *Host) Running() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.proc == nil {
		return false
	}
	select {
	case <-h.proc.exited:
		return false
	default:
		return true
	}
}

func (h *Host) stop(sig syscall.Signal) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.proc
	if p == nil {
		return errors.New("not running")
	}
	h.proc = nil
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(hostStopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	return waitPortClosed(h.port, portCloseTimeout)
}

// serverArgs are the mariadbd options shared by install and start. They
// match the primary's character set and name resolution (Debian's config
// sets them; --no-defaults would give latin1) and trade durability against
// OS crashes, which tests don't simulate, for speed.
func (h *Host) serverArgs() []string {
	args := []string{
		"--no-defaults",
		"--datadir=" + h.dir,
		// Its own temporary files: bootstraps sharing /tmp delete each
		// other's (seen: "Error on delete of '/tmp/#sql-temptable-…'").
		"--tmpdir=" + h.dir,
		"--character-set-server=utf8mb4",
		"--collation-server=utf8mb4_general_ci",
		"--skip-name-resolve",
		"--innodb-buffer-pool-size=64M",
		"--innodb-log-file-size=32M",
		"--innodb-flush-log-at-trx-commit=2",
		"--innodb-doublewrite=0",
		"--innodb-buffer-pool-dump-at-shutdown=0",
		"--innodb-buffer-pool-load-at-startup=0",
		"--skip-log-bin",
	}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	return args
}

func (h *Host) startLocked() error {
	args := append(h.serverArgs(),
		"--port="+strconv.Itoa(h.port),
		"--bind-address=127.0.0.1",
		"--socket="+filepath.Join(h.dir, "mysqld.sock"),
		"--pid-file="+filepath.Join(h.dir, "mysqld.pid"),
		"--log-error="+filepath.Join(h.dir, "error.log"),
		"--max-connections=500",
		"--table-open-cache=2000",
		"--table-definition-cache=2000",
		"--performance-schema=0",
	)
	cmd := exec.Command(h.mariadb, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := startPinned(cmd); err != nil {
		return err
	}
	p := &hostProc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	h.proc = p
	if err := waitReady(h.DSN(), p, hostStartTimeout); err != nil {
		_ = cmd.Process.Kill()
		<-p.exited
		h.proc = nil
		return fmt.Errorf("%w\n--- tail of %s ---\n%s", err, filepath.Join(h.dir, "error.log"), tailFile(filepath.Join(h.dir, "error.log"), 2048))
	}
	return nil
}

// destroy kills the server and deletes its data directory. It is idempotent.
func (h *Host) destroy() {
	h.mu.Lock()
	p := h.proc
	h.proc = nil
	h.mu.Unlock()
	if p != nil {
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	_ = os.RemoveAll(h.dir)
	hosts.mu.Lock()
	delete(hosts.all, h)
	hosts.mu.Unlock()
}

// waitReady waits until dsn answers a ping or p exits.
func waitReady(dsn string, p *hostProc, timeout time.Duration) error {
	db, err := openMySQL(dsn, time.Second)
	if err != nil {
		return err
	}
	defer db.Close()
	cfg, _ := mysql.ParseDSN(dsn)
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-p.exited:
			return fmt.Errorf("mariadbd exited during start-up: %v", p.err)
		default:
		}
		// Dial first: the driver logs to stderr when a ping hits a closed port.
		c, err := net.DialTimeout("tcp", cfg.Addr, time.Second)
		if err == nil {
			c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err = db.PingContext(ctx)
			cancel()
			if err == nil {
				return nil
			}
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not accepting connections after %v: %v", timeout, last)
}

// waitPortClosed waits until a connection to 127.0.0.1:port is refused.
func waitPortClosed(port int, timeout time.Duration) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) {
				return nil
			}
		} else {
			c.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("port %d still accepting connections after %v", port, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tailFile(path string, n int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}

// spawner starts processes from one goroutine locked to an OS thread that
// never exits: Pdeathsig fires when the creating thread exits, not the
// process, and the Go runtime may retire other threads.
var spawner struct {
	once sync.Once
	reqs chan spawnReq
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

func startPinned(cmd *exec.Cmd) error {
	spawner.once.Do(func() {
		spawner.reqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for r := range spawner.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawner.reqs <- spawnReq{cmd: cmd, done: done}
	return <-done
}

// hosts holds every Host this process started, and the shared ones by name.
var hosts struct {
	mu     sync.Mutex
	all    map[*Host]bool
	shared map[string]*sharedHost
	swept  bool
}

type sharedHost struct {
	once sync.Once
	host *Host
	err  error
}

// findBinary returns the first of names found on PATH or in dirs.
func findBinary(dirs []string, names ...string) (string, error) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
		for _, d := range dirs {
			p := filepath.Join(d, n)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("%s not found on PATH or in %s: %w", strings.Join(names, "/"), strings.Join(dirs, ", "), errUnavailable)
}

var binDirs = []string{"/usr/sbin", "/usr/bin", "/usr/libexec", "/usr/local/bin", "/usr/local/sbin", "/usr/local/mysql/bin"}

// StartHost starts a new MariaDB server for tb alone: a fresh data directory
// (mariadb-install-db, root with an empty password), a free port on
// 127.0.0.1, and returns once it accepts connections. tb.Cleanup kills it and
// deletes its data directory. When mariadbd or mariadb-install-db is missing
// it skips tb, or fails it when CI=true.
func StartHost(tb testing.TB, name string) *Host {
	tb.Helper()
	begin := time.Now()
	h, err := startHost(name)
	report(tb, err, hostHowTo)
	tb.Cleanup(h.destroy)
	tb.Logf("testenv: host %s up on port %d in %v (datadir %s)", name, h.port, time.Since(begin).Round(time.Millisecond), h.dir)
	return h
}

// SharedHost returns the process's host called name, starting it the first
// time (as StartHost does) and restarting it if a test left it stopped. It
// lives until [Cleanup], which the package's TestMain must call. If starting
// it failed once, every later call fails (or skips) the same way.
func SharedHost(tb testing.TB, name string) *Host {
	tb.Helper()
	hosts.mu.Lock()
	if hosts.shared == nil {
		hosts.shared = map[string]*sharedHost{}
	}
	s := hosts.shared[name]
	if s == nil {
		s = &sharedHost{}
		hosts.shared[name] = s
	}
	hosts.mu.Unlock()
	s.once.Do(func() {
		begin := time.Now()
		s.host, s.err = startHost(name)
		if s.err == nil {
			tb.Logf("testenv: shared host %s up on port %d in %v (datadir %s)", name, s.host.port, time.Since(begin).Round(time.Millisecond), s.host.dir)
		}
	})
	report(tb, s.err, hostHowTo)
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.proc != nil {
		select {
		case <-h.proc.exited:
			h.proc = nil
		default:
			return h
		}
	}
	if err := h.startLocked(); err != nil {
		tb.Fatalf("testenv: restart shared host %s: %v", name, err)
	}
	return h
}

// startHost installs and starts a host and registers it for Cleanup.
func startHost(name string) (*Host, error) {
	if !hostRe.MatchString(name) {
		return nil, fmt.Errorf("host name %q must match %s", name, hostRe)
	}
	mariadbd, err := findBinary(binDirs, "mariadbd", "mysqld")
	if err != nil {
		return nil, err
	}
	installDB, err := findBinary(binDirs, "mariadb-install-db", "mysql_install_db")
	if err != nil {
		return nil, err
	}
	sweepStale()
	dir, err := os.MkdirTemp(os.TempDir(), dirPrefix+name+"-")
	if err != nil {
		return nil, err
	}
	if len(filepath.Join(dir, "mysqld.sock")) > 100 {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("data directory %s is too long for a unix socket path; set TMPDIR to a shorter directory", dir)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	h := &Host{name: name, port: port, dir: dir, mariadb: mariadbd}
	hosts.mu.Lock()
	if hosts.all == nil {
		hosts.all = map[*Host]bool{}
	}
	hosts.all[h] = true
	hosts.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, installDB, append(h.serverArgs(),
		"--auth-root-authentication-method=normal", "--skip-test-db")...)
	install.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	install.Stdout, install.Stderr = &out, &out
	if err := install.Run(); err != nil {
		h.destroy()
		return nil, fmt.Errorf("%s: %v\n%s", installDB, err, out.String())
	}
	h.mu.Lock()
	err = h.startLocked()
	h.mu.Unlock()
	if err != nil {
		h.destroy()
		return nil, fmt.Errorf("start host %s: %v", name, err)
	}
	return h, nil
}

// sweepStale removes, once per process, data directories left by test
// binaries that died without Cleanup, killing their mariadbd if it somehow
// survived. A directory whose owner is still alive is left alone.
func sweepStale() {
	hosts.mu.Lock()
	done := hosts.swept
	hosts.swept = true
	hosts.mu.Unlock()
	if done {
		return
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range dirs {
		owner, err := readPid(filepath.Join(d, ownerFile))
		if err != nil || processAlive(owner) {
			continue
		}
		if pid, err := readPid(filepath.Join(d, "mysqld.pid")); err == nil && processAlive(pid) {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if bytes.Contains(cmdline, []byte("--datadir="+d+"\x00")) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			} else {
				continue
			}
		}
		_ = os.RemoveAll(d)
	}
}

func readPid(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// processAlive reports whether pid is a live process. A zombie (dead, not
// yet reaped, as orphans are in containers whose init doesn't reap) is not.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// Format: pid (comm) state ...; comm may hold spaces and parentheses.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z' && stat[i+2] != 'X'
	}
	return true
}

// Cleanup kills every host this process started and deletes their data
// directories, and removes the Docker containers MySQLDSN and RedisAddr
// started. Call it from TestMain after m.Run:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		testenv.Cleanup()
//		os.Exit(code)
//	}
//
// It is idempotent; a SharedHost call after it starts a new host.
func Cleanup() {
	hosts.mu.Lock()
	all := make([]*Host, 0, len(hosts.all))
	for h := range hosts.all {
		all = append(all, h)
	}
	hosts.shared = nil
	hosts.mu.Unlock()
	var wg sync.WaitGroup
	for _, h := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.destroy()
		}()
	}
	wg.Wait()

	docker.mu.Lock()
	cs := docker.containers
	docker.containers = nil
	pool := docker.pool
	docker.mu.Unlock()
	for _, c := range cs {
		_ = pool.Purge(c)
	}
}
