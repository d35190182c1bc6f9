package jepsen

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/pinstore/pinstore/internal/netlab"
	"github.com/pinstore/pinstore/internal/testenv"
)

func TestMain(m *testing.M) {
	netlab.Helper()
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

// Timing of the scenarios.
const (
	warmUp    = 3 * time.Second  // writes before the cut
	afterHeal = 5 * time.Second  // writes after the heal
	partition = 20 * time.Second // how long a partition lasts
	// etcdBound is how long after losing etcd a server may still
	// acknowledge writes: its registration's lease (10 s) and 5 s of
	// slack for the request in flight and the lease's last renewal.
	etcdBound = 15 * time.Second
)

// TestPartition cuts the network between the fleet's processes, each in
// a network namespace of its own, while 12 writers send keyed creates
// and If-Match edits through all three servers and keep a ledger of
// every acknowledged write. After the heal, once the fleet has
// converged, every pin an acknowledged create named is read back through
// a server: no acknowledged write may be lost, no ID given to two
// objects, no version acknowledged with two bodies; and a server cut off
// from etcd for longer than its lease acknowledges no write until it
// hears from etcd again. Each scenario starts from a whole fleet: a
// former master is attached again as a replica (`pinstore replica add
// --rebuild`).
func TestPartition(t *testing.T) {
	f := startFleet(t)
	s1, s2, s3 := f.servers[0], f.servers[1], f.servers[2]
	e := f.etcd.Node
	first := true
	scenario := func(name, what string, body func(t *testing.T, w *run)) {
		t.Run(name, func(t *testing.T) {
			parent := f.t
			f.t = t
			defer func() { f.t = parent }()
			if !first {
				f.restore()
			}
			first = false
			master, replicas, _ := f.roles()
			t.Logf("%s: master %s, replicas %v, failover leader %s", what, master.name, names(replicas), f.leader())
			r := &run{f: f, t: t, master: master, replicas: replicas}
			r.w = startWorkload(t, name, f.servers, s2)
			time.Sleep(warmUp)
			body(t, r)
			r.finish(name)
		})
	}

	// (a) The master cut from its replicas, two servers and etcd; one
	// server cut from etcd and the other servers, still reaching the
	// master: the majority fails the master over, and the isolated
	// server must not acknowledge what the old master commits alone.
	scenario("isolated_master_and_server", "the master cut from its replicas, S2, S3 and etcd; S1 cut from etcd, S2, S3", func(t *testing.T, r *run) {
		r.isolate(s1)
		r.sleep(partition)
		r.heal()
		r.checkEtcdBound(s1)
	})

	// (b) The master cut from its replicas and from every server but S1;
	// etcd and S1 reach everything.
	scenario("master_cut_from_replicas", "the master cut from its replicas, S2 and S3; S1 and etcd reach it", func(t *testing.T, r *run) {
		r.cut([]*netlab.Node{r.master.node}, append(nodes(r.replicas), s2.node, s3.node))
		r.sleep(partition)
		r.heal()
	})

	// (c) A minority of the servers (S1) cut from etcd only.
	scenario("server_cut_from_etcd", "S1 cut from etcd only", func(t *testing.T, r *run) {
		r.cut([]*netlab.Node{s1.node}, []*netlab.Node{e})
		r.sleep(partition)
		r.heal()
		r.checkEtcdBound(s1)
	})

	// (d) The partition of (a), healed and made again on whichever
	// master the first one left.
	scenario("repeated", "the partition of (a), healed after 15 s and made again", func(t *testing.T, r *run) {
		r.isolate(s1)
		r.sleep(15 * time.Second)
		r.heal()
		r.checkEtcdBound(s1)
		r.sleep(10 * time.Second)
		m, reps, _ := f.roles()
		r.master, r.replicas = m, reps
		t.Logf("second partition: master %s, replicas %v", m.name, names(reps))
		r.isolate(s1)
		r.sleep(15 * time.Second)
		r.heal()
		r.checkEtcdBound(s1)
	})
}

// run is one scenario under way.
type run struct {
	f        *fleet
	t        *testing.T
	w        *workload
	master   *dbNode
	replicas []*dbNode
	cuts     []window
	bounds   []boundCheck
}

// window is when a cut was in force.
type window struct {
	what     string
	from, to time.Time
}

func (r *run) cut(side, other []*netlab.Node) {
	r.f.lab.Cut(side, other)
	if len(r.cuts) == 0 || !r.cuts[len(r.cuts)-1].to.IsZero() {
		r.cuts = append(r.cuts, window{from: time.Now()})
	}
	r.cuts[len(r.cuts)-1].what = r.f.lab.Cuts()
	r.t.Logf("cut: %s", r.f.lab.Cuts())
}

// isolate makes the partition of the issue: the master cut from its
// replicas, the other servers and etcd; s cut from etcd and the other
// servers; s and the master still connected.
func (r *run) isolate(s *server) {
	var others []*netlab.Node
	for _, x := range r.f.servers {
		if x != s {
			others = append(others, x.node)
		}
	}
	e := r.f.etcd.Node
	r.cut([]*netlab.Node{r.master.node}, append(append(nodes(r.replicas), others...), e))
	r.cut([]*netlab.Node{s.node}, append(others, e))
}

func (r *run) heal() {
	r.f.lab.HealAll()
	r.cuts[len(r.cuts)-1].to = time.Now()
	r.t.Logf("healed after %v", r.cuts[len(r.cuts)-1].to.Sub(r.cuts[len(r.cuts)-1].from).Round(time.Millisecond))
}

func (r *run) sleep(d time.Duration) { time.Sleep(d) }

// checkEtcdBound has finish check that s acknowledged no write it
// received more than etcdBound into the last cut (s being cut from etcd).
func (r *run) checkEtcdBound(s *server) {
	w := r.cuts[len(r.cuts)-1]
	r.bounds = append(r.bounds, boundCheck{server: s.name, from: w.from.Add(etcdBound), to: w.to})
}

// finish stops the writers after afterHeal, waits for the fleet to
// converge, reads everything back and judges the ledger.
func (r *run) finish(name string) {
	t := r.t
	time.Sleep(afterHeal)
	ops := r.w.stop()
	settled := r.f.waitConverged(90 * time.Second)
	m, reps, out := r.f.roles()
	final := readBack(t, r.f.servers[1], ops)
	v := judge(ops, final)
	t.Logf("RESULT %s: %s; writers saw %d rollbacks; converged %v after the writers stopped; now master %s, replicas %v, out %v",
		name, v, r.w.rollbacks(), settled.Round(time.Millisecond), m.name, names(reps), names(out))
	for i, c := range r.cuts {
		t.Logf("RESULT %s: partition %d (%v): writes through s2/s3 acknowledged again %v after the cut; acknowledged during it by s1 %d, s2 %d, s3 %d",
			name, i+1, c.to.Sub(c.from).Round(time.Second), round(firstAck(ops, c.from, "s2", "s3")),
			ackedWhile(ops, "s1", c.from, c.to), ackedWhile(ops, "s2", c.from, c.to), ackedWhile(ops, "s3", c.from, c.to))
	}
	if len(r.cuts) > 0 {
		for _, l := range r.f.failoverLog(r.cuts[0].from) {
			t.Logf("  server log, from the first cut: %s", l)
		}
	}
	for _, ex := range v.examples {
		t.Logf("  e.g. %s", ex)
	}
	if v.bad() {
		t.Errorf("%s: the ledger found acknowledged writes lost or IDs reused: %s", name, v)
	}
	for _, b := range r.bounds {
		if n := ackedWhile(ops, b.server, b.from, b.to); n > 0 {
			t.Errorf("%s: %s acknowledged %d writes it received more than %v after it lost etcd (and before the heal)", name, b.server, n, etcdBound)
		}
	}
	if v.acked == 0 {
		t.Errorf("%s: no write was acknowledged at all", name)
	}
}

// boundCheck: server must acknowledge no write received in [from, to].
type boundCheck struct {
	server   string
	from, to time.Time
}

// leader is the server elected to fail masters over, as etcd says.
func (f *fleet) leader() string {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{f.etcd.Endpoint()}, DialTimeout: 2 * time.Second})
	if err != nil {
		return "?"
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/"+f.prefix+"/failover/leader/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil || len(resp.Kvs) == 0 {
		return "none"
	}
	id := string(resp.Kvs[0].Value)
	for _, s := range f.servers {
		if strings.HasPrefix(id, s.node.IP.String()+":") {
			return s.name
		}
	}
	return id
}

func names(ds []*dbNode) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.name)
	}
	return out
}

func nodes(ds []*dbNode) []*netlab.Node {
	var out []*netlab.Node
	for _, d := range ds {
		out = append(out, d.node)
	}
	return out
}

func round(d time.Duration) any {
	if d < 0 {
		return "never"
	}
	return d.Round(100 * time.Millisecond)
}
