package main

// What the documents tell a new user about operating details, checked on the
// real server and commands: readiness with Redis turned off, the exit
// status of `pinstore shards`, what a repeated DELETE answers, and the
// tokens-file line `token hash` prints.

import (
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pinstore/pinstore/auth"
	"github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/internal/testenv"
)

// TestReadyzRedisDisabled: with PINSTORE_REDIS_DISABLED=true, /readyz
// says Redis is disabled, never that it is ok, and the server is ready.
func TestReadyzRedisDisabled(t *testing.T) {
	s := startServerEnv(t, map[string]string{"PINSTORE_REDIS_DISABLED": "true"})
	var ready struct {
		Status string
		Checks []fleet.Health
	}
	s.must(http.StatusOK, http.MethodGet, "/readyz", nil).decode(t, &ready)
	var redis *fleet.Health
	for i, c := range ready.Checks {
		switch {
		case c.Name == "redis":
			redis = &ready.Checks[i]
		case !c.OK || c.Disabled:
			t.Errorf("check %+v", c)
		}
	}
	if ready.Status != "ok" || redis == nil || redis.OK || !redis.Disabled || redis.Error != "" {
		t.Fatalf("readyz with Redis disabled: %+v", ready)
	}
}

// TestShardsExitStatus: `pinstore shards` prints every host and fails
// (exit 1 from main) when any host of the map does not answer, or answers
// without the shard databases the map routes to it, naming it.
func TestShardsExitStatus(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	prefix := testenv.UniquePrefix(t, "se")
	t.Cleanup(func() { testenv.DropDatabases(t, dsn, prefix) })
	env := map[string]string{"PINSTORE_MYSQL_DSN": dsn, "PINSTORE_SHARDS": "8", "PINSTORE_DB_PREFIX": prefix}
	out, err := runCmd(t, env, "shards")
	if err == nil || !strings.Contains(err.Error(), "not provisioned for this deployment (writes there answer 503): default") ||
		!strings.Contains(out, "NOT PROVISIONED") || !strings.Contains(out, "run pinstore migrate") {
		t.Fatalf("shards with its host never migrated: err %v\n%s", err, out)
	}
	// migrate says what the change stream and point-in-time restore need
	// of a host without a full row binary log (this machine's MariaDB,
	// unless it was set up with one).
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var logBin int
	var format, image string
	if err := db.QueryRow("SELECT @@log_bin, @@binlog_format, @@binlog_row_image").Scan(&logBin, &format, &image); err != nil {
		t.Fatal(err)
	}
	rowBinlog := logBin == 1 && format == "ROW" && image == "FULL"
	out, err = runCmd(t, env, "migrate")
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	if noted := strings.Contains(out, "migrate: note: host default (tcp(127.0.0.1:3306)): the change stream and point-in-time restore need "); noted == rowBinlog {
		t.Errorf("migrate on a host with log_bin=%d binlog_format=%s binlog_row_image=%s: noted %v\n%s", logBin, format, image, noted, out)
	}
	out, err = runCmd(t, env, "shards")
	if err != nil || !strings.Contains(out, fmt.Sprintf("8 shards, databases %s00000 … %s00007", prefix, prefix)) || !strings.Contains(out, " up\n") {
		t.Fatalf("shards with its host up: %v\n%s", err, out)
	}

	dead := fmt.Sprintf("root@tcp(127.0.0.1:%d)/", testenv.FreePort(t))
	path := filepath.Join(t.TempDir(), "map.yaml")
	m := fmt.Sprintf("shards: 8\nhosts:\n  live: {master: %q}\n  gone: {master: %q}\nranges:\n  - {shards: 0-3, host: live}\n  - {shards: 4-7, host: gone}\n", dsn, dead)
	if err := os.WriteFile(path, []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runCmd(t, map[string]string{"PINSTORE_SHARD_MAP": path, "PINSTORE_DB_PREFIX": "unused_"}, "shards")
	if err == nil || !strings.Contains(err.Error(), "1 of 2 hosts not answering: gone") {
		t.Fatalf("shards with a host down: err %v", err)
	}
	if !strings.Contains(out, "host gone") || !strings.Contains(out, "DOWN") || !strings.Contains(out, "host live") {
		t.Fatalf("shards with a host down printed:\n%s", out)
	}
}

// TestRepeatedDelete: what a retried DELETE of an object sees, as
// docs/api.md ("Safe retries") and openapi.yaml say: the first answers
// 204, every repeat 404 not_found, like any object that is not live, with
// or without the If-Match the first one carried, for a service token and
// for the owner's user token alike; a repeated unlike or unfollow answers
// 204.
func TestRepeatedDelete(t *testing.T) {
	s := startServer(t)
	ann := s.create("/v1/users", map[string]any{"username": "ann"})
	bob := s.create("/v1/users", map[string]any{"username": "bob"})
	board := s.create("/v1/boards", map[string]any{"owner_id": ann.ID, "name": "b"})
	pin := s.create("/v1/pins", map[string]any{"board_id": board.ID})
	pin2 := s.create("/v1/pins", map[string]any{"board_id": board.ID})
	comment := s.create("/v1/pins/"+pin.ID+"/comments", map[string]any{"author_id": bob.ID, "text": "hi"})
	annTok := mintUserToken(t, ann.ID, "1h")

	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+bob.ID+"/likes/"+pin.ID, nil)
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+bob.ID+"/following/"+ann.ID, nil)
	for range 2 {
		s.must(http.StatusNoContent, http.MethodDelete, "/v1/users/"+bob.ID+"/likes/"+pin.ID, nil)
		s.must(http.StatusNoContent, http.MethodDelete, "/v1/users/"+bob.ID+"/following/"+ann.ID, nil)
	}

	for _, path := range []string{"/v1/comments/" + comment.ID, "/v1/pins/" + pin.ID} {
		etag := s.must(http.StatusOK, http.MethodGet, path, nil).Header.Get("ETag")
		s.must(http.StatusNoContent, http.MethodDelete, path, nil, "If-Match", etag)
		s.fail(http.StatusNotFound, "not_found", http.MethodDelete, path, nil, "If-Match", etag)
		s.fail(http.StatusNotFound, "not_found", http.MethodDelete, path, nil)
	}
	// The owner's own token: the same.
	s.as(annTok, http.StatusNoContent, http.MethodDelete, "/v1/pins/"+pin2.ID, nil)
	s.as(annTok, http.StatusNotFound, http.MethodDelete, "/v1/pins/"+pin2.ID, nil)
	s.as(annTok, http.StatusNoContent, http.MethodDelete, "/v1/boards/"+board.ID, nil)
	s.as(annTok, http.StatusNotFound, http.MethodDelete, "/v1/boards/"+board.ID, nil)
	s.fail(http.StatusNotFound, "not_found", http.MethodDelete, "/v1/boards/"+board.ID, nil)
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/users/"+bob.ID, nil)
	s.fail(http.StatusNotFound, "not_found", http.MethodDelete, "/v1/users/"+bob.ID, nil)
}

// TestTokenHashLine: `token hash` prints one entry of the tokens file's
// tokens list; appended under a "tokens:" line, as docs/authentication.md
// says, it makes a file the server loads, and the secret is then that
// token.
func TestTokenHashLine(t *testing.T) {
	const secret = "Zm9yIHRoZSB0ZXN0IG9ubHksIG5vdCBhIHJlYWwgb25lCg=="
	var out, errOut strings.Builder
	err := runToken([]string{"hash", "--name", "app", "--scopes", "read,write"}, nil, strings.NewReader(secret+"\n"), &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "- {name: app, sha256: ") || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("token hash printed %q", out.String())
	}
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte("tokens:\n"+out.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := auth.LoadServiceTokens(path)
	if err != nil {
		t.Fatal(err)
	}
	tok, ok := st.Lookup(secret)
	if !ok || tok.Name != "app" || tok.Scopes != auth.ScopeRead|auth.ScopeWrite {
		t.Fatalf("the printed line gives %+v, %v", tok, ok)
	}
}
