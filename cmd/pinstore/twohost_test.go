package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/store"
	"github.com/pinstore/pinstore/store/shardmap"
)

// twoHosts is a server whose e2eShards shards are split over two MariaDB
// hosts: shards 0-3 on h0 (the shared server) and 4-7 on h1 (a mariadbd
// this test starts), with the map in a file the test can edit.
type twoHosts struct {
	*server
	h1      *testenv.Host
	mapPath string
	prefix  string
	env     map[string]string // for running other commands against the same fleet
}

const twoHostHalf = e2eShards / 2

func (th *twoHosts) writeMap(t *testing.T, h1Open bool) {
	t.Helper()
	body := fmt.Sprintf("shards: %d\ndb_prefix: %s\nhosts:\n  h0: {master: %q}\n  h1: {master: %q}\nranges:\n  - {shards: 0-%d, host: h0}\n  - {shards: %d-%d, host: h1, open: %v}\n",
		e2eShards, th.prefix, testenv.MySQLDSN(t), th.h1.DSN(), twoHostHalf-1, twoHostHalf, e2eShards-1, h1Open)
	// Write and rename, as an operator's editor or config management would,
	// so the server never reads half a file.
	tmp := th.mapPath + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, th.mapPath); err != nil {
		t.Fatal(err)
	}
}

func startTwoHosts(t *testing.T) *twoHosts {
	t.Helper()
	th := &twoHosts{h1: testenv.StartHost(t, "e2e-two"), prefix: testenv.UniquePrefix(t, "th")}
	th.mapPath = filepath.Join(t.TempDir(), "shardmap.yaml")
	th.writeMap(t, true)
	for _, dsn := range []string{testenv.MySQLDSN(t), th.h1.DSN()} {
		t.Cleanup(func() {
			if th.h1.Running() || dsn == testenv.MySQLDSN(t) {
				testenv.DropDatabases(t, dsn, th.prefix)
			}
		})
	}
	// Host failures as the shards see them: with the object cache on, the
	// objects it holds are answered from Redis while their host is down
	// (store's TestCachedObjectsOutliveTheirHost).
	th.env = map[string]string{"PINSTORE_SHARD_MAP": th.mapPath, "PINSTORE_MAP_POLL": "100ms", "PINSTORE_OBJECT_CACHE": "off"}
	th.server = startServerEnv(t, th.env)
	th.env["PINSTORE_REDIS_DISABLED"] = "true"
	return th
}

// hostOf says which host an object lives on.
func hostOf(t *testing.T, id string) string {
	t.Helper()
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if idcodec.ShardOf(n) < twoHostHalf {
		return "h0"
	}
	return "h1"
}

// userOn creates users until one lands on host, and returns it.
func (th *twoHosts) userOn(host, name string) object {
	th.t.Helper()
	for i := 0; i < 200; i++ {
		u := th.create("/v1/users", map[string]any{"username": fmt.Sprintf("%s%d", name, i)})
		if hostOf(th.t, u.ID) == host {
			return u
		}
	}
	th.t.Fatalf("no user landed on %s in 200 tries", host)
	return object{}
}

