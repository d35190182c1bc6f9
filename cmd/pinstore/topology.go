package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/pinstore/pinstore/cluster/etcdtopo"
	"github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/cluster/reshard"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store"
	"github.com/pinstore/pinstore/store/shardmap"
)

// etcdTopo is the etcd topology a command follows (PINSTORE_TOPOLOGY):
// the client and the revision of the map it read.
type etcdTopo struct {
	c   *etcdtopo.Client
	rev int64
}

// openTopology, when PINSTORE_TOPOLOGY names an etcd topology, connects to
// it and puts the map it holds in cfg.Map (validated as a map file is,
// with cfg.Map's shard count and prefix as defaults). Without the
// variable it returns nil and leaves cfg alone. A URL that does not parse,
// an etcd that does not answer, no map or a map that does not validate
// is an error saying so (the last two an *invalidMapError).
func openTopology(ctx context.Context, getenv func(string) string, cfg *store.Config) (*etcdTopo, error) {
	raw := getenv("PINSTORE_TOPOLOGY")
	if raw == "" {
		return nil, nil
	}
	u, err := etcdtopo.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("PINSTORE_TOPOLOGY: %w", err)
	}
	c, err := etcdtopo.Dial(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("PINSTORE_TOPOLOGY: %w", err)
	}
	m, rev, err := c.Map(ctx, cfg.Map.Shards, cfg.Map.DBPrefix)
	if err != nil {
		c.Close()
		err = fmt.Errorf("PINSTORE_TOPOLOGY: %w", err)
		if model.IsCode(err, model.EInvalid) || model.IsCode(err, model.ENotFound) {
			return nil, &invalidMapError{rev: rev, err: err}
		}
		return nil, err
	}
	cfg.Map = m
	return &etcdTopo{c: c, rev: rev}, nil
}

func (t *etcdTopo) close() {
	if t != nil {
		t.c.Close()
	}
}

// servers lists the registered servers as the model shows them.
func (t *etcdTopo) servers(ctx context.Context) ([]fleet.ServerInfo, error) {
	regs, _, err := t.c.Servers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]fleet.ServerInfo, len(regs))
	for i, r := range regs {
		out[i] = fleet.ServerInfo{ID: r.ID, Addr: r.Addr, Version: r.Version, MapRevision: r.MapRev, Drained: r.Drained, Started: r.Started, Updated: r.Updated}
	}
	return out, nil
}

// topologySource is what the store reports about the topology (it
// satisfies store.TopologySource): a server's follower, or for operator
// commands nil (healthy: they read the map once).
type topologySource struct {
	t     *etcdTopo
	f     *etcdtopo.Follower
	cache serversCache
}

var _ store.TopologySource = (*topologySource)(nil)

func (s *topologySource) String() string { return s.t.c.URL().String() }

func (s *topologySource) Health() (bool, string) {
	if s.f == nil {
		return true, ""
	}
	return s.f.Health()
}

func (s *topologySource) Revision() int64 {
	if s.f == nil {
		return s.t.rev
	}
	return s.f.Registration().MapRev
}

// Servers lists the registered servers. An operator command asks etcd.
// A server answers from what it has (serversCache): the admin route must
// not wait on an etcd that does not answer.
func (s *topologySource) Servers(ctx context.Context) ([]fleet.ServerInfo, error) {
	if s.f == nil {
		return s.t.servers(ctx)
	}
	return s.cache.get(ctx, s.t)
}

// Timing of a server's list of the registered servers.
const (
	serversWait  = 300 * time.Millisecond // the longest a request waits for etcd's list
	serversRetry = 2 * time.Second        // after a failed read, etcd is not asked again for this long
)

