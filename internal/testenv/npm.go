package testenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// npmCITimeout bounds one `npm ci`: it downloads the pinned packages on a
// fresh clone.
const npmCITimeout = 10 * time.Minute

// NodeModules makes sure root/node_modules holds exactly the packages
// root/package-lock.json pins, running `npm ci` in root when it does not
// (a fresh clone, or a lock file changed since the last install), so that
// the repository's one test command needs no step before it. Test
// processes of one go test run share root: an exclusive lock serialises
// the check and the install, so no test reads node_modules while another
// rewrites it (callers read it after NodeModules returns).
//
// It returns the path of root/node_modules/.bin. Without node 20 or later
// and npm, or when npm ci fails, the test is skipped, or fails when
// CI=true, as for a missing server.
func NodeModules(tb testing.TB, root string) string {
	tb.Helper()
	report(tb, nodeModules(tb, root), "install node 20 or later with npm, then run npm ci at the repository root")
	return filepath.Join(root, "node_modules", ".bin")
}

func nodeModules(tb testing.TB, root string) error {
	tb.Helper()
	if err := nodeToolchain(); err != nil {
		return err
	}
	unlock, err := lockFile(filepath.Join(os.TempDir(), "pinstore-npm-"+shortHash(root)+".lock"))
	if err != nil {
		return fmt.Errorf("testenv.NodeModules: %w", err)
	}
	defer unlock()
	why, err := installedAsLocked(root)
	if err != nil {
		return fmt.Errorf("testenv.NodeModules: %w", err)
	}
	if why == "" {
		return nil
	}
	tb.Logf("testenv: %s: running npm ci in %s", why, root)
	ctx, cancel := context.WithTimeout(context.Background(), npmCITimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = root
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("npm ci in %s: %v\n%s: %w", root, err, out.String(), errUnavailable)
	}
	tb.Logf("testenv: npm ci took %.1fs", time.Since(start).Seconds())
	if why, err := installedAsLocked(root); err != nil || why != "" {
		return fmt.Errorf("testenv.NodeModules: after npm ci, node_modules still differs from package-lock.json: %s %v", why, err)
	}
	return nil
}

// nodeToolchain checks for node 20 or later and npm; errUnavailable
// when one is missing.
func nodeToolchain() error {
	node, err := exec.LookPath("node")
	if err != nil {
		return fmt.Errorf("node is not on PATH: %w", errUnavailable)
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return fmt.Errorf("node --version: %v: %w", err, errUnavailable)
	}
	v := strings.TrimSpace(string(out))
	if major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(v, "v"), ".", 2)[0]); major < 20 {
		return fmt.Errorf("node %s is older than 20, which the pinned packages need: %w", v, errUnavailable)
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return fmt.Errorf("npm is not on PATH (it comes with node): %w", errUnavailable)
	}
	return nil
}

// lockInfo is what installedAsLocked reads of a lock file: each package's
// path and version.
type lockInfo struct {
	Packages map[string]struct {
		Version  string `json:"version"`
		Optional bool   `json:"optional"`
	} `json:"packages"`
}

// installedAsLocked compares node_modules/.package-lock.json, the record
// npm keeps of what it installed, with package-lock.json: every installed
// package must have its locked version, and every locked package must be
// installed unless it is optional (other platforms' builds are not). It
// returns why they differ, or "" when they agree.
func installedAsLocked(root string) (string, error) {
	var want, have lockInfo
	b, err := os.ReadFile(filepath.Join(root, "package-lock.json"))
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(b, &want); err != nil {
		return "", fmt.Errorf("package-lock.json: %v", err)
	}
	b, err = os.ReadFile(filepath.Join(root, "node_modules", ".package-lock.json"))
	if errors.Is(err, os.ErrNotExist) {
		return "node_modules is not installed", nil
	}
	if err != nil {
		return "", err
	}
	if err := json.Unmarshal(b, &have); err != nil {
		return "node_modules/.package-lock.json does not parse", nil
	}
	for path, p := range have.Packages {
		if w, ok := want.Packages[path]; !ok || w.Version != p.Version {
			return fmt.Sprintf("%s@%s is installed but package-lock.json pins %q", path, p.Version, w.Version), nil
		}
	}
	for path, p := range want.Packages {
		if _, ok := have.Packages[path]; path != "" && !ok && !p.Optional {
			return fmt.Sprintf("%s@%s is not installed", path, p.Version), nil
		}
	}
	return "", nil
}

// lockFile takes an exclusive flock on path (created if missing) and
// returns its release.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %v", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// shortHash names a path in a flat directory.
func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:6])
}