// TestServeTwoHosts runs the product's features with the people involved
// on different MySQL hosts: boards and pins, follows both ways, likes,
// the home feed, multi-get and owners, the admin view of the map, a map
// edit picked up while running, a host failure and its repair.
func TestServeTwoHosts(t *testing.T) {
	th := startTwoHosts(t)
	s := th.server

	alice := th.userOn("h0", "alice")
	bob := th.userOn("h1", "bob")
	carol := th.userOn("h1", "carol")

	// Boards and pins live with their owner.
	aBoard := s.create("/v1/boards", map[string]any{"owner_id": alice.ID, "name": "a"})
	bBoard := s.create("/v1/boards", map[string]any{"owner_id": bob.ID, "name": "b"})
	if hostOf(t, aBoard.ID) != "h0" || hostOf(t, bBoard.ID) != "h1" {
		t.Fatalf("boards not with their owners: %s %s", aBoard.ID, bBoard.ID)
	}
	var pins []string // creation order, alternating owners
	for i := 0; i < 6; i++ {
		board := aBoard.ID
		if i%2 == 1 {
			board = bBoard.ID
		}
		p := s.create("/v1/pins", map[string]any{"board_id": board, "description": fmt.Sprint("pin ", i)})
		pins = append(pins, p.ID)
		time.Sleep(2 * time.Millisecond) // distinct sequences: the feed orders by time
	}
	equalIDs(t, "alice's board", s.page("/v1/boards/"+aBoard.ID+"/pins").ids(), []string{pins[4], pins[2], pins[0]})
	equalIDs(t, "bob's board", s.page("/v1/boards/"+bBoard.ID+"/pins").ids(), []string{pins[5], pins[3], pins[1]})

	// Follows across hosts, both directions, and their inverses.
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+carol.ID+"/following/"+alice.ID, nil)
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+carol.ID+"/following/"+bob.ID, nil)
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+alice.ID+"/following/"+bob.ID, nil)
	following, n := s.all("/v1/users/"+carol.ID+"/following", 1)
	slices.Sort(following)
	want := []string{alice.ID, bob.ID}
	slices.Sort(want)
	equalIDs(t, "carol follows", following, want)
	if n != 2 {
		t.Fatalf("carol's following count %d", n)
	}
	equalIDs(t, "alice's followers (h0 ← h1)", s.page("/v1/users/"+alice.ID+"/followers").ids(), []string{carol.ID})
	bobFollowers, _ := s.all("/v1/users/"+bob.ID+"/followers", 1)
	slices.Sort(bobFollowers)
	want = []string{alice.ID, carol.ID}
	slices.Sort(want)
	equalIDs(t, "bob's followers (h1 ← both)", bobFollowers, want)

	// Likes across hosts: carol (h1) likes alice's pin (h0).
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+carol.ID+"/likes/"+pins[0], nil)
	equalIDs(t, "pin likers", s.page("/v1/pins/"+pins[0]+"/likers").ids(), []string{carol.ID})
	if c := s.count("/v1/pins/" + pins[0] + "/likers"); c != 1 {
		t.Fatalf("likers count %d", c)
	}

	// The feed merges both hosts, newest first, across pages.
	feed, _ := s.all("/v1/users/"+carol.ID+"/feed", 2)
	equalIDs(t, "carol's feed", feed, reversed(pins))

	// Multi-get and owners across hosts, in request order.
	var many list
	s.must(http.StatusOK, http.MethodGet, "/v1/pins?ids="+pins[1]+","+pins[0]+","+pins[3], nil).decode(t, &many)
	equalIDs(t, "multi-get", many.ids(), []string{pins[1], pins[0], pins[3]})
	var owners struct{ Owners map[string]string }
	s.must(http.StatusOK, http.MethodPost, "/v1/pins/owners", map[string]any{"ids": []string{pins[0], pins[1]}}).decode(t, &owners)
	if owners.Owners[pins[0]] != alice.ID || owners.Owners[pins[1]] != bob.ID {
		t.Fatalf("owners %v", owners.Owners)
	}

	// The admin route shows the map in force; a user token may not see it.
	info := th.shardMap(t)
	m, err := shardmap.Load(th.mapPath, e2eShards, th.prefix)
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != m.Version() || info.Source != th.mapPath || len(info.Hosts) != 2 || len(info.Ranges) != 2 ||
		!info.Hosts[0].OK || !info.Hosts[1].OK || !info.Ranges[1].Open || info.Ranges[1].Host != "h1" {
		t.Fatalf("shard map %+v, want version %s from %s", info, m.Version(), th.mapPath)
	}
	if strings.Contains(string(s.must(http.StatusOK, http.MethodGet, "/v1/admin/shard-map", nil).Body), "root@") {
		t.Fatal("the admin view shows a DSN")
	}
	s.as(mintUserToken(t, alice.ID, "1h"), http.StatusForbidden, http.MethodGet, "/v1/admin/shard-map", nil)

	// Closing h1's range for new users while running: new users land on h0.
	th.writeMap(t, false)
	closed := th.waitForMap(t, info.Version)
	if closed.Ranges[1].Open {
		t.Fatalf("h1's range still open after the edit: %+v", closed.Ranges)
	}
	for i := 0; i < 12; i++ {
		if u := s.create("/v1/users", map[string]any{"username": fmt.Sprint("late", i)}); hostOf(t, u.ID) != "h0" {
			t.Fatalf("user %s placed on closed h1", u.ID)
		}
	}
	// A malformed map is rejected and the one in force stays.
	if err := os.WriteFile(th.mapPath, []byte("shards: 8\nranges: [{shards: 0-5, host: nowhere}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitForLog(t, s.logs, "shard map rejected")
	if v := th.shardMap(t).Version; v != closed.Version {
		t.Fatalf("a malformed map replaced the map in force: %s → %s", closed.Version, v)
	}
	th.writeMap(t, true)
	th.waitForMap(t, closed.Version)

	// Host failure: h1 stops. Its objects answer 503 within seconds; h0's
	// keep working; /readyz and the admin view name the host.
	th.h1.Stop(t)
	start := time.Now()
	p := s.fail(http.StatusServiceUnavailable, "unavailable", http.MethodGet, "/v1/users/"+bob.ID, nil)
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("503 took %v", el)
	}
	if !strings.Contains(p.Detail, `"h1"`) || strings.Contains(p.Detail, "127.0.0.1") {
		t.Fatalf("problem detail %q", p.Detail)
	}
	r := s.req(http.MethodGet, "/v1/pins/"+pins[1], nil)
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" {
		t.Fatalf("pin on h1: %d, Retry-After %q", r.Status, r.Header.Get("Retry-After"))
	}
	s.fail(http.StatusServiceUnavailable, "unavailable", http.MethodPost, "/v1/pins", map[string]any{"board_id": bBoard.ID})
	s.must(http.StatusOK, http.MethodGet, "/v1/users/"+alice.ID, nil)
	equalIDs(t, "alice's board, h1 down", s.page("/v1/boards/"+aBoard.ID+"/pins").ids(), []string{pins[4], pins[2], pins[0]})
	// Alice's pin made while h1 is down: carol (h1) follows alice, so its
	// fan-out to carol's feed waits for h1.
	downPin := s.create("/v1/pins", map[string]any{"board_id": aBoard.ID, "description": "while h1 is down"}).ID
	var ready struct {
		Status string
		Checks []fleet.Health
	}
	s.must(http.StatusServiceUnavailable, http.MethodGet, "/readyz", nil).decode(t, &ready)
	okByName := map[string]bool{}
	for _, c := range ready.Checks {
		okByName[c.Name] = c.OK
	}
	if !okByName["mysql:h0"] || okByName["mysql:h1"] {
		t.Fatalf("readyz checks %+v", ready.Checks)
	}
	if hs := th.shardMap(t).Hosts; !hs[0].OK || hs[1].OK || !strings.Contains(hs[1].Error, `"h1"`) {
		t.Fatalf("admin hosts with h1 down %+v", hs)
	}

	// Alice (h0) unfollows bob (h1) while h1 is down: her side is removed,
	// bob's cannot be, and the client is told 503.
	s.fail(http.StatusServiceUnavailable, "unavailable", http.MethodDelete, "/v1/users/"+alice.ID+"/following/"+bob.ID, nil)
	if ids, _ := s.all("/v1/users/"+alice.ID+"/following", 10); len(ids) != 0 {
		t.Fatalf("alice still follows %v", ids)
	}

	// h1 comes back: the server uses it again without a restart.
	th.h1.Start(t)
	deadline := time.Now().Add(10 * time.Second)
	for s.req(http.MethodGet, "/v1/users/"+bob.ID, nil).Status != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("h1 not used again within 10s of its restart")
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.must(http.StatusOK, http.MethodGet, "/readyz", nil)
	// The fan-out held back by the outage reaches carol's feed; alice's
	// feed lost bob's pins with the unfollow although bob's side failed.
	for feed, _ := s.all("/v1/users/"+carol.ID+"/feed", 10); !slices.Contains(feed, downPin); feed, _ = s.all("/v1/users/"+carol.ID+"/feed", 10) {
		if time.Now().After(deadline) {
			t.Fatalf("carol's feed %v lacks %s, made while h1 was down, 10s after h1 came back", feed, downPin)
		}
		time.Sleep(100 * time.Millisecond)
	}
	equalIDs(t, "carol's feed after the outage", s.page("/v1/users/"+carol.ID+"/feed?limit=50").ids(), append([]string{downPin}, reversed(pins)...))
	if feed, _ := s.all("/v1/users/"+alice.ID+"/feed", 10); len(feed) != 0 {
		t.Fatalf("alice unfollowed bob, yet her feed holds %v", feed)
	}
	// The unfollow left its mark in alice's shard: the server's pair sweep
	// takes bob's stale follower row away by itself once h1 is back, with
	// no command run.
	for bobFollowers, _ = s.all("/v1/users/"+bob.ID+"/followers", 10); slices.Contains(bobFollowers, alice.ID); bobFollowers, _ = s.all("/v1/users/"+bob.ID+"/followers", 10) {
		if time.Now().After(deadline.Add(5 * time.Second)) {
			t.Fatalf("bob's followers %v: the unfollow's other side did not heal within 15s of h1's restart", bobFollowers)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// pinstore repair, the full check, finds nothing left to fix.
	out, err := runCmd(t, th.env, "repair")
	if err != nil {
		t.Fatalf("repair: %v\n%s", err, out)
	}
	var rep struct {
		Pairs []store.RepairReport   `json:"pairs"`
		Feeds store.FeedRepairReport `json:"feeds"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("repair output %q: %v", out, err)
	}
	if rep.Feeds.Follows != 2 || rep.Feeds.Missing != 0 || rep.Feeds.Stale != 0 {
		t.Fatalf("feed repair after the outage (carol follows alice and bob) %s", out)
	}
	for _, r := range rep.Pairs {
		if r.OrphanInverse != 0 || r.MissingInverse != 0 || r.DeadEndpoint != 0 {
			t.Fatalf("repair report %s", out)
		}
	}
	equalIDs(t, "bob's followers after repair", s.page("/v1/users/"+bob.ID+"/followers").ids(), []string{carol.ID})
	if c := s.count("/v1/users/" + bob.ID + "/followers"); c != 1 {
		t.Fatalf("bob's follower count after repair %d", c)
	}
}

func (th *twoHosts) shardMap(t *testing.T) fleet.ShardMapInfo {
	t.Helper()
	var info fleet.ShardMapInfo
	th.must(http.StatusOK, http.MethodGet, "/v1/admin/shard-map", nil).decode(t, &info)
	return info
}

// waitForMap waits until the server routes by a map other than old.
func (th *twoHosts) waitForMap(t *testing.T, old string) fleet.ShardMapInfo {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info := th.shardMap(t)
		if info.Version != old {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server still routes by map %s 10s after the edit", old)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitForLog(t *testing.T, logs *logLines, substr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, l := range logs.Lines() {
			if strings.Contains(l, substr) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q in 10s", substr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServeFeedOutboxSurvivesRestart: a pin's fan-out that could not be
// written before its server stopped (the follower's host was down) is
// written by the next server's start-up sweep of feed_outbox, without
// pinstore repair.
func TestServeFeedOutboxSurvivesRestart(t *testing.T) {
	th := startTwoHosts(t)
	alice := th.userOn("h0", "alice")
	carol := th.userOn("h1", "carol")
	board := th.create("/v1/boards", map[string]any{"owner_id": alice.ID, "name": "a"}).ID
	th.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+carol.ID+"/following/"+alice.ID, nil)

	th.h1.Stop(t)
	pin := th.create("/v1/pins", map[string]any{"board_id": board, "description": "made while carol's host is down"}).ID
	if err := th.server.stop(); err != nil { // its last fan-out attempt fails: h1 is still down
		t.Fatal(err)
	}
	unfinished := false
	for _, l := range th.server.logs.Lines() {
		unfinished = unfinished || strings.Contains(l, "feed fan-out unfinished at shutdown")
	}
	if !unfinished {
		t.Fatal("the server did not report unfinished fan-out at shutdown")
	}

	th.h1.Start(t)
	env := maps.Clone(th.env)
	env["PINSTORE_FEED_SWEEP"] = "1h" // only the start-up sweep
	next := startServerEnv(t, env)
	deadline := time.Now().Add(15 * time.Second)
	for {
		feed, _ := next.all("/v1/users/"+carol.ID+"/feed", 10)
		if slices.Equal(feed, []string{pin}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("carol's feed %v, 15s after a new server started; want [%s]", feed, pin)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
