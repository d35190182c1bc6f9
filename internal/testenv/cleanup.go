package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// A host's data directory is os.TempDir()/dirPrefix+name+"-"+random. It
// holds the pid of the test binary that owns it (ownerFile), so a later run
// can tell a directory left by a killed binary from a live one, and the
// server's socket, pid file and error log beside the databases.
const (
	dirPrefix    = "pinstore-testenv-"
	ownerFile    = "testenv.owner"
	socketFile   = "mysqld.sock"
	pidFile      = "mysqld.pid"
	errorLogFile = "error.log"
)

// newDataDir creates an empty data directory for the host called name, owned
// by this process. Nothing is left behind when it fails.
func newDataDir(name string) (string, error) {
	dir, err := os.MkdirTemp(os.TempDir(), dirPrefix+name+"-")
	if err != nil {
		return "", err
	}
	if len(filepath.Join(dir, socketFile)) > 100 {
		os.RemoveAll(dir)
		return "", fmt.Errorf("data directory %s is too long for a unix socket path; set TMPDIR to a shorter directory", dir)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
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
	purgeContainers()
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
		if pid, err := readPid(filepath.Join(d, pidFile)); err == nil && processAlive(pid) {
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

// ProcessAlive reports whether pid is a live process (not a zombie):
// whether what a run that pid started is still owned.
func ProcessAlive(pid int) bool { return processAlive(pid) }

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
