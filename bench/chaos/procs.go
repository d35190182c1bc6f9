package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// server is the pinstore process the harness owns: it starts it, SIGKILLs
// it and starts it again.
type server struct {
	bin  string
	addr string
	env  []string
	log  io.Writer

	mu  sync.Mutex
	cmd *exec.Cmd
	// exited is closed when the current process has been waited for.
	exited chan struct{}
	// started is when the current process was started.
	started time.Time
}

// startedAt is when the running server process was started.
func (s *server) startedAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// runTool runs `pinstore args...` with the server's environment and
// returns its standard output.
func (s *server) runTool(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Env = s.env
	var out strings.Builder
	cmd.Stdout = &out
	cmd.Stderr = s.log
	err := cmd.Run()
	if err != nil {
		return []byte(out.String()), fmt.Errorf("%s %s: %w", s.bin, strings.Join(args, " "), err)
	}
	return []byte(out.String()), nil
}

// start starts the server and waits until /healthz answers.
func (s *server) start(timeout time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	cmd := exec.Command(s.bin, "serve", "--addr", s.addr)
	cmd.Env = s.env
	cmd.Stdout = s.log
	cmd.Stderr = s.log
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd = cmd
	s.started = time.Now()
	done := make(chan struct{})
	s.exited = done
	go func() { _ = cmd.Wait(); close(done) }()
	return waitHTTP("http://"+s.addr+"/healthz", timeout, done)
}

// kill SIGKILLs the server and waits for it to be gone.
func (s *server) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	s.cmd = nil
}

// stop asks the server to shut down gracefully.
func (s *server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	waitOrKill(s.cmd, s.exited, 20*time.Second)
	s.cmd = nil
}

// waitOrKill waits up to grace for cmd (asked to stop) to exit, then
// SIGKILLs it and waits.
func waitOrKill(cmd *exec.Cmd, exited <-chan struct{}, grace time.Duration) {
	select {
	case <-exited:
	case <-time.After(grace):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
}

// alive reports whether the current process is still running.
func (s *server) alive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		s.cmd = nil
		return false
	default:
		return true
	}
}

func waitHTTP(url string, timeout time.Duration, exited <-chan struct{}) error {
	hc := &http.Client{Timeout: time.Second}
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		select {
		case <-exited:
			return fmt.Errorf("the server exited during start-up (see its log)")
		default:
		}
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer within %s", url, timeout)
}

// redisServer is the private redis-server the harness owns and flaps.
type redisServer struct {
	port int
	bin  string
	mode string // "restart": stop (SHUTDOWN NOSAVE) and start again; "pause": SIGSTOP, SIGCONT
	log  io.Writer

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

func (r *redisServer) addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

func (r *redisServer) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return nil
	}
	if c, err := net.DialTimeout("tcp", r.addr(), 200*time.Millisecond); err == nil {
		c.Close()
		return fmt.Errorf("something already listens on %s; pick another -redis-port", r.addr())
	}
	cmd := exec.Command(r.bin, "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--hash-max-listpack-entries", "1024", "--daemonize", "no", "--dir", os.TempDir())
	cmd.Stdout, cmd.Stderr = r.log, r.log
	if err := cmd.Start(); err != nil {
		return err
	}
	r.cmd = cmd
	done := make(chan struct{})
	r.exited = done
	go func() { _ = cmd.Wait(); close(done) }()
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) {
		if redisPing(r.addr()) == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("redis-server on %s exited during start-up", r.addr())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("redis-server on %s did not answer PING", r.addr())
}

// stop shuts the private Redis down without saving (its data is gone).
func (r *redisServer) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	if redisCommand(r.addr(), "SHUTDOWN", "NOSAVE") != nil {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
	}
	waitOrKill(r.cmd, r.exited, 10*time.Second)
	r.cmd = nil
}

// flap makes Redis unavailable for down, then available again.
func (r *redisServer) flap(down time.Duration) error {
	if r.mode == "pause" {
		r.mu.Lock()
		p := r.cmd.Process
		r.mu.Unlock()
		_ = p.Signal(syscall.SIGSTOP)
		time.Sleep(down)
		return p.Signal(syscall.SIGCONT)
	}
	r.stop()
	time.Sleep(down)
	return r.start()
}

func redisPing(addr string) error { return redisCommand(addr, "PING") }

// redisCommand sends one RESP command and reads one reply line.
func redisCommand(addr string, args ...string) error {
	c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		if len(args) > 0 && strings.EqualFold(args[0], "SHUTDOWN") && err == io.EOF {
			return nil // SHUTDOWN closes the connection without a reply
		}
		return err
	}
	if strings.HasPrefix(line, "-") {
		return fmt.Errorf("redis: %s", strings.TrimSpace(line))
	}
	return nil
}
