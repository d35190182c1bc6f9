package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/api"
	"github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/store/replicas"
)

// TestReplicaAddE2E sets replicas up with `pinstore replica add` the three
// ways it knows (a copy for an empty server, GTID catch-up for one that
// holds the master's history, a refusal and --rebuild for one holding
// transactions the master lacks) and checks what `pinstore shards` says of
// each replica: replicating or not, its GTID position, how far behind.
func TestReplicaAddE2E(t *testing.T) {
	f := startReplFleet(t, nil, 2)
	r1, r2 := f.hosts[0].replicas[0], f.hosts[0].replicas[1]
	m := f.hosts[0].master

	// Both were empty: copied, then named in the map.
	mapBody := readFile(t, f.mapFile)
	for _, r := range f.hosts[0].replicas {
		if !strings.Contains(mapBody, r.AppDSN()) {
			t.Fatalf("the map does not name replica %s:\n%s", r.Addr(), mapBody)
		}
	}
	// Writes on the master reach both, acknowledged semi-synchronously.
	m.Exec(t, "CREATE TABLE "+f.prefix+"00000.probe (id INT PRIMARY KEY)", "INSERT INTO "+f.prefix+"00000.probe VALUES (1), (2)")
	if got := m.Query(t, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_MASTER_STATUS'"); got != "ON" {
		t.Fatalf("the master's semi-sync status is %q, want ON", got)
	}
	waitFor(t, 10*time.Second, "both replicas apply the master's writes", func() bool {
		return r1.Query(t, "SELECT COUNT(*) FROM "+f.prefix+"00000.probe") == "2" && r2.Query(t, "SELECT COUNT(*) FROM "+f.prefix+"00000.probe") == "2"
	})
	pos := m.Query(t, "SELECT @@gtid_binlog_pos")
	out, err := f.shards(t)
	if err != nil {
		t.Fatalf("shards: %v\n%s", err, out)
	}
	if l := line(t, out, "master at GTID"); !strings.Contains(l, pos) || !strings.Contains(l, "semi-synchronous") || !strings.Contains(l, "reads on the master only") {
		t.Errorf("master line: %q (want GTID %s, semi-synchronous, reads on the master)", l, pos)
	}
	for _, r := range f.hosts[0].replicas {
		l := line(t, out, "replica "+taddr(r))
		if !strings.Contains(l, "replicating, applied "+pos+", 0 transactions behind") || !strings.Contains(l, "semi-sync") {
			t.Errorf("replica line: %q (want replicating at %s, 0 behind, semi-sync)", l, pos)
		}
	}

	// A stopped SQL thread is not replicating, and shards says so and fails.
	r1.Exec(t, "STOP SLAVE SQL_THREAD")
	m.Exec(t, "INSERT INTO "+f.prefix+"00000.probe VALUES (3)")
	out, err = f.shards(t)
	if err == nil || !strings.Contains(err.Error(), "not replicating: replica "+taddr(r1)+" of host a") {
		t.Fatalf("shards with a stopped SQL thread: err %v\n%s", err, out)
	}
	if l := line(t, out, "replica "+taddr(r1)); !strings.Contains(l, "NOT REPLICATING") || !strings.Contains(l, "1 transactions behind") || !strings.Contains(l, "its SQL thread is stopped") {
		t.Errorf("stopped replica's line: %q", l)
	}
	r1.Exec(t, "START SLAVE SQL_THREAD")

	// A server holding the master's history catches up by GTID: no copy.
	r2.Exec(t, "STOP SLAVE", "RESET SLAVE ALL")
	m.Exec(t, "INSERT INTO "+f.prefix+"00000.probe VALUES (4)")
	out, err = runCmd(t, f.env, "replica", "add", "--host", "a", "--dsn", r2.AppDSN())
	if err != nil || !strings.Contains(out, "caught up by GTID from what it held") {
		t.Fatalf("replica add of a server with the master's history: %v\n%s", err, out)
	}
	if strings.Contains(out, "note:") {
		t.Errorf("replica add of a server with a full row binlog and log_slave_updates printed a note:\n%s", out)
	}
	if got := r2.Query(t, "SELECT COUNT(*) FROM "+f.prefix+"00000.probe"); got != "4" {
		t.Fatalf("after GTID catch-up the replica has %s rows, want 4", got)
	}

	// A transaction written on the replica itself is errant: refused,
	// changing nothing, until --rebuild.
	r2.Exec(t, "STOP SLAVE", "CREATE DATABASE "+f.prefix+"errant")
	t.Cleanup(func() { r2.Exec(t, "DROP DATABASE IF EXISTS "+f.prefix+"errant") })
	before := readFile(t, f.mapFile)
	out, err = runCmd(t, f.env, "replica", "add", "--host", "a", "--dsn", r2.AppDSN())
	if err == nil || !strings.Contains(err.Error(), "holds 1 transactions host \"a\"'s master does not have") || !strings.Contains(err.Error(), "--rebuild") {
		t.Fatalf("replica add of a server with an errant transaction: err %v\n%s", err, out)
	}
	if readFile(t, f.mapFile) != before {
		t.Fatal("a refused replica add changed the map")
	}
	out, err = runCmd(t, f.env, "replica", "add", "--host", "a", "--dsn", r2.AppDSN(), "--rebuild")
	if err != nil || !strings.Contains(out, "copied the shard databases") {
		t.Fatalf("replica add --rebuild: %v\n%s", err, out)
	}
	m.Exec(t, "INSERT INTO "+f.prefix+"00000.probe VALUES (5)")
	waitFor(t, 10*time.Second, "every replica replicating at the master's position", func() bool {
		out, err := f.shards(t)
		pos := m.Query(t, "SELECT @@gtid_binlog_pos")
		return err == nil && strings.Count(out, "replicating, applied "+pos+", 0 transactions behind") == 2
	})

	// Refusals that change nothing: the master itself, an unknown host.
	if _, err := runCmd(t, f.env, "replica", "add", "--host", "a", "--dsn", m.AppDSN()); err == nil || !strings.Contains(err.Error(), "is host \"a\"'s master") {
		t.Errorf("replica add of the master: %v", err)
	}
	if _, err := runCmd(t, f.env, "replica", "add", "--host", "zz", "--dsn", r1.AppDSN()); err == nil || !strings.Contains(err.Error(), `no host "zz"`) {
		t.Errorf("replica add to an unknown host: %v", err)
	}
}