// serversCache is the list of registered servers a server last read from
// etcd. A request waits at most serversWait for a fresh read; after a read
// failed, requests get the list it has at once (with why it is old) until
// serversRetry has passed; one read runs at a time, outliving the request
// that started it.
type serversCache struct {
	mu      sync.Mutex
	list    []fleet.ServerInfo
	at      time.Time     // when list was read; zero: never
	failed  time.Time     // when the last read failed
	err     error         // why
	reading chan struct{} // closed when the read in flight ends; nil when none
	started time.Time     // when it started
}

func (c *serversCache) get(ctx context.Context, t *etcdTopo) ([]fleet.ServerInfo, error) {
	c.mu.Lock()
	if c.reading == nil && time.Since(c.failed) >= serversRetry {
		done := make(chan struct{})
		c.reading, c.started = done, time.Now()
		go func() {
			rctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			list, err := t.servers(rctx)
			c.mu.Lock()
			if err != nil {
				c.failed, c.err = time.Now(), err
			} else {
				c.list, c.at, c.failed, c.err = list, time.Now(), time.Time{}, nil
			}
			c.reading = nil
			c.mu.Unlock()
			close(done)
		}()
	}
	reading, left := c.reading, serversWait-time.Since(c.started)
	c.mu.Unlock()
	if reading != nil && left > 0 { // a read that has taken serversWait already is not waited for
		wait := time.NewTimer(left)
		select {
		case <-reading:
		case <-wait.C:
		case <-ctx.Done():
		}
		wait.Stop()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reading == nil && c.err == nil && !c.at.IsZero() {
		return c.list, nil
	}
	why := "etcd did not answer within " + serversWait.String()
	if c.err != nil && c.reading == nil {
		why = model.ErrorMessage(c.err)
	}
	if c.at.IsZero() {
		return nil, model.Errorf(model.EUnavailable, "%s; no list of the servers read yet", why)
	}
	return c.list, model.Errorf(model.EUnavailable, "%s; the servers as registered at %s", why, c.at.UTC().Format(time.RFC3339))
}

// etcdHome is the etcd topology as reshard.Home.
type etcdHome struct{ etcdtopo.Home }

func (h etcdHome) LockMoves(ctx context.Context) (reshard.MoveLock, error) {
	return h.Home.LockMoves(ctx)
}

var _ reshard.Home = etcdHome{}

const topologyUsage = "usage: pinstore topology push FILE [--revision N] [--init] | pull [--out FILE]"

// runTopology is `pinstore topology push FILE` and `pinstore topology
// pull`: the shard map into and out of etcd (PINSTORE_TOPOLOGY).
func runTopology(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if helpAsked(args) {
		fmt.Fprintln(stdout, topologyUsage)
		return nil
	}
	if len(args) == 0 {
		return errors.New(topologyUsage)
	}
	switch args[0] {
	case "push":
		return runTopologyPush(ctx, args[1:], getenv, stdout, stderr)
	case "pull":
		return runTopologyPull(ctx, args[1:], getenv, stdout, stderr)
	}
	return fmt.Errorf("unknown topology command %q; %s", args[0], topologyUsage)
}

// dialTopology connects to PINSTORE_TOPOLOGY, which must be set.
func dialTopology(ctx context.Context, getenv func(string) string) (*etcdtopo.Client, error) {
	raw := getenv("PINSTORE_TOPOLOGY")
	if raw == "" {
		return nil, errors.New("PINSTORE_TOPOLOGY is not set: it names the etcd topology, e.g. etcd://10.0.0.5:2379,10.0.0.6:2379/pinstore")
	}
	u, err := etcdtopo.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("PINSTORE_TOPOLOGY: %w", err)
	}
	return etcdtopo.Dial(ctx, u)
}

// pulledRE finds the revision a pulled map was read at.
var pulledRE = regexp.MustCompile(`(?m)^# pinstore topology: revision (\d+) of `)

