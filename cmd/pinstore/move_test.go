package main

import (
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/store/shardmap"

	"github.com/pinstore/pinstore/cluster/reshard"
	"github.com/pinstore/pinstore/internal/testenv"
)

func TestMoveShardsArgs(t *testing.T) {
	env := map[string]string{"PINSTORE_SHARD_MAP": "/nonexistent/shards.yaml"}
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no range", env, []string{"--to", "h1"}, "--range and --to are required"},
		{"no target", env, []string{"--range", "0-3"}, "--range and --to are required"},
		{"bad range", env, []string{"--range", "3-1", "--to", "h1"}, "bad shard range"},
		{"stray argument", env, []string{"--range", "0-1", "--to", "h1", "now"}, "unexpected arguments"},
		{"no map file", nil, []string{"--range", "0-1", "--to", "h1"}, "PINSTORE_SHARD_MAP"},
		{"bad poll", map[string]string{"PINSTORE_SHARD_MAP": "x", "PINSTORE_MAP_POLL": "often"}, []string{"--range", "0-1", "--to", "h1"}, "PINSTORE_MAP_POLL"},
		{"missing map file", env, []string{"--range", "0-1", "--to", "h1"}, "no such file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runCmd(t, tt.env, append([]string{"move-shards"}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

// TestMoveShardsCommand runs migrate and move-shards as an operator would,
// between the shared MariaDB and a host the test starts.
func TestMoveShardsCommand(t *testing.T) {
	env, path, prefix := twoHostMapFile(t, "cmd-move")
	out, err := runCmd(t, env, "move-shards", "--range", "0-1", "--to", "h1", "--settle", "100ms", "--finish")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"copy:", "catch-up pass 1:", "writes held:", "final pass:", "switched:", "dropped 2 source databases", "writes held off", "; finished"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	m, err := shardmap.Load(path, 4, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := m.RangeOf(0); r.Host != "h1" || r.ReadOnly {
		t.Fatalf("shard 0 in %+v", r)
	}
	if _, err := os.Stat(reshard.LockPath(path)); !os.IsNotExist(err) {
		t.Fatalf("lock file: %v", err)
	}
	// Moving it again is refused: the range is on h1 already.
	if _, err := runCmd(t, env, "move-shards", "--range", "0-1", "--to", "h1"); err == nil || !strings.Contains(err.Error(), "already on") {
		t.Fatalf("second move: %v", err)
	}
}

// TestMoveShardsConfirmsServers moves a range under a running server with
// --servers: the move waits for the server to report each new map at
// /v1/admin/shard-map instead of sleeping --settle, and stops, writes
// still held, when a server never reports it.
func TestMoveShardsConfirmsServers(t *testing.T) {
	th := startTwoHosts(t)
	alice := th.userOn("h0", "alice")
	board := th.create("/v1/boards", map[string]any{"owner_id": alice.ID, "name": "a"})
	pin := th.create("/v1/pins", map[string]any{"board_id": board.ID})
	env := map[string]string{
		"PINSTORE_SHARD_MAP":      th.mapPath,
		"PINSTORE_REDIS_DISABLED": "true",
		"PINSTORE_ADMIN_TOKEN":    e2eAdminToken,
		"PINSTORE_MAP_POLL":       "100ms",
	}
	rng := fmt.Sprintf("0-%d", twoHostHalf-1)

	// A server that never reloads: one started with a map of its own.
	stale := startServer(t)
	out, err := runCmd(t, env, "move-shards", "--range", rng, "--to", "h1", "--servers", th.base+","+stale.base, "--confirm-timeout", "1s", "--settle", "1h")
	if err == nil || !strings.Contains(err.Error(), stale.base) || !strings.Contains(err.Error(), "still routes by map") {
		t.Fatalf("move with a stale server: %v\n%s", err, out)
	}
	// Writes to the range stay held (503 shard_moving); reads work.
	th.fail(http.StatusServiceUnavailable, "shard_moving", http.MethodPatch, "/v1/pins/"+pin.ID, map[string]any{"description": "x"})
	th.must(http.StatusOK, http.MethodGet, "/v1/pins/"+pin.ID, nil)

	// With only the server that follows the map, the same command resumes
	// and switches, never waiting the hour of --settle; the move stays
	// open.
	out, err = runCmd(t, env, "move-shards", "--range", rng, "--to", "h1", "--servers", th.base, "--settle", "1h")
	if err != nil {
		t.Fatalf("move: %v\n%s", err, out)
	}
	if n := strings.Count(out, "confirmed: every server routes by map"); n != 1 || !strings.Contains(out, "the move is open") {
		t.Fatalf("%d confirmations, want 1 (after the hold), and the move open:\n%s", n, out)
	}
	// onlyOn waits until the server routes the moved range to host (it
	// polls the file every 100ms).
	onlyOn := func(host string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			ok := true
			rs := th.shardMap(t).Ranges
			for _, r := range rs {
				ok = ok && (r.First >= twoHostHalf || r.Host == host && !r.ReadOnly)
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("ranges %+v, want all on %s", rs, host)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	onlyOn("h1")
	// Written on the new host: an edit and a new pin.
	th.must(http.StatusOK, http.MethodPatch, "/v1/pins/"+pin.ID, map[string]any{"description": "moved"})
	later := th.create("/v1/pins", map[string]any{"board_id": board.ID, "description": "on h1"})
	if got := th.get("/v1/pins/" + pin.ID); got.Description != "moved" {
		t.Fatalf("pin after the move %+v", got)
	}
	if _, err := runCmd(t, env, "move-shards", "--range", rng, "--to", "h1", "--abort"); err == nil || !strings.Contains(err.Error(), "--revert") {
		t.Fatalf("abort after the switch: %v", err)
	}

	// Reverted: back on h0 with both writes; h1's copies dropped.
	out, err = runCmd(t, env, "move-shards", "--range", rng, "--to", "h1", "--revert", "--servers", th.base, "--settle", "1h")
	if err != nil || !strings.Contains(out, "shards back on 0-"+fmt.Sprint(twoHostHalf-1)+"@h0") {
		t.Fatalf("revert: %v\n%s", err, out)
	}
	onlyOn("h0")
	if got := th.get("/v1/pins/" + pin.ID); got.Description != "moved" {
		t.Fatalf("pin after the revert %+v", got)
	}
	if got := th.get("/v1/pins/" + later.ID); got.Description != "on h1" {
		t.Fatalf("pin written on h1, after the revert %+v", got)
	}
	if n := countDatabases(t, th.h1.DSN(), th.prefix); n != twoHostHalf {
		t.Fatalf("h1 holds %d of the prefix's databases after the revert, want its own %d", n, twoHostHalf)
	}

	// Moved again and finished: h0's copies dropped.
	out, err = runCmd(t, env, "move-shards", "--range", rng, "--to", "h1", "--finish", "--servers", th.base, "--settle", "1h")
	if err != nil || !strings.Contains(out, "; finished") {
		t.Fatalf("move --finish: %v\n%s", err, out)
	}
	onlyOn("h1")
	th.must(http.StatusOK, http.MethodPatch, "/v1/pins/"+later.ID, map[string]any{"description": "finished"})
	if got := th.get("/v1/pins/" + later.ID); got.Description != "finished" {
		t.Fatalf("pin after the second move %+v", got)
	}
	if n := countDatabases(t, testenv.MySQLDSN(t), th.prefix); n != 0 {
		t.Fatalf("h0 still holds %d of the prefix's databases", n)
	}
}

// countDatabases counts the databases named with prefix on the host at dsn.
func countDatabases(t *testing.T, dsn, prefix string) int {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?", prefix+"%").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMoveShardsAtDefaultsUnderWrites: a move with a map file at default
// settings (servers poll the file every 2 s, the move settles its default
// 9 s, the write buffer is its default) is not seen by clients: writers
// on the moving range get no error, their writes to the range wait in the
// server while it is switched, and every acknowledged pin is on the new
// host.
func TestMoveShardsAtDefaultsUnderWrites(t *testing.T) {
	th := &twoHosts{h1: testenv.StartHost(t, "e2e-defaults"), prefix: testenv.UniquePrefix(t, "md")}
	th.mapPath = filepath.Join(t.TempDir(), "shardmap.yaml")
	th.writeMap(t, true)
	for _, dsn := range []string{testenv.MySQLDSN(t), th.h1.DSN()} {
		t.Cleanup(func() { testenv.DropDatabases(t, dsn, th.prefix) })
	}
	th.env = map[string]string{"PINSTORE_SHARD_MAP": th.mapPath} // nothing else: the defaults
	th.server = startServerEnv(t, th.env)
	var boards []string
	for i := 0; len(boards) < 4; i++ {
		u := th.create("/v1/users", map[string]any{"username": fmt.Sprintf("mover%d", i)})
		if hostOf(t, u.ID) == "h0" {
			boards = append(boards, th.create("/v1/boards", map[string]any{"owner_id": u.ID, "name": "b"}).ID)
		}
	}

	w := startWriters(t, []*server{th.server, th.server}, boards)
	time.Sleep(300 * time.Millisecond)
	tools := map[string]string{"PINSTORE_SHARD_MAP": th.mapPath, "PINSTORE_REDIS_DISABLED": "true"}
	out, err := runCmd(t, tools, "move-shards", "--range", fmt.Sprintf("0-%d", twoHostHalf-1), "--to", "h1")
	if err != nil {
		w.halt()
		t.Fatalf("move-shards: %v\n%s", err, out)
	}
	// The server picks the switched map up within its poll.
	deadline := time.Now().Add(10 * time.Second)
	for moved := false; !moved; time.Sleep(100 * time.Millisecond) {
		moved = true
		for _, r := range th.shardMap(t).Ranges {
			moved = moved && (r.First >= twoHostHalf || r.Host == "h1" && !r.ReadOnly)
		}
		if time.Now().After(deadline) {
			w.halt()
			t.Fatalf("the server did not route by the switched map within 10s:\n%s", out)
		}
	}
	time.Sleep(500 * time.Millisecond)
	w.halt()
	t.Logf("%d pins created by two writers; move-shards output:\n%s", len(w.acked), out)
	if !strings.Contains(out, "settling 9s") {
		t.Fatalf("the move did not settle its default 9s:\n%s", out)
	}
	if len(w.failed) > 0 {
		t.Fatalf("%d of %d writes failed during a move at default settings, first: %s", len(w.failed), len(w.failed)+len(w.acked), w.failed[0])
	}
	if waited, expired := th.metric("pinstore_write_buffer_waits_total"), th.metric("pinstore_write_buffer_expired_total"); waited == 0 || expired != 0 {
		t.Fatalf("write buffer: %v writes waited, %v expired; want some waiting and none expired", waited, expired)
	}
	if len(w.acked) < 10 {
		t.Fatalf("only %d writes during the move", len(w.acked))
	}
	for _, id := range w.acked {
		if hostOf(t, id) != "h0" {
			t.Fatalf("pin %s was not on the moved range", id)
		}
		th.must(http.StatusOK, http.MethodGet, "/v1/pins/"+id, nil)
	}
}

// twoHostMapFile writes a map file of 4 shards, 0-1 on the machine's
// MariaDB (h0) and 2-3 on a private host named name (h1), migrates them,
// and returns the environment of a command reading it, its path and its
// database prefix.
func twoHostMapFile(t *testing.T, name string) (env map[string]string, path, prefix string) {
	t.Helper()
	a := testenv.MySQLDSN(t)
	b := testenv.StartHost(t, name).DSN()
	prefix = testenv.UniquePrefix(t, "cm")
	for _, d := range []string{a, b} {
		t.Cleanup(func() { testenv.DropDatabases(t, d, prefix) })
	}
	path = filepath.Join(t.TempDir(), "shards.yaml")
	body := fmt.Sprintf("shards: 4\ndb_prefix: %s\nhosts:\n  h0: {master: %q}\n  h1: {master: %q}\nranges:\n  - {shards: 0-1, host: h0}\n  - {shards: 2-3, host: h1}\n", prefix, a, b)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	env = map[string]string{"PINSTORE_SHARD_MAP": path, "PINSTORE_REDIS_DISABLED": "true"}
	if _, err := runCmd(t, env, "migrate"); err != nil {
		t.Fatal(err)
	}
	return env, path, prefix
}
