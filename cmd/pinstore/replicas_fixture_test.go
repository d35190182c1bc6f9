package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/pinstore/pinstore/cluster/etcdtopo"
	"github.com/pinstore/pinstore/internal/testenv"
)

// replFleet is hosts "a", "b" … each holding an equal range of the
// shards on a MariaDB master with replicas, every one a mariadbd of its
// own with a binary log (testenv.ReplicationHost), semi-synchronous as
// docs/operations/replicas-and-failover.md recommends; servers and tools
// reach them as testenv.AppUser, the commands that change replication as
// root (PINSTORE_MYSQL_ADMIN).
type replFleet struct {
	hosts   []replHost
	prefix  string
	mapFile string
	env     map[string]string // the servers' and tools' environment
}

type replHost struct {
	name     string
	master   *testenv.Host
	replicas []*testenv.Host
}

// startReplFleet starts, for each count in replicasPerHost, a host with a
// master and that many replicas; migrates e2eShards shards split between
// the hosts; and runs `pinstore replica add` for each replica. extra is
// added to the environment.
func startReplFleet(t *testing.T, extra map[string]string, replicasPerHost ...int) *replFleet {
	t.Helper()
	return startReplFleetSync(t, true, extra, replicasPerHost...)
}

// startReplFleetSync is startReplFleet with semi-synchronous replication
// on or off (servers configured, and replica add --semi-sync).
func startReplFleetSync(t *testing.T, semiSync bool, extra map[string]string, replicasPerHost ...int) *replFleet {
	t.Helper()
	return startReplFleetShards(t, e2eShards, semiSync, extra, replicasPerHost...)
}

// startReplFleetShards is startReplFleetSync with a map of shards shards.
func startReplFleetShards(t *testing.T, shards int, semiSync bool, extra map[string]string, replicasPerHost ...int) *replFleet {
	t.Helper()
	masterArgs, replicaArgs := testenv.SemiSyncMasterArgs, testenv.SemiSyncReplicaArgs
	if !semiSync {
		masterArgs, replicaArgs = nil, nil
	}
	f := &replFleet{prefix: testenv.UniquePrefix(t, "rp")}
	id := 0
	var wg sync.WaitGroup
	for hi, n := range replicasPerHost {
		h := replHost{name: string(rune('a' + hi)), replicas: make([]*testenv.Host, n)}
		for i := range n + 1 {
			id++
			id := id
			wg.Go(func() {
				if i == 0 {
					h.master = testenv.ReplicationHost(t, fmt.Sprintf("repl-%s0", h.name), id, masterArgs...)
					return
				}
				h.replicas[i-1] = testenv.ReplicationHost(t, fmt.Sprintf("repl-%s%d", h.name, i), id,
					append(append([]string(nil), replicaArgs...), "--read-only=ON")...)
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		f.hosts = append(f.hosts, h)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "shards: %d\ndb_prefix: %s\nhosts:\n", shards, f.prefix)
	for _, h := range f.hosts {
		fmt.Fprintf(&b, "  %s: {master: %q}\n", h.name, h.master.AppDSN())
	}
	b.WriteString("ranges:\n")
	per := shards / len(f.hosts)
	for i, h := range f.hosts {
		fmt.Fprintf(&b, "  - {shards: %d-%d, host: %s}\n", i*per, (i+1)*per-1, h.name)
	}
	f.mapFile = filepath.Join(t.TempDir(), "shardmap.yaml")
	if err := os.WriteFile(f.mapFile, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	f.env = map[string]string{
		"PINSTORE_SHARD_MAP":      f.mapFile,
		"PINSTORE_DB_PREFIX":      f.prefix,
		"PINSTORE_MYSQL_ADMIN":    "root",
		"PINSTORE_REDIS_DISABLED": "true",
		"PINSTORE_MAP_POLL":       "100ms",
	}
	for k, v := range extra {
		f.env[k] = v
	}
	if out, err := runCmd(t, f.env, "migrate"); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	for _, h := range f.hosts {
		for _, r := range h.replicas {
			if out, err := runCmd(t, f.env, "replica", "add", "--host", h.name, "--dsn", r.AppDSN(), fmt.Sprintf("--semi-sync=%v", semiSync)); err != nil {
				t.Fatalf("replica add %s: %v\n%s", r.Addr(), err, out)
			}
		}
	}
	return f
}

// toEtcd starts an etcd, pushes the fleet's map to it and switches
// f.env to it (PINSTORE_TOPOLOGY in place of PINSTORE_SHARD_MAP), with
// extra added.
func (f *replFleet) toEtcd(t *testing.T, extra map[string]string) *testenv.Etcd {
	t.Helper()
	etcd := testenv.StartEtcd(t, 1)
	env := map[string]string{"PINSTORE_TOPOLOGY": etcd.URL(f.prefix)}
	for k, v := range f.env {
		if k != "PINSTORE_SHARD_MAP" {
			env[k] = v
		}
	}
	for k, v := range extra {
		env[k] = v
	}
	if out, err := runCmd(t, env, "topology", "push", f.mapFile); err != nil {
		t.Fatalf("push: %v\n%s", err, out)
	}
	f.env = env
	return etcd
}

// fakeRegs registers servers that are not running in an etcd topology,
// under a lease of their own.
type fakeRegs struct {
	cli    *clientv3.Client
	lease  clientv3.LeaseID
	prefix string
}

// fakeServers connects to etcd for fake registrations under the topology
// prefix; the connection goes with the test.
func fakeServers(t *testing.T, etcd *testenv.Etcd, prefix string) *fakeRegs {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	lease, err := cli.Grant(context.Background(), 60)
	if err != nil {
		t.Fatal(err)
	}
	return &fakeRegs{cli: cli, lease: lease.ID, prefix: prefix}
}

// register writes reg as a running server would (P/servers/<id>).
func (r *fakeRegs) register(t *testing.T, reg etcdtopo.Registration) {
	t.Helper()
	b, err := json.Marshal(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.cli.Put(context.Background(), "/"+r.prefix+"/servers/"+reg.ID, string(b), clientv3.WithLease(r.lease)); err != nil {
		t.Fatal(err)
	}
}

// revoke removes every registration r made.
func (r *fakeRegs) revoke(t *testing.T) {
	t.Helper()
	if _, err := r.cli.Revoke(context.Background(), r.lease); err != nil {
		t.Fatal(err)
	}
}

// shards runs `pinstore shards` and returns its output and error.
func (f *replFleet) shards(t *testing.T) (string, error) {
	t.Helper()
	return runCmd(t, f.env, "shards")
}

// line returns the line of out that mentions s, or fails.
func line(t *testing.T, out, s string) string {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	t.Fatalf("no line mentions %q in:\n%s", s, out)
	return ""
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// taddr is how the map, shards and the admin route name h: tcp(host:port).
func taddr(h *testenv.Host) string { return "tcp(" + h.Addr() + ")" }
