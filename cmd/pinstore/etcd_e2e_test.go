package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/etcdtopo"
	"github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
)

// etcdFleet is a fleet that takes its topology from a real etcd cluster:
// shards 0-3 on h0 (the shared MariaDB) and 4-7 on h1 (a mariadbd the test
// starts), the map pushed to etcd, and servers following it.
type etcdFleet struct {
	etcd    *testenv.Etcd
	h1      *testenv.Host
	prefix  string
	url     string // PINSTORE_TOPOLOGY
	env     map[string]string
	servers []*server
	dir     string
}

func (f *etcdFleet) mapFile(t *testing.T, name, ranges string) string {
	t.Helper()
	body := fmt.Sprintf("shards: %d\ndb_prefix: %s\nhosts:\n  h0: {master: %q}\n  h1: {master: %q}\nranges:\n%s",
		e2eShards, f.prefix, testenv.MySQLDSN(t), f.h1.DSN(), ranges)
	p := filepath.Join(f.dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const twoHalves = "  - {shards: 0-3, host: h0}\n  - {shards: 4-7, host: h1}\n"

// startEtcdFleet starts etcd (members members), pushes the two-host map,
// migrates and starts n servers following it.
func startEtcdFleet(t *testing.T, members, n int) *etcdFleet {
	t.Helper()
	f := &etcdFleet{etcd: testenv.StartEtcd(t, members), h1: testenv.StartHost(t, "e2e-etcd"), prefix: testenv.UniquePrefix(t, "et"), dir: t.TempDir()}
	f.url = f.etcd.URL(f.prefix)
	for _, dsn := range []string{testenv.MySQLDSN(t), f.h1.DSN()} {
		t.Cleanup(func() {
			if f.h1.Running() || dsn == testenv.MySQLDSN(t) {
				testenv.DropDatabases(t, dsn, f.prefix)
			}
		})
	}
	// No rate limit: the load of the move tests would reach it.
	f.env = map[string]string{"PINSTORE_TOPOLOGY": f.url, "PINSTORE_DB_PREFIX": f.prefix, "PINSTORE_OBJECT_CACHE": "off", "PINSTORE_RATE_LIMIT": "0"}
	out, err := runCmd(t, f.env, "topology", "push", f.mapFile(t, "map.yaml", twoHalves))
	if err != nil || !strings.Contains(out, "written to "+strings.TrimSuffix(f.url, "/")) {
		t.Fatalf("push: %v\n%s", err, out)
	}
	for range n {
		f.servers = append(f.servers, startServerEnv(t, f.env))
	}
	return f
}

// tools is the environment of operator commands against the fleet.
func (f *etcdFleet) tools() map[string]string {
	env := map[string]string{"PINSTORE_REDIS_DISABLED": "true", "PINSTORE_ADMIN_TOKEN": e2eAdminToken}
	for k, v := range f.env {
		env[k] = v
	}
	return env
}

func shardMapOf(t *testing.T, s *server) fleet.ShardMapInfo {
	t.Helper()
	var info fleet.ShardMapInfo
	s.must(http.StatusOK, http.MethodGet, "/v1/admin/shard-map", nil).decode(t, &info)
	return info
}

// waitAll waits until every server routes by version.
func (f *etcdFleet) waitAll(t *testing.T, version string) {
	t.Helper()
	for i, s := range f.servers {
		deadline := time.Now().Add(15 * time.Second)
		for shardMapOf(t, s).Version != version {
			if time.Now().After(deadline) {
				t.Fatalf("server %d still routes by %s, not %s", i, shardMapOf(t, s).Version, version)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func readiness(t *testing.T, s *server) (int, readyBody) {
	t.Helper()
	r := s.req(http.MethodGet, "/readyz", nil)
	var b readyBody
	r.decode(t, &b)
	return r.Status, b
}

type readyBody struct {
	Status string         `json:"status"`
	Checks []fleet.Health `json:"checks"`
}

func (b readyBody) check(name string) fleet.Health {
	for _, c := range b.Checks {
		if c.Name == name {
			return c
		}
	}
	return fleet.Health{Name: name + " (missing)"}
}

// waitReady polls /readyz until cond holds.
func waitReady(t *testing.T, s *server, what string, cond func(int, readyBody) bool) readyBody {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, b := readiness(t, s)
		if cond(st, b) {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s, /readyz is not %s: %d %+v", what, st, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// push runs topology push and returns the version it wrote.
func push(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	out, err := runCmd(t, env, append([]string{"topology", "push"}, args...)...)
	if err != nil {
		t.Fatalf("push %v: %v\n%s", args, err, out)
	}
	var v string
	if _, err := fmt.Sscanf(out, "topology push: map version %s", &v); err != nil {
		t.Fatalf("push output %q: %v", out, err)
	}
	return v
}

func pullMap(t *testing.T, env map[string]string) string {
	t.Helper()
	out, err := runCmd(t, env, "topology", "pull")
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	return out
}

// TestEtcdTopology: three servers follow a map in a three-member etcd
// cluster: a pushed map reaches all of them; each registers with the map
// it routes by, which the admin route and `pinstore shards` list; a stale
// edit and a map written by hand that does not validate are refused; the
// loss of one member changes nothing; with etcd down the servers keep
// serving reads on their map, say they are stale, refuse map changes and,
// once their topology lease runs out, writes; then follow again, and
// write, when etcd is back.
func TestEtcdTopology(t *testing.T) {
	f := startEtcdFleet(t, 3, 3)
	s0 := f.servers[0]
	v0 := shardMapOf(t, s0).Version
	f.waitAll(t, v0)

	// Every server registered, with the map it routes by.
	var info fleet.ShardMapInfo
	deadline := time.Now().Add(10 * time.Second)
	for {
		info = shardMapOf(t, s0)
		if len(info.Servers) == 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(info.Servers) != 3 || info.Source != strings.TrimSuffix(f.url, "/") || info.Revision == 0 || info.Stale != "" {
		t.Fatalf("shard map info: %+v", info)
	}
	for _, sv := range info.Servers {
		if sv.Version != v0 || sv.Drained != v0 {
			t.Fatalf("registration %+v, want version %s", sv, v0)
		}
	}
	out, err := runCmd(t, f.tools(), "shards")
	if err != nil || !strings.Contains(out, "3 servers registered") || strings.Count(out, "routes by "+v0) != 3 {
		t.Fatalf("shards: %v\n%s", err, out)
	}

	// pull → edit → push reaches every server; a second push of the same
	// pulled file loses the compare-and-swap and says why.
	pulled := pullMap(t, f.tools())
	if !strings.HasPrefix(pulled, "# pinstore topology: revision ") {
		t.Fatalf("pulled:\n%s", pulled)
	}
	edited := strings.Replace(pulled, "host: h1", "host: h1\n      open: false", 1)
	p := filepath.Join(f.dir, "edited.yaml")
	os.WriteFile(p, []byte(edited), 0o644)
	v1 := push(t, f.tools(), p)
	if v1 == v0 {
		t.Fatal("the pushed map changed nothing")
	}
	f.waitAll(t, v1)
	for _, r := range shardMapOf(t, f.servers[1]).Ranges {
		if r.First == 4 && r.Open {
			t.Fatalf("range 4-7 still open: %+v", r)
		}
	}
	_, err = runCmd(t, f.tools(), "topology", "push", p)
	if !model.IsCode(err, model.EConflict) || !strings.Contains(err.Error(), "changed since it was read") {
		t.Fatalf("stale push: %v", err)
	}
	// --init writes only into an empty topology.
	if out, err := runCmd(t, f.tools(), "topology", "push", f.mapFile(t, "init.yaml", twoHalves), "--init"); err != nil || !strings.Contains(out, "already holds a map") {
		t.Fatalf("push --init: %v\n%s", err, out)
	}
	if v := shardMapOf(t, s0).Version; v != v1 {
		t.Fatalf("push --init changed the map: %s", v)
	}

	// A map that does not validate, pushed: refused before etcd.
	bad := f.mapFile(t, "gap.yaml", "  - {shards: 0-2, host: h0}\n  - {shards: 4-7, host: h1}\n")
	if _, err := runCmd(t, f.tools(), "topology", "push", bad); err == nil || !strings.Contains(err.Error(), "gap: shards 3-3") {
		t.Fatalf("bad push: %v", err)
	}
	// Written by hand with an etcd client: every server rejects it, keeps
	// its map and says so on /readyz (200 degraded: it serves on).
	u, _ := etcdtopo.ParseURL(f.url)
	c, err := etcdtopo.Dial(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Etcd().Put(context.Background(), c.MapKey(), "shards: 8\nranges: []\n"); err != nil {
		t.Fatal(err)
	}
	for _, s := range f.servers {
		b := waitReady(t, s, "degraded by the bad map", func(st int, b readyBody) bool {
			return st == http.StatusOK && b.Status == "degraded" && strings.Contains(b.check("topology").Error, "rejected")
		})
		if shardMapOf(t, s).Version != v1 {
			t.Fatalf("a server routes by a bad map: %+v", b)
		}
	}
	alice := s0.create("/v1/users", map[string]any{"username": "alice"})
	f.servers[1].must(http.StatusOK, http.MethodGet, "/v1/users/"+alice.ID, nil)
	// A good map after it brings everyone back.
	good := f.mapFile(t, "good.yaml", twoHalves)
	if push(t, f.tools(), good) != v0 {
		t.Fatal("the same map, another version")
	}
	f.waitAll(t, v0)
	for _, s := range f.servers {
		waitReady(t, s, "ok", func(st int, b readyBody) bool {
			return st == http.StatusOK && b.Status == "ok" && b.check("topology").OK
		})
	}

	// One member of three down: everything keeps working.
	f.etcd.Stop(0)
	f.waitAll(t, push(t, f.tools(), p, "--revision", fmt.Sprint(shardMapOf(t, s0).Revision)))
	time.Sleep(etcdtopo.DefaultStaleAfter + time.Second)
	for _, s := range f.servers {
		waitReady(t, s, "ok with a member down", func(st int, b readyBody) bool { return st == http.StatusOK && b.Status == "ok" })
	}
	f.etcd.Start(0)

	// etcd gone: reads go on, /readyz says the topology is stale, map
	// changes and moves are refused with a clear error, and once a
	// server's topology lease has run out (3/4 of the registration's
	// TTL after its last renewal) it takes no writes: it cannot know
	// that no failover or move went on without it.
	bob := f.servers[2].create("/v1/users", map[string]any{"username": "bob"})
	board := f.servers[1].create("/v1/boards", map[string]any{"owner_id": bob.ID, "name": "before etcd went down"})
	f.etcd.StopAll()
	stopped := time.Now()
	for _, s := range f.servers {
		waitReady(t, s, "stale", func(st int, b readyBody) bool {
			return st == http.StatusOK && b.Status == "degraded" && strings.Contains(b.check("topology").Error, "topology stale")
		})
	}
	s0.must(http.StatusOK, http.MethodGet, "/v1/boards/"+board.ID, nil)
	time.Sleep(time.Until(stopped.Add(time.Duration(etcdtopo.LeaseShare*float64(etcdtopo.DefaultLeaseTTL)) + 500*time.Millisecond)))
	for _, s := range f.servers {
		s.fail(http.StatusServiceUnavailable, model.EUnavailable, http.MethodPost, "/v1/boards", map[string]any{"owner_id": bob.ID, "name": "while etcd is down"})
		s.must(http.StatusOK, http.MethodGet, "/v1/boards/"+board.ID, nil)
	}
	if _, err := runCmd(t, f.tools(), "topology", "push", good); !model.IsCode(err, model.EUnavailable) || !strings.Contains(err.Error(), "is not answering") {
		t.Fatalf("push with etcd down: %v", err)
	}
	if _, err := runCmd(t, f.tools(), "move-shards", "--range", "0-3", "--to", "h1"); !model.IsCode(err, model.EUnavailable) || !strings.Contains(err.Error(), "is not answering") {
		t.Fatalf("move with etcd down: %v", err)
	}
	// Back: the watch and the registrations resume without a restart,
	// and so do writes.
	f.etcd.StartAll()
	for _, s := range f.servers {
		waitReady(t, s, "ok again", func(st int, b readyBody) bool { return st == http.StatusOK && b.Status == "ok" })
		s.create("/v1/boards", map[string]any{"owner_id": bob.ID, "name": "etcd is back"})
	}
	f.waitAll(t, push(t, f.tools(), good))
	deadline = time.Now().Add(15 * time.Second)
	for len(shardMapOf(t, s0).Servers) != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("servers after etcd came back: %+v", shardMapOf(t, s0).Servers)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestEtcdTopologyStartErrors: a URL that does not parse, an etcd that is
// down, no map, a map that does not validate: serve refuses to start and
// says why.
func TestEtcdTopologyStartErrors(t *testing.T) {
	e := testenv.StartEtcd(t, 1)
	prefix := testenv.UniquePrefix(t, "es")
	down := fmt.Sprintf("etcd://127.0.0.1:%d/p", testenv.FreePort(t))
	u, _ := etcdtopo.ParseURL(e.URL(prefix + "bad"))
	c, err := etcdtopo.Dial(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Etcd().Put(context.Background(), c.MapKey(), "shards: 8\nhosts: {h0: {master: \"root@tcp(127.0.0.1:3306)/x\"}}\nranges: [{shards: 0-7, host: h0}]\n"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, url, want string }{
		{"bad URL", "http://127.0.0.1:2379/p", "want etcd://"},
		{"etcd down", down, "is not answering"},
		{"no map", e.URL(prefix + "none"), "no shard map at"},
		{"bad map", e.URL(prefix + "bad"), "names database \"x\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0"}, func(k string) string {
				return map[string]string{"PINSTORE_TOPOLOGY": tc.url, "PINSTORE_DEV": "true", "PINSTORE_REDIS_DISABLED": "true"}[k]
			}, &strings.Builder{}, &strings.Builder{})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "PINSTORE_TOPOLOGY") {
				t.Fatalf("serve: %v, want %q", err, tc.want)
			}
		})
	}
	// Both a map file and a topology: refused.
	err = run(context.Background(), []string{"shards"}, func(k string) string {
		return map[string]string{"PINSTORE_TOPOLOGY": e.URL(prefix), "PINSTORE_SHARD_MAP": "/x.yaml"}[k]
	}, &strings.Builder{}, &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "both set") {
		t.Fatalf("both: %v", err)
	}
}

// TestEtcdMoveShards: with the topology in etcd, move-shards needs neither
// --servers nor a settle time: it waits for every registered server to
// report each new map, and a second move-shards meanwhile is refused.
func TestEtcdMoveShards(t *testing.T) {
	f := startEtcdFleet(t, 1, 2)
	s0, s1 := f.servers[0], f.servers[1]
	var pins []object
	for i := range 6 {
		u := s0.create("/v1/users", map[string]any{"username": fmt.Sprintf("mover%d", i)})
		b := s1.create("/v1/boards", map[string]any{"owner_id": u.ID, "name": "b"})
		pins = append(pins, s0.create("/v1/pins", map[string]any{"board_id": b.ID}))
	}
	// While a move holds the lock in etcd (as a running move-shards does,
	// for as long as it runs), a second one is refused. Holding it here
	// rather than racing a real move makes the refusal certain to be seen.
	u, err := etcdtopo.ParseURL(f.url)
	if err != nil {
		t.Fatal(err)
	}
	c, err := etcdtopo.Dial(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lock, err := c.Home().LockMoves(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runCmd(t, f.tools(), "move-shards", "--range", "0-3", "--to", "h1"); err == nil || !strings.Contains(err.Error(), "another pinstore move-shards is running") {
		lock.Unlock()
		t.Fatalf("second move while the lock is held: %v", err)
	}
	lock.Unlock()
	type result struct {
		out string
		err error
	}
	var r result
	r.out, r.err = runCmd(t, f.tools(), "move-shards", "--range", "0-3", "--to", "h1", "--settle", "1h", "--finish")
	if r.err != nil {
		t.Fatalf("move: %v\n%s", r.err, r.out)
	}
	if n := strings.Count(r.out, "confirmed: every server routes by map"); n != 2 {
		t.Fatalf("%d confirmations, want 2:\n%s", n, r.out)
	}
	v := shardMapOf(t, s0).Version
	f.waitAll(t, v)
	for _, rg := range shardMapOf(t, s1).Ranges {
		if rg.Host != "h1" || rg.ReadOnly {
			t.Fatalf("range after the move: %+v", rg)
		}
	}
	for _, p := range pins {
		s1.must(http.StatusOK, http.MethodPatch, "/v1/pins/"+p.ID, map[string]any{"description": "moved"})
		if got := s0.get("/v1/pins/" + p.ID); got.Description != "moved" {
			t.Fatalf("pin after the move: %+v", got)
		}
	}
	if _, err := runCmd(t, f.tools(), "move-shards", "--range", "0-3", "--to", "h0", "--servers", s0.base); err == nil || !strings.Contains(err.Error(), "--servers is for a map file") {
		t.Fatalf("--servers with etcd: %v", err)
	}
}

// writers creates pins on the given boards through the servers, one
// writer per server, until stop is closed, and records every outcome.
type writers struct {
	mu     sync.Mutex
	acked  []string // ids of pins created
	failed []string // status and body of every write that failed
	wg     sync.WaitGroup
	stop   chan struct{}
}

func startWriters(t *testing.T, servers []*server, boards []string) *writers {
	w := &writers{stop: make(chan struct{})}
	client := &http.Client{Timeout: 30 * time.Second}
	for i, s := range servers {
		w.wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-w.stop:
					return
				default:
				}
				body := fmt.Sprintf(`{"board_id":%q,"description":"w%d-%d"}`, boards[(i+n)%len(boards)], i, n)
				req, _ := http.NewRequest(http.MethodPost, s.base+"/v1/pins", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+e2eAdminToken)
				resp, err := client.Do(req)
				if err != nil {
					w.mu.Lock()
					w.failed = append(w.failed, err.Error())
					w.mu.Unlock()
					continue
				}
				var o struct {
					ID string `json:"id"`
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				w.mu.Lock()
				if resp.StatusCode == http.StatusCreated && json.Unmarshal(b, &o) == nil {
					w.acked = append(w.acked, o.ID)
				} else {
					w.failed = append(w.failed, fmt.Sprintf("%d %s", resp.StatusCode, b))
				}
				w.mu.Unlock()
			}
		})
	}
	return w
}

func (w *writers) halt() {
	close(w.stop)
	w.wg.Wait()
}

// TestEtcdMoveUnderLoad: two writers create pins through two servers on
// the range being moved, throughout a move, then throughout its revert,
// then throughout a second move that finishes: no write fails (writes to
// the range wait in the servers while it is switched), reads keep working,
// and every acknowledged pin is on the host the range ends on, in its
// databases.
func TestEtcdMoveUnderLoad(t *testing.T) {
	f := startEtcdFleet(t, 1, 2)
	s0, s1 := f.servers[0], f.servers[1]
	var boards []string
	var reader object
	for i := 0; len(boards) < 4; i++ {
		u := s0.create("/v1/users", map[string]any{"username": fmt.Sprintf("loader%d", i)})
		if hostOf(t, u.ID) != "h0" {
			continue
		}
		b := s0.create("/v1/boards", map[string]any{"owner_id": u.ID, "name": "b"})
		boards = append(boards, b.ID)
		reader = s1.create("/v1/pins", map[string]any{"board_id": b.ID})
	}
	var acked []string
	// step runs move-shards with args under load and checks that no
	// write failed and the range ends on host, in the map and in host's
	// databases, with every pin acknowledged so far.
	step := func(host string, args ...string) string {
		t.Helper()
		w := startWriters(t, f.servers, boards)
		time.Sleep(300 * time.Millisecond)
		moved := make(chan error, 1)
		var out string
		go func() {
			var err error
			out, err = runCmd(t, f.tools(), append([]string{"move-shards", "--range", "0-3", "--to", "h1"}, args...)...)
			moved <- err
		}()
		// Reads keep working throughout.
		reads := 0
		for done := false; !done; {
			select {
			case err := <-moved:
				if err != nil {
					w.halt()
					t.Fatalf("move-shards %v: %v\n%s", args, err, out)
				}
				done = true
			default:
				s1.must(http.StatusOK, http.MethodGet, "/v1/pins/"+reader.ID, nil)
				reads++
			}
		}
		time.Sleep(300 * time.Millisecond)
		w.halt()
		t.Logf("move-shards %v: %d pins created by two writers, %d reads; output:\n%s", args, len(w.acked), reads, out)
		if len(w.failed) > 0 {
			t.Fatalf("%d writes failed during move-shards %v, first: %s", len(w.failed), args, w.failed[0])
		}
		if len(w.acked) < 10 {
			t.Fatalf("only %d writes during move-shards %v", len(w.acked), args)
		}
		acked = append(acked, w.acked...)
		for _, rg := range shardMapOf(t, s0).Ranges {
			if rg.First < 4 && (rg.Host != host || rg.ReadOnly) {
				t.Fatalf("range after move-shards %v: %+v", args, rg)
			}
		}
		for _, id := range acked {
			if hostOf(t, id) != "h0" {
				t.Fatalf("pin %s was not on the moved range", id)
			}
			s0.must(http.StatusOK, http.MethodGet, "/v1/pins/"+id, nil)
		}
		// The pins are in host's databases themselves, not only reachable.
		dsn := testenv.MySQLDSN(t)
		if host == "h1" {
			dsn = f.h1.DSN()
		}
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for _, id := range acked {
			n, _ := strconv.ParseUint(id, 10, 64)
			var k int
			if err := db.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM %s%05d.pins WHERE local_id = ?", f.prefix, idcodec.ShardOf(n)), idcodec.LocalOf(n)).Scan(&k); err != nil || k != 1 {
				t.Fatalf("pin %s is not in %s's databases: %d %v", id, host, k, err)
			}
		}
		return out
	}
	out := step("h1")
	if !strings.Contains(out, "the move is open") {
		t.Fatalf("the move did not stay open:\n%s", out)
	}
	step("h0", "--revert")
	step("h1", "--finish")
	if n := countDatabases(t, testenv.MySQLDSN(t), f.prefix); n != 0 {
		t.Fatalf("h0 still holds %d of the range's databases after --finish", n)
	}
}
