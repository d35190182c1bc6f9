package testenv

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// etcdStartTimeout bounds how long a member may take to be ready.
const etcdStartTimeout = 60 * time.Second

// Etcd is an etcd cluster a test started: one or more members embedded in
// the test binary (go.etcd.io/etcd/server/v3/embed, the same version as the
// client pinstore uses), each on its own free ports with its own data
// directory. A test stops and restarts members to play an etcd that goes
// away; the cluster is closed and its data deleted when the test ends.
type Etcd struct {
	tb      testing.TB
	dir     string
	token   string
	members []*etcdMember

	mu sync.Mutex
}

type etcdMember struct {
	name             string
	dir              string
	client, peer     url.URL
	e                *embed.Etcd // nil while stopped
	initialClustered bool        // the cluster has formed once: restarts join it as "existing"
}

// StartEtcd starts an etcd cluster of n members (1 or 3, say) and waits
// until every member is ready. It fails the test when a member cannot
// start.
func StartEtcd(tb testing.TB, n int) *Etcd {
	tb.Helper()
	dir, err := os.MkdirTemp("", "pinstore-etcd-")
	if err != nil {
		tb.Fatalf("testenv.StartEtcd: %v", err)
	}
	c := &Etcd{tb: tb, dir: dir, token: filepath.Base(dir)}
	var initial []string
	for i := range n {
		m := &etcdMember{
			name:   fmt.Sprintf("m%d", i),
			dir:    filepath.Join(dir, fmt.Sprintf("m%d", i)),
			client: url.URL{Scheme: "http", Host: localAddr(FreePort(tb))},
			peer:   url.URL{Scheme: "http", Host: localAddr(FreePort(tb))},
		}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peer.String())
	}
	tb.Cleanup(c.closeAll)
	// Members of a new cluster wait for each other: start them together.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, m := range c.members {
		wg.Go(func() { errs[i] = c.start(m, strings.Join(initial, ",")) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			tb.Fatalf("testenv.StartEtcd: %v", err)
		}
	}
	for _, m := range c.members {
		m.initialClustered = true
	}
	return c
}

func (c *Etcd) start(m *etcdMember, initial string) error {
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	cfg.ListenClientUrls = []url.URL{m.client}
	cfg.AdvertiseClientUrls = []url.URL{m.client}
	cfg.ListenPeerUrls = []url.URL{m.peer}
	cfg.AdvertisePeerUrls = []url.URL{m.peer}
	cfg.InitialCluster = initial
	cfg.InitialClusterToken = c.token
	cfg.ClusterState = embed.ClusterStateFlagNew
	if m.initialClustered {
		cfg.ClusterState = embed.ClusterStateFlagExisting
	}
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(c.dir, m.name+".log")}
	cfg.UnsafeNoFsync = true // tests don't simulate machine crashes
	cfg.TickMs = 50
	cfg.ElectionMs = 500
	cfg.ListenMetricsUrls = nil
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("etcd member %s: %w", m.name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcd member %s: %w", m.name, err)
	case <-time.After(etcdStartTimeout):
		e.Close()
		return fmt.Errorf("etcd member %s not ready after %v", m.name, etcdStartTimeout)
	}
	c.mu.Lock()
	m.e = e
	c.mu.Unlock()
	return nil
}

// Endpoints are the members' client addresses ("127.0.0.1:port"), in
// member order, stopped members included.
func (c *Etcd) Endpoints() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.client.Host
	}
	return out
}

// URL is the PINSTORE_TOPOLOGY value naming every member and prefix.
func (c *Etcd) URL(prefix string) string {
	return "etcd://" + strings.Join(c.Endpoints(), ",") + "/" + strings.TrimPrefix(prefix, "/")
}

// Stop stops member i (its data stays, so Start brings it back as it was).
func (c *Etcd) Stop(i int) {
	c.tb.Helper()
	c.mu.Lock()
	e := c.members[i].e
	c.members[i].e = nil
	c.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// Start starts member i again after Stop, on the same ports and data.
func (c *Etcd) Start(i int) {
	c.tb.Helper()
	var initial []string
	for _, m := range c.members {
		initial = append(initial, m.name+"="+m.peer.String())
	}
	if err := c.start(c.members[i], strings.Join(initial, ",")); err != nil {
		c.tb.Fatalf("testenv.Etcd.Start: %v", err)
	}
}

// StopAll stops every member: etcd is unreachable until StartAll.
func (c *Etcd) StopAll() {
	c.tb.Helper()
	for i := range c.members {
		c.Stop(i)
	}
}

// StartAll starts every stopped member again, together (a majority must
// be up before any answers).
func (c *Etcd) StartAll() {
	c.tb.Helper()
	var initial []string
	for _, m := range c.members {
		initial = append(initial, m.name+"="+m.peer.String())
	}
	errs := make([]error, len(c.members))
	var wg sync.WaitGroup
	for i, m := range c.members {
		c.mu.Lock()
		running := m.e != nil
		c.mu.Unlock()
		if running {
			continue
		}
		wg.Go(func() { errs[i] = c.start(m, strings.Join(initial, ",")) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			c.tb.Fatalf("testenv.Etcd.StartAll: %v", err)
		}
	}
}

func (c *Etcd) closeAll() {
	for i := range c.members {
		c.Stop(i)
	}
	_ = os.RemoveAll(c.dir)
}
