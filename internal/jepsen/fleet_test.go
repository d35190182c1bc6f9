package jepsen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinstore/pinstore/auth"
	"github.com/pinstore/pinstore/cluster/etcdtopo"
	fleetinfo "github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/internal/netlab"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/store/shardmap"
)

// The fleet's settings.
const (
	shards       = 8
	host         = "a"    // the one host of the map: every shard on it
	failoverWait = "3s"   // PINSTORE_FAILOVER_AFTER
	serverPort   = "8080" // each server's port, on its node's address
	adminUser    = "admin"
	// serviceToken is the writers' token (every scope): servers off
	// loopback refuse to start without tokens.
	serviceToken = "jepsen-service-7d1c0e5a9b3f4d2e8a6c"
)

// fleet is the system under test, each process in a node of its own:
// MariaDB M (master) and R1, R2 (its replicas, set up with `pinstore
// replica add`), etcd E, and servers S1–S3 (`pinstore serve`, the real
// binary, following the map in etcd with automatic failover on).
type fleet struct {
	t      *testing.T
	lab    *netlab.Lab
	bin    string // the pinstore binary
	prefix string // database prefix, and the etcd prefix

	dbs     []*dbNode // M, R1, R2
	etcd    *netlab.Etcd
	servers []*server // S1, S2, S3
	env     []string  // what every server and command gets
}

// dbNode is a MariaDB server in its node.
type dbNode struct {
	name string
	node *netlab.Node
	host *testenv.Host
}

// server is a running pinstore serve.
type server struct {
	name string
	node *netlab.Node
	proc *netlab.Proc
	base string // http://IP:8080
}

// startFleet builds the binary and starts everything: the hosts, the
// shards (`pinstore migrate`), the replicas (`pinstore replica add`), the
// map in etcd (`pinstore topology push`) and the servers.
func startFleet(t *testing.T) *fleet {
	t.Helper()
	begin := time.Now()
	lab := netlab.New(t)
	f := &fleet{t: t, lab: lab, prefix: testenv.UniquePrefix(t, "jp")}
	names := []string{"m", "r1", "r2"}
	for _, n := range names {
		f.dbs = append(f.dbs, &dbNode{name: n, node: lab.Node(n)})
	}
	etcdNode := lab.Node("e")
	for i := range 3 {
		n := fmt.Sprintf("s%d", i+1)
		nd := lab.Node(n)
		f.servers = append(f.servers, &server{name: n, node: nd, base: "http://" + nd.IP.String() + ":" + serverPort})
	}

	var wg sync.WaitGroup
	var buildErr error
	wg.Go(func() { f.bin, buildErr = buildPinstore(t) })
	for i, d := range f.dbs {
		wg.Go(func() {
			args := testenv.SemiSyncMasterArgs
			if i > 0 {
				args = append(slices.Clone(testenv.SemiSyncReplicaArgs), "--read-only=ON")
			}
			d.host = testenv.ReplicationHostWith(t, "jepsen-"+d.name, testenv.HostOptions{
				ServerID: i + 1, Args: args, Netns: d.node.NS, IP: d.node.IP.String(),
			})
			// The administrator the commands and the failover use, from
			// any node (root is local only).
			d.host.Exec(t, "SET SESSION sql_log_bin = 0",
				"CREATE USER "+adminUser+"@'%'",
				"GRANT ALL PRIVILEGES ON *.* TO "+adminUser+"@'%' WITH GRANT OPTION")
		})
	}
	wg.Go(func() { f.etcd = lab.StartEtcd(etcdNode) })
	wg.Wait()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	if t.Failed() {
		t.FailNow()
	}
	step := func(what string) {
		t.Logf("fleet: %s at +%v", what, time.Since(begin).Round(100*time.Millisecond))
	}
	step("binary built, hosts and etcd up")

	// The map, the shards, the replicas, as README's "Replicas and
	// failover" has an operator do it; then the map goes to etcd.
	mapFile := filepath.Join(t.TempDir(), "shardmap.yaml")
	m := fmt.Sprintf("shards: %d\ndb_prefix: %s\nhosts:\n  %s: {master: %q}\nranges:\n  - {shards: 0-%d, host: %s}\n",
		shards, f.prefix, host, f.dbs[0].host.AppDSN(), shards-1, host)
	if err := os.WriteFile(mapFile, []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(tokens, []byte("tokens:\n  "+auth.HashLine("jepsen", auth.ScopeRead|auth.ScopeWrite|auth.ScopeAdmin, serviceToken)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{
		"PINSTORE_SHARDS=" + fmt.Sprint(shards),
		"PINSTORE_DB_PREFIX=" + f.prefix,
		"PINSTORE_MYSQL_ADMIN=" + adminUser,
		"PINSTORE_REDIS_DISABLED=true",
		"PINSTORE_OBJECT_CACHE=off",
	}
	fileEnv := append(slices.Clone(common), "PINSTORE_SHARD_MAP="+mapFile)
	f.run(fileEnv, "migrate")
	step("migrated")
	for _, r := range f.dbs[1:] {
		f.run(fileEnv, "replica", "add", "--host", host, "--dsn", r.host.AppDSN())
		step("replica " + r.name + " added")
	}
	f.env = append(common, "PINSTORE_TOPOLOGY="+f.topologyURL())
	f.run(f.env, "topology", "push", mapFile)

	f.env = append(f.env,
		"PINSTORE_FAILOVER=auto",
		"PINSTORE_FAILOVER_AFTER="+failoverWait,
		"PINSTORE_TOKENS_FILE="+tokens,
		"PINSTORE_CURSOR_SECRET=jepsen-cursor-secret",
		"PINSTORE_LOG_LEVEL=info",
	)
	for _, s := range f.servers {
		s.proc = lab.Start(s.node, s.name, append(slices.Clone(f.env), "PINSTORE_ADDR="+s.node.IP.String()+":"+serverPort), f.bin, "serve")
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, s := range f.servers {
				t.Logf("--- tail of %s's log ---\n%s", s.name, s.proc.Tail(6000))
			}
		}
	})
	f.waitConverged(90 * time.Second)
	t.Logf("fleet up in %v: M %s, R1 %s, R2 %s, etcd %s, servers %s %s %s", time.Since(begin).Round(time.Millisecond),
		f.dbs[0].host.Addr(), f.dbs[1].host.Addr(), f.dbs[2].host.Addr(), f.etcd.Endpoint(),
		f.servers[0].base, f.servers[1].base, f.servers[2].base)
	return f
}

// buildPinstore builds cmd/pinstore into a temporary directory.
func buildPinstore(t *testing.T) (string, error) {
	bin := filepath.Join(t.TempDir(), "pinstore")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/pinstore/pinstore/cmd/pinstore").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/pinstore: %v\n%s", err, out)
	}
	return bin, nil
}

