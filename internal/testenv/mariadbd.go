package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

const (
	hostStartTimeout = 60 * time.Second
	hostStopTimeout  = 60 * time.Second
	portCloseTimeout = 10 * time.Second
)

var binDirs = []string{"/usr/sbin", "/usr/bin", "/usr/libexec", "/usr/local/bin", "/usr/local/sbin", "/usr/local/mysql/bin"}

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

// install runs installDB (mariadb-install-db) on h's empty data directory:
// root with an empty password, no test database. On failure the error holds
// its output.
func (h *Host) install(installDB string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, installDB, append(h.serverArgs(),
		"--auth-root-authentication-method=normal", "--skip-test-db")...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v\n%s", installDB, err, out.String())
	}
	return nil
}

// startLocked starts mariadbd on h's port and data directory and waits until
// it accepts connections; on failure the error holds the error log's tail.
// The caller holds h.mu and h is stopped.
func (h *Host) startLocked() error {
	args := h.serverArgs()
	if id := h.opts.ServerID; id != 0 {
		args = slices.DeleteFunc(args, func(a string) bool { return a == "--skip-log-bin" })
		args = append(args, "--log-bin="+filepath.Join(h.dir, "binlog"), "--server-id="+strconv.Itoa(id),
			"--log-slave-updates", "--gtid-strict-mode=ON", "--binlog-format=ROW")
	}
	bind := "127.0.0.1"
	if h.opts.IP != "" {
		bind = h.opts.IP
	}
	args = append(args,
		"--port="+strconv.Itoa(h.port),
		"--bind-address="+bind,
		"--socket="+filepath.Join(h.dir, socketFile),
		"--pid-file="+filepath.Join(h.dir, pidFile),
		"--log-error="+filepath.Join(h.dir, errorLogFile),
		"--max-connections=500",
		"--table-open-cache=2000",
		"--table-definition-cache=2000",
		"--performance-schema=0",
	)
	args = append(args, h.opts.Args...)
	cmd := exec.Command(h.mariadb, args...)
	if h.opts.Netns != "" {
		// ip execs mariadbd in its own process: Pdeathsig and the
		// process group below still apply to mariadbd.
		cmd = exec.Command("ip", append([]string{"netns", "exec", h.opts.Netns, h.mariadb}, args...)...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	p, err := startProc(cmd)
	if err != nil {
		return err
	}
	h.proc = p
	if err := waitReady(h.DSN(), p, hostStartTimeout); err != nil {
		p.kill()
		h.proc = nil
		log := filepath.Join(h.dir, errorLogFile)
		return fmt.Errorf("%w\n--- tail of %s ---\n%s", err, log, tailFile(log, 2048))
	}
	return nil
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
		p.kill()
	}
	return waitPortClosed(h.Addr(), portCloseTimeout)
}

// hostProc is one run of mariadbd, waited for in the background.
type hostProc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	err    error         // cmd.Wait's result, valid once exited is closed
}

// startProc starts cmd (see startPinned) and waits for it in the background.
func startProc(cmd *exec.Cmd) (*hostProc, error) {
	if err := startPinned(cmd); err != nil {
		return nil, err
	}
	p := &hostProc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// hasExited reports whether the process has exited and been waited for.
func (p *hostProc) hasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and returns once the process has exited.
func (p *hostProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
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

// StartPinned starts cmd from the thread that starts every process this
// package starts, one that never exits, so that a SysProcAttr.Pdeathsig
// fires when the test binary dies and not when some thread retires.
// Other packages starting helpers that must die with the tests (package
// netlab) use it too.
func StartPinned(cmd *exec.Cmd) error { return startPinned(cmd) }

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
		if p.hasExited() {
			return fmt.Errorf("mariadbd exited during start-up: %v", p.err)
		}
		// Dial first: the driver logs to stderr when a ping hits a closed port.
		c, err := net.DialTimeout(cfg.Net, cfg.Addr, time.Second)
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

// waitPortClosed waits until a connection to addr (host:port) is refused.
func waitPortClosed(addr string, timeout time.Duration) error {
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
			return fmt.Errorf("%s still accepting connections after %v", addr, timeout)
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
