package main

// End-to-end tests of authentication, permissions and rate limits, on the
// real server (startServer, serve_harness_test.go). The harness's default
// client sends e2eAdminToken; a test sends another token with
// s.req(…, "Authorization", "Bearer "+tok), or none with "Authorization", "".

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/auth"
)

// The e2e service tokens' secrets, and the user token secret.
const (
	e2eAdminToken  = "e2e-admin-0f6c4b2a9d8e7f1a3b5c6d7e8f9a0b1c"
	e2eReadToken   = "e2e-read-5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d"
	e2eWriteToken  = "e2e-write-1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d"
	e2eTokenSecret = "e2e-user-token-secret-0123456789abcdef"
)

// e2eTokensFile writes the tokens file the e2e server loads: only hashes.
func e2eTokensFile(t *testing.T) string {
	t.Helper()
	lines := []string{
		"tokens:",
		"  " + auth.HashLine("e2e-admin", auth.ScopeRead|auth.ScopeWrite|auth.ScopeAdmin, e2eAdminToken),
		"  " + auth.HashLine("e2e-read", auth.ScopeRead, e2eReadToken),
		"  " + auth.HashLine("e2e-write", auth.ScopeRead|auth.ScopeWrite, e2eWriteToken),
	}
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// mintUserToken runs `pinstore token mint` as an operator would.
func mintUserToken(t *testing.T, user string, ttl string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	env := map[string]string{"PINSTORE_TOKEN_SECRET": e2eTokenSecret}
	if err := run(context.Background(), []string{"token", "mint", "--user", user, "--ttl", ttl}, func(k string) string { return env[k] }, &out, &errOut); err != nil {
		t.Fatalf("token mint: %v\n%s", err, errOut.String())
	}
	return strings.TrimSpace(out.String())
}

func bearerHdr(tok string) []string { return []string{"Authorization", "Bearer " + tok} }

// as sends a request with tok as the bearer token.
func (s *server) as(tok string, want int, method, path string, body any) *response {
	s.t.Helper()
	r := s.req(method, path, body, bearerHdr(tok)...)
	if r.Status != want {
		s.t.Fatalf("%s %s as %.12s…: status %d, want %d: %s", method, path, tok, r.Status, want, truncate(r.Body))
	}
	if want >= 400 {
		p := r.problem(s.t)
		wantCode := map[int]string{401: "unauthorized", 403: "forbidden", 404: "not_found", 429: "rate_limited"}[want]
		if wantCode != "" && p.Code != wantCode {
			s.t.Fatalf("%s %s: code %q, want %q", method, path, p.Code, wantCode)
		}
	}
	return r
}

func TestAuthE2E(t *testing.T) {
	s := startServer(t)
	const anyID = "/v1/ids/241294492511762325"

	// 401 without a token, with a malformed header, with an unknown token,
	// each with WWW-Authenticate: Bearer.
	for _, h := range [][]string{
		{"Authorization", ""},
		{"Authorization", "Basic YWxpY2U6c2VjcmV0"},
		{"Authorization", "Bearer"},
		{"Authorization", "Bearer not-a-known-token"},
		{"Authorization", "Bearer pu1.241294629943640797.99999999999.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
	} {
		r := s.req(http.MethodGet, anyID, nil, h...)
		if r.Status != http.StatusUnauthorized || r.problem(t).Code != "unauthorized" {
			t.Fatalf("%q: status %d %s, want 401 unauthorized", h[1], r.Status, r.Body)
		}
		if !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("%q: WWW-Authenticate %q", h[1], r.Header.Get("WWW-Authenticate"))
		}
	}
	// The operational routes stay open; /metrics needs admin.
	for _, p := range []string{"/healthz", "/readyz", "/openapi.yaml", "/docs"} {
		s.must(http.StatusOK, http.MethodGet, p, nil, "Authorization", "")
	}
	s.fail(http.StatusUnauthorized, "unauthorized", http.MethodGet, "/metrics", nil, "Authorization", "")
	s.as(e2eReadToken, http.StatusForbidden, http.MethodGet, "/metrics", nil)
	s.as(e2eWriteToken, http.StatusForbidden, http.MethodGet, "/metrics", nil)
	s.as(e2eAdminToken, http.StatusOK, http.MethodGet, "/metrics", nil)

	// A read-scope service token reads but cannot write.
	s.as(e2eReadToken, http.StatusOK, http.MethodGet, anyID, nil)
	s.as(e2eReadToken, http.StatusForbidden, http.MethodPost, "/v1/users", map[string]any{"username": "eve"})

	// A write-scope service token acts for any user.
	alice := object{}
	s.as(e2eWriteToken, http.StatusCreated, http.MethodPost, "/v1/users", map[string]any{"username": "alice"}).decode(t, &alice)
	bob := s.create("/v1/users", map[string]any{"username": "bob"})
	carol := s.create("/v1/users", map[string]any{"username": "carol"})
	bobBoard := object{}
	s.as(e2eWriteToken, http.StatusCreated, http.MethodPost, "/v1/boards", map[string]any{"owner_id": bob.ID, "name": "bob's"}).decode(t, &bobBoard)
	bobPin := s.create("/v1/pins", map[string]any{"board_id": bobBoard.ID, "link": "https://example.com/b"})

	aliceTok := mintUserToken(t, alice.ID, "1h")

	// Reading is open to a user token.
	s.as(aliceTok, http.StatusOK, http.MethodGet, "/v1/users/"+bob.ID, nil)
	s.as(aliceTok, http.StatusOK, http.MethodGet, "/v1/boards/"+bobBoard.ID+"/pins", nil)
	s.as(aliceTok, http.StatusOK, http.MethodPost, "/v1/pins/owners", map[string]any{"ids": []string{bobPin.ID}})
	// A user token creates no users, and no boards for another user.
	s.as(aliceTok, http.StatusForbidden, http.MethodPost, "/v1/users", map[string]any{"username": "mallory"})
	s.as(aliceTok, http.StatusForbidden, http.MethodPost, "/v1/boards", map[string]any{"owner_id": bob.ID, "name": "not mine"})
	// Its own board, and pins on it.
	var aliceBoard, alicePin object
	s.as(aliceTok, http.StatusCreated, http.MethodPost, "/v1/boards", map[string]any{"owner_id": alice.ID, "name": "mine"}).decode(t, &aliceBoard)
	if aliceBoard.OwnerID != alice.ID {
		t.Fatalf("board owner %s, want %s", aliceBoard.OwnerID, alice.ID)
	}
	s.as(aliceTok, http.StatusCreated, http.MethodPost, "/v1/pins", map[string]any{"board_id": aliceBoard.ID, "link": "https://example.com/a"}).decode(t, &alicePin)
	// Not on another's board, and the refusal creates nothing; a board that
	// doesn't exist stays 404; a malformed body is 400 before either.
	counts := func() []int64 {
		return []int64{s.count("/v1/boards/" + bobBoard.ID + "/pins"), s.count("/v1/users/" + bob.ID + "/pins"), s.count("/v1/users/" + alice.ID + "/pins")}
	}
	before := counts()
	s.as(aliceTok, http.StatusForbidden, http.MethodPost, "/v1/pins", map[string]any{"board_id": bobBoard.ID, "link": "https://example.com/x"})
	if after := counts(); !slices.Equal(before, after) {
		t.Fatalf("a refused pin changed the lists (board, bob's, alice's pins): %v, then %v", before, after)
	}
	goneBoard := object{}
	s.as(aliceTok, http.StatusCreated, http.MethodPost, "/v1/boards", map[string]any{"owner_id": alice.ID, "name": "short-lived"}).decode(t, &goneBoard)
	s.as(aliceTok, http.StatusNoContent, http.MethodDelete, "/v1/boards/"+goneBoard.ID, nil)
	s.as(aliceTok, http.StatusNotFound, http.MethodPost, "/v1/pins", map[string]any{"board_id": goneBoard.ID, "link": "https://example.com/y"})
	s.as(aliceTok, http.StatusBadRequest, http.MethodPost, "/v1/pins", map[string]any{"board_id": bobBoard.ID, "link": "https://example.com/z", "owner_id": alice.ID})
	// Its own objects it edits, another's it doesn't.
	s.as(aliceTok, http.StatusOK, http.MethodPatch, "/v1/pins/"+alicePin.ID, map[string]any{"description": "mine"})
	s.as(aliceTok, http.StatusForbidden, http.MethodPatch, "/v1/pins/"+bobPin.ID, map[string]any{"description": "defaced"})
	s.as(aliceTok, http.StatusForbidden, http.MethodDelete, "/v1/pins/"+bobPin.ID, nil)
	s.as(aliceTok, http.StatusForbidden, http.MethodPatch, "/v1/boards/"+bobBoard.ID, map[string]any{"name": "defaced"})
	s.as(aliceTok, http.StatusForbidden, http.MethodDelete, "/v1/boards/"+bobBoard.ID, nil)
	s.as(aliceTok, http.StatusForbidden, http.MethodPatch, "/v1/users/"+bob.ID, map[string]any{"display_name": "defaced"})
	s.as(aliceTok, http.StatusOK, http.MethodPatch, "/v1/users/"+alice.ID, map[string]any{"display_name": "Alice"})
	s.as(aliceTok, http.StatusForbidden, http.MethodPut, "/v1/boards/"+bobBoard.ID+"/pins/"+bobPin.ID+"/position", map[string]any{"before": bobPin.ID})
	if got := s.get("/v1/pins/" + bobPin.ID); got.Description != "" || got.Version != 1 {
		t.Fatalf("bob's pin changed: %+v", got)
	}
	// A pin that doesn't exist: 404, as without auth.
	gone := s.create("/v1/pins", map[string]any{"board_id": aliceBoard.ID, "link": "https://example.com/gone"})
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/pins/"+gone.ID, nil)
	s.as(aliceTok, http.StatusNotFound, http.MethodPatch, "/v1/pins/"+gone.ID, map[string]any{"description": "x"})

	// Follow and like as themself, not as another.
	s.as(aliceTok, http.StatusNoContent, http.MethodPut, "/v1/users/"+alice.ID+"/following/"+bob.ID, nil)
	s.as(aliceTok, http.StatusForbidden, http.MethodPut, "/v1/users/"+carol.ID+"/following/"+bob.ID, nil)
	s.as(aliceTok, http.StatusForbidden, http.MethodDelete, "/v1/users/"+bob.ID+"/following/"+alice.ID, nil)
	s.as(aliceTok, http.StatusNoContent, http.MethodPut, "/v1/users/"+alice.ID+"/likes/"+bobPin.ID, nil)
	s.as(aliceTok, http.StatusForbidden, http.MethodPut, "/v1/users/"+bob.ID+"/likes/"+bobPin.ID, nil)
	s.as(aliceTok, http.StatusNoContent, http.MethodDelete, "/v1/users/"+alice.ID+"/following/"+bob.ID, nil)

	// Comment as themself on anyone's pin; edit only their own comments.
	var aliceComment object
	s.as(aliceTok, http.StatusCreated, http.MethodPost, "/v1/pins/"+bobPin.ID+"/comments", map[string]any{"author_id": alice.ID, "text": "nice"}).decode(t, &aliceComment)
	s.as(aliceTok, http.StatusForbidden, http.MethodPost, "/v1/pins/"+bobPin.ID+"/comments", map[string]any{"author_id": bob.ID, "text": "forged"})
	bobComment := s.create("/v1/pins/"+bobPin.ID+"/comments", map[string]any{"author_id": bob.ID, "text": "thanks"})
	s.as(aliceTok, http.StatusForbidden, http.MethodDelete, "/v1/comments/"+bobComment.ID, nil)
	s.as(aliceTok, http.StatusOK, http.MethodPatch, "/v1/comments/"+aliceComment.ID, map[string]any{"text": "very nice"})
	s.as(aliceTok, http.StatusNoContent, http.MethodDelete, "/v1/comments/"+aliceComment.ID, nil)

	// Expired, tampered, or signed with another secret: 401.
	expired := func() string {
		sg, _ := auth.NewSigner([]byte(e2eTokenSecret))
		tok, err := sg.Mint(mustUint(t, alice.ID), time.Now().Add(-time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}()
	other, _ := auth.NewSigner([]byte("another-secret-another-secret-another"))
	foreign, _ := other.Mint(mustUint(t, alice.ID), time.Now().Add(time.Hour))
	bobTok := mintUserToken(t, bob.ID, "1h")
	tampered := strings.Replace(aliceTok, alice.ID, bob.ID, 1) // bob's id under alice's signature
	for name, tok := range map[string]string{"expired": expired, "foreign": foreign, "tampered": tampered, "truncated": aliceTok[:len(aliceTok)-2]} {
		r := s.req(http.MethodGet, anyID, nil, bearerHdr(tok)...)
		if r.Status != http.StatusUnauthorized {
			t.Fatalf("%s token: status %d", name, r.Status)
		}
	}
	s.as(bobTok, http.StatusOK, http.MethodPatch, "/v1/pins/"+bobPin.ID, map[string]any{"description": "bob's own"})

	// Logs name the principal, never a token or a secret. Access lines are
	// written at least every 100ms: wait for the one of the last request.
	lastID := s.req(http.MethodGet, "/v1/pins/"+bobPin.ID, nil, bearerHdr(aliceTok)...).Header.Get("X-Request-Id")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !strings.Contains(strings.Join(s.logs.Lines(), "\n"), lastID); {
		time.Sleep(20 * time.Millisecond)
	}
	var sawAlice bool
	for _, l := range s.logs.Lines() {
		for _, secret := range []string{aliceTok, bobTok, e2eAdminToken, e2eReadToken, e2eWriteToken, e2eTokenSecret, expired, foreign} {
			if strings.Contains(l, secret) {
				t.Fatalf("a log line holds a token: %s", l)
			}
		}
		if strings.Contains(l, `"principal":"user:`+alice.ID+`"`) {
			sawAlice = true
		}
	}
	if !sawAlice {
		t.Fatalf("no access log line names principal user:%s", alice.ID)
	}
	metrics := string(s.must(http.StatusOK, http.MethodGet, "/metrics", nil).Body)
	for _, secret := range []string{aliceTok, e2eAdminToken, e2eTokenSecret} {
		if strings.Contains(metrics, secret) {
			t.Fatal("/metrics holds a token")
		}
	}
}

func mustUint(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAuthRateLimitE2E(t *testing.T) {
	s := startServerEnv(t, map[string]string{"PINSTORE_RATE_LIMIT": "0.5", "PINSTORE_RATE_BURST": "3"})
	const path = "/v1/ids/241294492511762325"
	for i := 0; i < 3; i++ {
		s.as(e2eReadToken, http.StatusOK, http.MethodGet, path, nil)
	}
	r := s.as(e2eReadToken, http.StatusTooManyRequests, http.MethodGet, path, nil)
	ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 2 {
		t.Fatalf("Retry-After %q, want 1-2 seconds at 0.5/s", r.Header.Get("Retry-After"))
	}
	// The budget is per token: another token is not limited.
	s.as(e2eWriteToken, http.StatusOK, http.MethodGet, path, nil)
}

// TestServeRefusesWithoutAuth: no token configuration, a weak secret, or
// development mode on a non-loopback address all stop serve before it
// opens anything.
func TestServeRefusesWithoutAuth(t *testing.T) {
	for _, tc := range []struct {
		name, addr string
		env        map[string]string
		want       string
	}{
		{"no tokens", "127.0.0.1:0", map[string]string{}, "no tokens configured"},
		{"dev on all interfaces", ":0", map[string]string{"PINSTORE_DEV": "true"}, "loopback"},
		{"dev on a public address", "0.0.0.0:0", map[string]string{"PINSTORE_DEV": "true", "PINSTORE_TOKEN_SECRET": e2eTokenSecret}, "loopback"},
		{"weak secret", "127.0.0.1:0", map[string]string{"PINSTORE_TOKEN_SECRET": "short-secret"}, "at least 32 bytes"},
		{"bad tokens file", "127.0.0.1:0", map[string]string{"PINSTORE_TOKENS_FILE": "/nonexistent/tokens.yaml"}, "PINSTORE_TOKENS_FILE"},
		{"bad dev flag", "127.0.0.1:0", map[string]string{"PINSTORE_DEV": "yes please"}, "PINSTORE_DEV"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := run(ctx, []string{"serve", "--addr", tc.addr}, func(k string) string { return tc.env[k] }, &logs, &logs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("serve: %v, want an error about %q", err, tc.want)
			}
			if strings.Contains(logs.String(), `"listening"`) {
				t.Fatal("serve listened")
			}
			if strings.Contains(err.Error(), "short-secret") {
				t.Fatal("the error shows the secret")
			}
		})
	}
}

// TestServeDevModeE2E: PINSTORE_DEV=true without tokens serves on loopback
// without authentication and says so at WARN.
func TestServeDevModeE2E(t *testing.T) {
	s := startServerEnv(t, map[string]string{"PINSTORE_DEV": "true", "PINSTORE_TOKENS_FILE": "", "PINSTORE_TOKEN_SECRET": ""})
	s.must(http.StatusOK, http.MethodGet, "/v1/ids/241294492511762325", nil, "Authorization", "")
	var warned bool
	for _, l := range s.logs.Lines() {
		if strings.Contains(l, `"level":"WARN"`) && strings.Contains(l, "AUTHENTICATION IS OFF") {
			warned = true
		}
	}
	if !warned {
		t.Fatal("no WARN that authentication is off")
	}
}