// waitFor polls cond every 20 ms until it holds, or fails after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s never happened", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReplicaReadsE2E: with replica reads on, a read without a token is
// served by a replica within the lag bound and by the master beyond it; a
// read with a token by a replica only once it has applied the token; a
// write on two hosts answers one token covering both. A "ghost" board,
// written on host a's replicas alone (no binary log), tells which server
// answered: a replica finds it, the master does not.
func TestReplicaReadsE2E(t *testing.T) {
	f := startReplFleet(t, map[string]string{"PINSTORE_REPLICA_READS": "on", "PINSTORE_OBJECT_CACHE": "off"}, 2, 1)
	a, b := f.hosts[0], f.hosts[1]
	s := startServerEnv(t, f.env)
	onHost := func(id string) string { // "a" or "b", by the id's shard
		n, _ := strconv.ParseUint(id, 10, 64)
		if idcodec.ShardOf(n) < e2eShards/2 {
			return "a"
		}
		return "b"
	}
	// A user on each host.
	users := map[string]string{}
	for i := 0; len(users) < 2; i++ {
		if i > 64 {
			t.Fatal("64 users, none on one of the hosts")
		}
		r := s.must(http.StatusCreated, http.MethodPost, "/v1/users", map[string]any{"username": fmt.Sprintf("rr%d", i)})
		var u object
		r.decode(t, &u)
		h := onHost(u.ID)
		if tok := r.Header.Get(api.ConsistencyHeader); !strings.HasPrefix(tok, h+"=0-") {
			t.Fatalf("a user created on host %s answers token %q", h, tok)
		}
		if users[h] == "" {
			users[h] = u.ID
		}
	}
	boardA := s.create("/v1/boards", map[string]any{"owner_id": users["a"], "name": "on a"})
	boardB := s.create("/v1/boards", map[string]any{"owner_id": users["b"], "name": "on b"})
	pinB := s.create("/v1/pins", map[string]any{"board_id": boardB.ID, "link": "https://example.com/b"})

	// A like writes user_likes on a and pin_likers on b: one token, both.
	posA, posB := a.master.Query(t, "SELECT @@gtid_binlog_pos"), b.master.Query(t, "SELECT @@gtid_binlog_pos")
	r := s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+users["a"]+"/likes/"+pinB.ID, nil)
	tok, err := replicas.ParseToken(r.Header.Get(api.ConsistencyHeader))
	if err != nil || len(tok) != 2 {
		t.Fatalf("a like across two hosts answers token %q (%v), want one position per host", r.Header.Get(api.ConsistencyHeader), err)
	}
	for _, h := range []struct {
		name   string
		before string
		master *testenv.Host
	}{{"a", posA, a.master}, {"b", posB, b.master}} {
		before, _ := replicas.ParsePos(h.before)
		after, _ := replicas.ParsePos(h.master.Query(t, "SELECT @@gtid_binlog_pos"))
		if got := tok[h.name]; before.Covers(got) || !after.Covers(got) {
			t.Errorf("token for host %s is %s: want a commit made by the like, after %s and at most %s", h.name, got, before, after)
		}
	}

	// The ghost: board a's row again under local id 999999, on a's replicas only.
	ba, _ := strconv.ParseUint(boardA.ID, 10, 64)
	shard := idcodec.ShardOf(ba)
	ghost := strconv.FormatUint(idcodec.MustEncode(shard, idcodec.TypeBoard, 999999), 10)
	table := fmt.Sprintf("%s%05d.boards", f.prefix, shard)
	for _, rep := range a.replicas {
		rep.Exec(t, "SET SESSION sql_log_bin = 0",
			"INSERT INTO "+table+" (local_id, doc, version, created_at, updated_at) SELECT 999999, doc, version, created_at, updated_at FROM "+table+" WHERE local_id = "+strconv.FormatUint(ba&(1<<36-1), 10))
	}
	serving := func(want bool) func() bool {
		return func() bool {
			for _, h := range shardMapOf(t, s).Hosts {
				if h.Name != "a" {
					continue
				}
				for _, rep := range h.Replicas {
					if rep.ServesReads != want {
						return false
					}
				}
				return len(h.Replicas) == 2
			}
			return false
		}
	}
	waitFor(t, 10*time.Second, "host a's replicas to serve reads", serving(true))
	s.must(http.StatusOK, http.MethodGet, "/v1/boards/"+ghost, nil) // a replica answered
	// The server counts its round trips to host a's replicas apart from
	// those to its master, on /metrics and on the fleet route.
	if n := s.metric(`pinstore_shard_query_seconds_count{host="a",role="replica"}`); n == 0 {
		t.Error("no round trip to host a's replicas counted after a replica answered")
	}
	var fl fleet.FleetStatus
	s.must(http.StatusOK, http.MethodGet, "/v1/admin/fleet", nil).decode(t, &fl)
	for _, h := range fl.Hosts {
		if rts := h.RoundTrips; h.Name == "a" && (len(rts) != 2 || rts[0].Role != "master" || rts[1].Role != "replica" || rts[1].Total == 0) {
			t.Errorf("fleet route, host a's round trips: %+v", rts)
		}
	}
	s.must(http.StatusOK, http.MethodGet, "/v1/boards/"+ghost, nil, api.ConsistencyHeader, tok.String()) // it has applied the like

	// Replicas stop applying; the master takes an edit.
	for _, rep := range a.replicas {
		rep.Exec(t, "STOP SLAVE SQL_THREAD")
	}
	r = s.must(http.StatusOK, http.MethodPatch, "/v1/boards/"+boardA.ID, map[string]any{"description": "edited"})
	edit := r.Header.Get(api.ConsistencyHeader)
	if !strings.HasPrefix(edit, "a=0-") {
		t.Fatalf("an edit on host a answers token %q", edit)
	}
	// With the edit's token: no replica has it, so the master answers.
	var got object
	s.must(http.StatusOK, http.MethodGet, "/v1/boards/"+boardA.ID, nil, api.ConsistencyHeader, edit).decode(t, &got)
	if got.Description != "edited" {
		t.Fatalf("read with the edit's token: description %q, want the edit", got.Description)
	}
	s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/boards/"+ghost, nil, api.ConsistencyHeader, edit)
	// Without a token, past the lag bound: the master answers too.
	time.Sleep(300 * time.Millisecond)
	waitFor(t, 5*time.Second, "host a's replicas to stop serving", serving(false))
	s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/boards/"+ghost, nil)
	for _, h := range shardMapOf(t, s).Hosts {
		for _, rep := range h.Replicas {
			if h.Name == "a" && (rep.LagMS == nil || *rep.LagMS < 100 || rep.Behind < 1 || rep.SQLThread != "No" || rep.Replicating) {
				t.Errorf("a stopped replica in the admin map: %+v", rep)
			}
		}
	}
	// Applying again, they serve again, the edit's token included.
	for _, rep := range a.replicas {
		rep.Exec(t, "START SLAVE SQL_THREAD")
	}
	waitFor(t, 10*time.Second, "host a's replicas to serve again", serving(true))
	s.must(http.StatusOK, http.MethodGet, "/v1/boards/"+ghost, nil, api.ConsistencyHeader, edit)

	// A token that does not parse is the client's error.
	s.fail(http.StatusBadRequest, "invalid_argument", http.MethodGet, "/v1/boards/"+boardA.ID, nil, api.ConsistencyHeader, "a=zz")
}
