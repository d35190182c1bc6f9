package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"
)

const hostHowTo = "install them with: apt-get update && apt-get install -y mariadb-server"

var hostRe = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`)

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
	proc *hostProc   // nil while stopped
	opts HostOptions // how it starts (StartHostWith); under mu
}

// HostOptions start a host with more than the defaults (StartHostWith).
type HostOptions struct {
	// ServerID, when not 0, turns the binary log on with this server_id,
	// with what MariaDB replication with GTIDs asks of every member:
	// log_slave_updates, gtid_strict_mode, row-based events. Without it
	// the host keeps no binary log, as the primary's tests need none.
	ServerID int
	// Args are more mariadbd options (--read-only, semi-synchronous
	// replication …), used at every start until SetArgs changes them.
	Args []string
	// Netns, when set, runs mariadbd inside that network namespace
	// (`ip netns exec`, as root), listening on IP, an address the
	// namespace owns (package netlab makes both), instead of 127.0.0.1.
	// The host's DSN then reaches root over its Unix socket, which no
	// cut between namespaces affects; Addr and AppDSN name IP.
	Netns, IP string
}

// hosts holds every Host this process started, and the shared ones by name.
var hosts struct {
	mu     sync.Mutex
	all    map[*Host]bool
	shared map[string]*sharedHost
	swept  bool // sweepStale has run
}

type sharedHost struct {
	once sync.Once
	host *Host
	err  error
}

// StartHost starts a new MariaDB server for tb alone: a fresh data directory
// (mariadb-install-db, root with an empty password), a free port on
// 127.0.0.1, and returns once it accepts connections. tb.Cleanup kills it and
// deletes its data directory. When mariadbd or mariadb-install-db is missing
// it skips tb, or fails it when CI=true.
func StartHost(tb testing.TB, name string) *Host {
	tb.Helper()
	return StartHostWith(tb, name, HostOptions{})
}

// StartHostWith is StartHost with options: a host with a binary log and a
// server id, for replication, and more mariadbd options.
func StartHostWith(tb testing.TB, name string, opts HostOptions) *Host {
	tb.Helper()
	begin := time.Now()
	h, err := startHostWith(name, opts)
	report(tb, err, hostHowTo)
	tb.Cleanup(h.destroy)
	h.logUp(tb, "host", begin)
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
			s.host.logUp(tb, "shared host", begin)
		}
	})
	report(tb, s.err, hostHowTo)
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.runningLocked() {
		return h
	}
	h.proc = nil
	if err := h.startLocked(); err != nil {
		tb.Fatalf("testenv: restart shared host %s: %v", name, err)
	}
	return h
}

// startHost installs and starts a host and registers it for Cleanup.
func startHost(name string) (*Host, error) { return startHostWith(name, HostOptions{}) }

// startHostWith is startHost with options.
func startHostWith(name string, opts HostOptions) (*Host, error) {
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
	dir, err := newDataDir(name)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	opts.Args = append([]string(nil), opts.Args...)
	h := &Host{name: name, port: port, dir: dir, mariadb: mariadbd, opts: opts}
	hosts.mu.Lock()
	if hosts.all == nil {
		hosts.all = map[*Host]bool{}
	}
	hosts.all[h] = true
	hosts.mu.Unlock()

	if err := h.install(installDB); err != nil {
		h.destroy()
		return nil, err
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

// logUp logs that h (a "host" or "shared host") came up, and how long it took
// since begin.
func (h *Host) logUp(tb testing.TB, what string, begin time.Time) {
	tb.Helper()
	tb.Logf("testenv: %s %s up on port %d in %v (datadir %s)", what, h.name, h.port, time.Since(begin).Round(time.Millisecond), h.dir)
}

// destroy kills the server and deletes its data directory. It is idempotent.
func (h *Host) destroy() {
	h.mu.Lock()
	p := h.proc
	h.proc = nil
	h.mu.Unlock()
	if p != nil {
		p.kill()
	}
	_ = os.RemoveAll(h.dir)
	hosts.mu.Lock()
	delete(hosts.all, h)
	hosts.mu.Unlock()
}

// DSN returns "root@tcp(127.0.0.1:PORT)/", the host's DSN without a database
// (for a host in a network namespace, root over its Unix socket). It stays
// the same across Stop and Start.
func (h *Host) DSN() string {
	if h.opts.Netns != "" {
		return "root@unix(" + filepath.Join(h.dir, socketFile) + ")/"
	}
	return rootDSN(h.Addr())
}

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

// SetArgs replaces the extra mariadbd options (HostOptions.Args) of the
// host's next Start, as an operator changes a server's configuration
// before starting it again.
func (h *Host) SetArgs(args []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.opts.Args = append([]string(nil), args...)
}

// Running reports whether the server process is running (started and not
// stopped or exited).
func (h *Host) Running() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.runningLocked()
}

// runningLocked is Running for a caller holding h.mu.
func (h *Host) runningLocked() bool {
	return h.proc != nil && !h.proc.hasExited()
}