func (f *fleet) topologyURL() string { return "etcd://" + f.etcd.Endpoint() + "/" + f.prefix }

// run runs the pinstore command args in the root namespace with env, and
// fails the test when it fails.
func (f *fleet) run(env []string, args ...string) string {
	f.t.Helper()
	out, err := f.tryRun(env, args...)
	if err != nil {
		f.t.Fatalf("pinstore %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (f *fleet) tryRun(env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, f.bin, args...)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PINSTORE_") }), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// readMap reads the map in etcd.
func (f *fleet) readMap() *shardmap.Map {
	f.t.Helper()
	u, err := etcdtopo.ParseURL(f.topologyURL())
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := etcdtopo.Dial(ctx, u)
	if err != nil {
		f.t.Fatalf("etcd: %v", err)
	}
	defer c.Close()
	m, _, err := c.Map(ctx, shards, f.prefix)
	if err != nil {
		f.t.Fatalf("reading the map in etcd: %v", err)
	}
	return m
}

// byDSN is the database node a DSN of the map names.
func (f *fleet) byDSN(dsn string) *dbNode {
	f.t.Helper()
	for _, d := range f.dbs {
		if shardmap.HostAddr(dsn) == "tcp("+d.host.Addr()+")" {
			return d
		}
	}
	f.t.Fatalf("no database node is %s", dsn)
	return nil
}

// roles reads the map: the host's master, its replicas, and the
// database nodes that are neither (fenced former masters).
func (f *fleet) roles() (master *dbNode, replicas, out []*dbNode) {
	f.t.Helper()
	spec := f.readMap().Hosts[host]
	master = f.byDSN(spec.Master)
	for _, dsn := range spec.ReplicaDSNs() {
		replicas = append(replicas, f.byDSN(dsn))
	}
	for _, d := range f.dbs {
		if d != master && !slices.Contains(replicas, d) {
			out = append(out, d)
		}
	}
	return master, replicas, out
}