func runTopologyPush(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("topology push", "topology push FILE [--revision N]\n\nvalidates the shard map FILE as a map file is validated and writes it to etcd (PINSTORE_TOPOLOGY)\nas a compare-and-swap: on the revision a pulled FILE names, else --revision, else the revision read now", stderr)
	revFlag := fs.Int64("revision", -1, "write only if the map in etcd is still at this revision (0: only if there is none yet)")
	initOnly := fs.Bool("init", false, "write the map only if etcd holds none yet; otherwise leave it and succeed (bootstrapping a fleet)")
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' { // FILE first, flags after
		args = append(args[1:], args[0])
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("topology push: one FILE, please")
	}
	path := fs.Arg(0)
	cfg, err := storeConfig(func(k string) string {
		if k == "PINSTORE_TOPOLOGY" || k == "PINSTORE_SHARD_MAP" {
			return ""
		}
		return getenv(k)
	})
	if err != nil {
		return fmt.Errorf("topology push: %w", err)
	}
	m, err := shardmap.Load(path, cfg.Map.Shards, cfg.Map.DBPrefix)
	if err != nil {
		return fmt.Errorf("topology push: %w", err)
	}
	c, err := dialTopology(ctx, getenv)
	if err != nil {
		return fmt.Errorf("topology push: %w", err)
	}
	defer c.Close()
	data, cur, err := c.RawMap(ctx)
	if err != nil {
		return fmt.Errorf("topology push: %w", err)
	}
	if *initOnly && cur != 0 {
		fmt.Fprintf(stdout, "topology push: %s already holds a map (revision %d); left as it is\n", c.URL(), cur)
		return nil
	}
	rev := cur
	raw, _ := os.ReadFile(path)
	switch sm := pulledRE.FindSubmatch(raw); {
	case *revFlag >= 0:
		rev = *revFlag
	case sm != nil:
		rev, _ = strconv.ParseInt(string(sm[1]), 10, 64)
	}
	if cur != 0 {
		// Servers refuse a map that changes the shard count or prefix.
		if old, err := shardmap.Parse(data, m.Shards, m.DBPrefix); err == nil && (old.Shards != m.Shards || old.DBPrefix != m.DBPrefix) {
			return fmt.Errorf("topology push: the map in etcd has %d shards with prefix %q; running servers cannot change to %d %q (nothing written)", old.Shards, old.DBPrefix, m.Shards, m.DBPrefix)
		}
	}
	newRev, err := c.PutMap(ctx, m, rev, "pushed from "+path+" by pinstore topology push")
	if err != nil {
		return fmt.Errorf("topology push: %w", err)
	}
	fmt.Fprintf(stdout, "topology push: map version %s written to %s at revision %d (%s)\n", m.Version(), c.URL(), newRev, m.Summary())
	return nil
}

func runTopologyPull(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("topology pull", "topology pull [--out FILE]\n\nprints the shard map in etcd (PINSTORE_TOPOLOGY), with the revision it was read at;\npush it back after an edit and the push fails if the map changed meanwhile", stderr)
	out := fs.String("out", "", "write the map to FILE instead of standard output")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("topology pull: unexpected arguments %q", fs.Args())
	}
	c, err := dialTopology(ctx, getenv)
	if err != nil {
		return fmt.Errorf("topology pull: %w", err)
	}
	defer c.Close()
	data, rev, err := c.RawMap(ctx)
	if err != nil {
		return fmt.Errorf("topology pull: %w", err)
	}
	if rev == 0 {
		return fmt.Errorf("topology pull: no shard map at %s in %s: push one with pinstore topology push FILE", c.MapKey(), c.URL())
	}
	body := append([]byte(fmt.Sprintf("# pinstore topology: revision %d of %s\n", rev, c.MapKey())), data...)
	if *out == "" {
		_, err = stdout.Write(body)
		return err
	}
	if err := os.WriteFile(*out, body, 0o600); err != nil {
		return fmt.Errorf("topology pull: %w", err)
	}
	fmt.Fprintf(stdout, "topology pull: revision %d written to %s\n", rev, *out)
	return nil
}
