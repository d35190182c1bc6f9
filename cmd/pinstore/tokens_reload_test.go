package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pinstore/pinstore/auth"
)

// TestTokensFileReload: the real server picks up a rewritten tokens file
// without a restart (PINSTORE_TOKENS_POLL): a token added to the file
// starts working, a token removed from it stops, and a malformed file
// keeps the tokens in force and logs an error.
func TestTokensFileReload(t *testing.T) {
	const (
		oldToken = "rotate-old-7d1c0b9a8f7e6d5c4b3a29180706f5e4"
		newToken = "rotate-new-0a1b2c3d4e5f60718293a4b5c6d7e8f9"
	)
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	writeTokens := func(body string) {
		t.Helper()
		// As an operator's tool would: write aside, then rename over.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	file := func(extra ...string) string {
		lines := []string{"tokens:", "  " + auth.HashLine("e2e-admin", auth.ScopeRead|auth.ScopeWrite|auth.ScopeAdmin, e2eAdminToken)}
		for _, l := range extra {
			lines = append(lines, "  "+l)
		}
		return strings.Join(lines, "\n") + "\n"
	}
	writeTokens(file(auth.HashLine("app-old", auth.ScopeRead, oldToken)))
	s := startServerEnv(t, map[string]string{"PINSTORE_TOKENS_FILE": path, "PINSTORE_TOKENS_POLL": "50ms"})

	const anyID = "/v1/ids/241294492511762325"
	status := func(tok string) int { return s.req(http.MethodGet, anyID, nil, bearerHdr(tok)...).Status }
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("after 10s: %s\n%s", what, strings.Join(s.logs.Lines(), "\n"))
			}
			time.Sleep(25 * time.Millisecond)
		}
	}
	if got := status(oldToken); got != http.StatusOK {
		t.Fatalf("old token at start: %d", got)
	}
	if got := status(newToken); got != http.StatusUnauthorized {
		t.Fatalf("new token before rotation: %d, want 401", got)
	}

	// Rotation: the new token replaces the old one in the file.
	writeTokens(file(auth.HashLine("app-new", auth.ScopeRead, newToken)))
	waitFor("the new token works", func() bool { return status(newToken) == http.StatusOK })
	if got := status(oldToken); got != http.StatusUnauthorized {
		t.Fatalf("removed token: %d, want 401", got)
	}
	if !logged(s, `"msg":"service tokens reloaded"`, `"app-new"`) {
		t.Fatalf("no reload line naming app-new:\n%s", strings.Join(s.logs.Lines(), "\n"))
	}

	// A malformed file: logged, and the tokens in force stay.
	writeTokens("tokens:\n  - {name: broken, sha256: nothex, scopes: [read]\n")
	waitFor("an error line for the malformed file", func() bool {
		return logged(s, `"level":"ERROR"`, `"msg":"tokens file rejected; keeping the service tokens in force"`)
	})
	for _, tok := range []string{newToken, e2eAdminToken} {
		if got := status(tok); got != http.StatusOK {
			t.Fatalf("after a malformed file: %.10s… got %d, want 200", tok, got)
		}
	}
	if got := status(oldToken); got != http.StatusUnauthorized {
		t.Fatalf("after a malformed file: removed token got %d", got)
	}
	// A file with no tokens at all is refused the same way (it would lock
	// every client out).
	writeTokens("tokens: []\n")
	waitFor("an error line for the empty file", func() bool {
		return logged(s, `"msg":"tokens file rejected; keeping the service tokens in force"`, "lists no tokens")
	})
	if got := status(newToken); got != http.StatusOK {
		t.Fatalf("after an empty file: %d, want 200", got)
	}
	// Fixed again: put in force.
	writeTokens(file(auth.HashLine("app-old", auth.ScopeRead, oldToken)))
	waitFor("the old token works again", func() bool { return status(oldToken) == http.StatusOK })
	if got := status(newToken); got != http.StatusUnauthorized {
		t.Fatalf("new token after its removal: %d", got)
	}
}

// logged reports whether one server log line holds every part.
func logged(s *server, parts ...string) bool {
	for _, l := range s.logs.Lines() {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}

// TestTokensFileReloadOnSIGHUP: with polling too slow to notice, SIGHUP
// puts a rewritten tokens file in force at once.
func TestTokensFileReloadOnSIGHUP(t *testing.T) {
	const newToken = "hup-new-4c3b2a1908f7e6d5c4b3a2918f7e6d5c"
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	admin := "tokens:\n  " + auth.HashLine("e2e-admin", auth.ScopeRead|auth.ScopeWrite|auth.ScopeAdmin, e2eAdminToken) + "\n"
	if err := os.WriteFile(path, []byte(admin), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServerEnv(t, map[string]string{"PINSTORE_TOKENS_FILE": path, "PINSTORE_TOKENS_POLL": "1h"})
	const anyID = "/v1/ids/241294492511762325"
	if got := s.req(http.MethodGet, anyID, nil, bearerHdr(newToken)...).Status; got != http.StatusUnauthorized {
		t.Fatalf("new token before: %d", got)
	}
	if err := os.WriteFile(path, []byte(admin+"  "+auth.HashLine("app-hup", auth.ScopeRead, newToken)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.req(http.MethodGet, anyID, nil, bearerHdr(newToken)...).Status != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("SIGHUP did not put the new token in force in 5s\n%s", strings.Join(s.logs.Lines(), "\n"))
		}
		time.Sleep(25 * time.Millisecond)
	}
	if !logged(s, `"msg":"service tokens reloaded on SIGHUP"`, `"app-hup"`) {
		t.Fatalf("no SIGHUP reload line:\n%s", strings.Join(s.logs.Lines(), "\n"))
	}
}