// shardMap is GET /v1/admin/shard-map on s.
func (f *fleet) shardMap(s *server) (fleetinfo.ShardMapInfo, error) {
	var info fleetinfo.ShardMapInfo
	req, _ := http.NewRequest(http.MethodGet, s.base+"/v1/admin/shard-map", nil)
	req.Header.Set("Authorization", "Bearer "+serviceToken)
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return info, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return info, fmt.Errorf("%s: shard-map answered %d", s.name, resp.StatusCode)
	}
	return info, json.NewDecoder(resp.Body).Decode(&info)
}

// waitConverged waits until every server routes by the map in etcd
// (writable), all three are registered, and a create succeeds through
// each: the fleet is whole again.
func (f *fleet) waitConverged(timeout time.Duration) time.Duration {
	f.t.Helper()
	begin := time.Now()
	deadline := begin.Add(timeout)
	var why string
	for time.Now().Before(deadline) {
		why = f.converged()
		if why == "" {
			return time.Since(begin)
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.t.Fatalf("the fleet did not converge within %v: %s", timeout, why)
	return 0
}

// converged says why the fleet is not whole, or "".
func (f *fleet) converged() string {
	want := f.readMap()
	for _, r := range want.Ranges {
		if r.ReadOnly {
			return "a range is read-only in the map (a failover is running)"
		}
	}
	for _, s := range f.servers {
		if s.proc.Exited() {
			f.t.Fatalf("%s exited:\n%s", s.name, s.proc.Tail(4000))
		}
		info, err := f.shardMap(s)
		if err != nil {
			return err.Error()
		}
		if info.Version != want.Version() || info.Stale != "" {
			return fmt.Sprintf("%s routes by map %s (stale: %q), etcd holds %s", s.name, info.Version, info.Stale, want.Version())
		}
		if len(info.Servers) != len(f.servers) {
			return fmt.Sprintf("%s sees %d registered servers", s.name, len(info.Servers))
		}
	}
	for _, s := range f.servers {
		if st := probeWrite(s); st != http.StatusCreated {
			return fmt.Sprintf("a create through %s answered %d", s.name, st)
		}
	}
	return ""
}

// probeWrite creates a user through s and returns the status (0: no
// answer).
func probeWrite(s *server) int {
	c := newClient()
	r := c.do(context.Background(), http.MethodPost, s.base+"/v1/users", map[string]any{"username": fmt.Sprintf("probe%d", time.Now().UnixNano())})
	return r.status
}

// failoverLog is what the servers logged about automatic failover
// since from: one line each, the time relative to from.
func (f *fleet) failoverLog(from time.Time) []string {
	type logLine struct {
		at   time.Time
		text string
	}
	var lines []logLine
	for _, s := range f.servers {
		b, err := os.ReadFile(s.proc.Log)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) != nil {
				continue
			}
			msg, _ := rec["msg"].(string)
			ts, _ := rec["time"].(string)
			at, err := time.Parse(time.RFC3339Nano, ts)
			if err != nil || at.Before(from) || !strings.Contains(msg, "failover") && !strings.Contains(msg, "fenced") {
				continue
			}
			var kv []string
			for _, k := range []string{"from", "to", "took", "down_for", "writes_held", "lost", "error"} {
				if v, ok := rec[k]; ok {
					kv = append(kv, fmt.Sprintf("%s=%v", k, v))
				}
			}
			lines = append(lines, logLine{at, fmt.Sprintf("+%v %s: %s %s", at.Sub(from).Round(100*time.Millisecond), s.name, msg, strings.Join(kv, " "))})
		}
	}
	slices.SortStableFunc(lines, func(a, b logLine) int { return a.at.Compare(b.at) })
	var out []string
	for _, l := range lines {
		out = append(out, l.text)
	}
	return out
}

// restore gives the host back its two replicas after a scenario failed
// it over: every database node the map no longer names (a fenced former
// master) is restarted with a replica's configuration and attached with
// `pinstore replica add --rebuild`, as README has an operator do.
func (f *fleet) restore() {
	f.t.Helper()
	f.lab.HealAll()
	_, _, out := f.roles()
	for _, d := range out {
		d.host.Kill(f.t)
		d.host.SetArgs(append(slices.Clone(testenv.SemiSyncReplicaArgs), "--read-only=ON"))
		d.host.Start(f.t)
		f.run(f.env, "replica", "add", "--host", host, "--dsn", d.host.AppDSN(), "--rebuild")
	}
	f.waitConverged(90 * time.Second)
}
