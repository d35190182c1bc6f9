package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/etcdtopo"
	"github.com/pinstore/pinstore/internal/testenv"
)

// TestShardsWithoutAGoodTopology: a server follows a map in a real etcd.
// While a map that does not validate sits in etcd, `pinstore shards`
// says so and why, lists the servers with the map each routes by, shows
// the hosts of that map, and exits 1. While etcd is down, GET
// /v1/admin/shard-map answers promptly every time from what the server
// has, saying the topology is stale and the list of servers old.
func TestShardsWithoutAGoodTopology(t *testing.T) {
	e := testenv.StartEtcd(t, 1)
	dsn := testenv.MySQLDSN(t)
	prefix := testenv.UniquePrefix(t, "ts")
	t.Cleanup(func() { testenv.DropDatabases(t, dsn, prefix) })
	url := e.URL(prefix)
	path := filepath.Join(t.TempDir(), "map.yaml")
	body := fmt.Sprintf("shards: %d\ndb_prefix: %s\nhosts:\n  h0: {master: %q}\nranges:\n  - {shards: 0-%d, host: h0}\n", e2eShards, prefix, dsn, e2eShards-1)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PINSTORE_TOPOLOGY": url, "PINSTORE_DB_PREFIX": prefix, "PINSTORE_SHARDS": fmt.Sprint(e2eShards)}
	tools := map[string]string{"PINSTORE_REDIS_DISABLED": "true"}
	for k, v := range env {
		tools[k] = v
	}
	v0 := push(t, tools, path)
	s := startServerEnv(t, env)
	waitFor(t, 10*time.Second, "the server to register", func() bool { return len(shardMapOf(t, s).Servers) == 1 })

	// A map that does not validate, written by hand.
	u, _ := etcdtopo.ParseURL(url)
	c, err := etcdtopo.Dial(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Etcd().Put(context.Background(), c.MapKey(), "shards: 8\nranges: []\n"); err != nil {
		t.Fatal(err)
	}
	waitReady(t, s, "degraded by the bad map", func(st int, b readyBody) bool {
		return st == http.StatusOK && strings.Contains(b.check("topology").Error, "rejected")
	})
	out, err := runCmd(t, tools, "shards")
	if err == nil || !strings.Contains(err.Error(), "does not validate") {
		t.Errorf("shards with a bad map in etcd: err %v, want an error saying the map does not validate", err)
	}
	for _, w := range []string{
		"NO VALID SHARD MAP IN ETCD", "does not validate",
		"1 servers registered", "routes by " + v0,
		"the map servers route by: version " + v0,
		"host h0", "shards 0-7",
	} {
		if !strings.Contains(out, w) {
			t.Errorf("shards with a bad map in etcd lacks %q:\n%s", w, out)
		}
	}

	// A good map again, then etcd down: the admin route answers at once.
	push(t, tools, path)
	waitReady(t, s, "ok", func(st int, b readyBody) bool { return st == http.StatusOK && b.check("topology").OK })
	e.StopAll()
	var slowest time.Duration
	stale, oldList := false, false
	for end := time.Now().Add(etcdtopo.DefaultStaleAfter + 2*time.Second); time.Now().Before(end); {
		begin := time.Now()
		info := shardMapOf(t, s)
		took := time.Since(begin)
		slowest = max(slowest, took)
		if took > time.Second {
			t.Errorf("GET /v1/admin/shard-map took %v with etcd down", took.Round(time.Millisecond))
		}
		if info.Version != v0 {
			t.Fatalf("the server routes by %s, not %s", info.Version, v0)
		}
		stale = stale || strings.Contains(info.Stale, "topology stale")
		oldList = oldList || len(info.Servers) == 1 && strings.Contains(info.ServersError, "as registered at")
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("slowest GET /v1/admin/shard-map with etcd down: %v", slowest.Round(time.Millisecond))
	if !stale || !oldList {
		t.Errorf("with etcd down the admin route never said the topology is stale (%v) or gave the servers it had, saying when they were read (%v)", stale, oldList)
	}
	e.StartAll()
	waitReady(t, s, "ok again", func(st int, b readyBody) bool { return st == http.StatusOK && b.check("topology").OK })
}
