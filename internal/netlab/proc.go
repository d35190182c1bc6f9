package netlab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/pinstore/pinstore/internal/testenv"
)

// stopWait is how long Stop waits after SIGTERM before SIGKILL.
const stopWait = 15 * time.Second

// Proc is a process running in a node.
type Proc struct {
	Name string
	Log  string // its standard output and error
	cmd  *exec.Cmd

	exited chan struct{}
	err    error // Wait's result, once exited is closed
}

// Start runs argv in node n (`ip netns exec`, which execs it in the same
// process), with env added to the test's environment less its PINSTORE_*
// variables (a process gets exactly the configuration the test gives
// it), its output in a log file of its own. It dies with the test binary, and is stopped when
// the test ends.
func (l *Lab) Start(n *Node, name string, env []string, argv ...string) *Proc {
	l.tb.Helper()
	log := filepath.Join(l.dir, name+".log")
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		l.tb.Fatalf("netlab: %v", err)
	}
	defer f.Close()
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.NS}, argv...)...)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PINSTORE_") }), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := testenv.StartPinned(cmd); err != nil {
		l.tb.Fatalf("netlab: start %s in %s: %v", name, n.Name, err)
	}
	p := &Proc{Name: name, Log: log, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	l.tb.Cleanup(func() { _ = p.Stop() })
	return p
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM, then SIGKILL after 15 s, and returns once the
// process has ended, with its exit error (nil also when it had ended).
func (p *Proc) Stop() error {
	if p.Exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.err
	case <-time.After(stopWait):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not end within %v of SIGTERM: killed", p.Name, stopWait)
	}
}

// Tail is the last n bytes of the process's log.
func (p *Proc) Tail(n int) string {
	b, err := os.ReadFile(p.Log)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
