// Package topology is the shard map in force with one connection pool
// per physical MySQL host: the step shard → host → pool of a request's
// route, as in
//
//	id ──idcodec──▶ shard ──Topology.Shard──▶ (host pool, database dbNNNNN)
//
// A Topology is one immutable version of the map with its pools; a Router
// holds the version in force and replaces it when the map changes (Reload,
// ReloadFile, Watch), so a call that loaded a Topology finishes on it
// while later calls route by the new one. Pools are shared across
// versions: a host that stays keeps its connections, and there is one
// pool per host (per master DSN), never per database; a host's replicas
// have pools of their own, which only reads use (package replicas picks).
// Each pool carries its read queues (Pool: reads by id, pointread; edge
// checks, edgeread), made with it and kept as long as it is, so the reads
// that coalesce on a host are exactly those sent to its connections.
// A host that is down fails only the statements sent to it, and
// reconnects when it is back.
package topology

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/edgeread"
	"github.com/pinstore/pinstore/store/pointread"
	"github.com/pinstore/pinstore/store/shardmap"
	"github.com/pinstore/pinstore/store/shardsql"
)

// Config is what a Router needs besides the map.
type Config struct {
	MapFile  string           // where the map came from, for ReloadFile and Watch; "" when built from the environment
	PoolSize int              // max open connections per host; default 64
	Reads    pointread.Config // every pool's queue of reads by id
	Edges    edgeread.Config  // every pool's queue of edge checks
	Logger   *slog.Logger
	// ReplicaReads turns replica reads on for every host with replicas
	// (PINSTORE_REPLICA_READS), besides the hosts whose map entry says
	// replica_reads.
	ReplicaReads bool
	// RoundTrips records every pool's round trips by host and role
	// (shardsql.RoundTrips); nil: none are recorded.
	RoundTrips *shardsql.RoundTrips
}

// Pool is one MySQL server's connections with the queues that coalesce
// the reads sent to them: a master's or a replica's.
type Pool struct {
	DB    *sqlx.DB
	Reads *pointread.Queue // reads by id
	Edges *edgeread.Queue  // edge checks
	// Meter records the round trips of DB's connections, as the host and
	// role the map in force gives the pool (named when it is put in force).
	Meter *shardsql.Meter
}

// Host is one physical MySQL host of the map in force: its master, and
// the replicas the map names.
type Host struct {
	Name string
	Addr string // the master's address, no credentials: for errors and logs
	Pool        // the master's

	// Replicas replicate from the master, in map order. Reads use them
	// only when ReplicaReads is set, and then only as package replicas
	// allows (lag, consistency tokens); writes never do.
	Replicas     []*Replica
	ReplicaReads bool
}

// Replica is a replica of a host, with its own pool.
type Replica struct {
	Addr string // no credentials
	Pool
}

// Shard is a validated route: a shard database and the host holding it.
type Shard struct {
	shardsql.DB
	Host     *Host
	ReadOnly bool // its range is being moved: writes are refused
}

// Writable returns EMoving when the shard's range is read-only.
func (sh Shard) Writable(op string) error {
	if sh.ReadOnly {
		return &model.Error{Code: model.EMoving, Op: op, Message: fmt.Sprintf("shard %d is being moved; retry shortly", sh.N)}
	}
	return nil
}

// Topology is one immutable version of the shard map with its pools.
type Topology struct {
	m      *shardmap.Map
	shards []Shard // index = shard number
	hosts  []*Host // distinct, in range order: the hosts requests go to
	all    []*Host // every host of the map, by name, those holding no range too
	open   []int   // shards open for new users and writable
	loaded time.Time

	inflight atomic.Int64 // writes pinned to this version (Router.Enter)
}

// Map is the shard map of this version.
func (t *Topology) Map() *shardmap.Map { return t.m }

// Loaded is when this version was put in force.
func (t *Topology) Loaded() time.Time { return t.loaded }

// Hosts lists the map's hosts that hold a range, in range order.
func (t *Topology) Hosts() []*Host { return t.hosts }

// AllHosts lists every host of the map by name, those that hold no range
// (emptied by a move, or waiting for one) too: what an operator checks.
func (t *Topology) AllHosts() []*Host { return t.all }

// Len is the shard count.
func (t *Topology) Len() int { return len(t.shards) }

// Shard returns shard n's route; a shard outside the map is EInvalid.
func (t *Topology) Shard(n int) (Shard, error) {
	if n < 0 || n >= len(t.shards) {
		return Shard{}, model.Errorf(model.EInvalid, "shard %d is outside the configured 0-%d", n, len(t.shards)-1)
	}
	return t.shards[n], nil
}

// Route checks id by model.CheckID (want: the type the caller needs) and
// returns its shard's route and the id's local part. A malformed id, an
// unknown type or a shard outside the map is EInvalid; another type or
// local id 0 is ENotFound.
func (t *Topology) Route(id uint64, want idcodec.Type) (Shard, uint64, error) {
	p, err := model.CheckID("id", id, want)
	if err != nil {
		return Shard{}, 0, err
	}
	sh, err := t.Shard(int(p.Shard))
	return sh, p.Local, err
}

// RandomOpen is a random shard of the ranges open for new users and
// writable (of the open ones when every one is read-only): where a new
// user goes.
func (t *Topology) RandomOpen() Shard { return t.shards[t.open[rand.IntN(len(t.open))]] }

// OpenShard is the shard of the open ranges that h picks (h modulo their
// number): where a new user with an idempotency key goes, so a retry of
// its create finds the key while the open ranges stay the same.
func (t *Topology) OpenShard(h uint64) Shard { return t.shards[t.open[h%uint64(len(t.open))]] }

// ShardsOf lists the shards on h, in order.
func (t *Topology) ShardsOf(h *Host) []int {
	var out []int
	for n, sh := range t.shards {
		if sh.Host == h {
			out = append(out, n)
		}
	}
	return out
}

// Router holds the topology in force. It is safe for concurrent use.
type Router struct {
	cfg Config
	cur atomic.Pointer[Topology]

	mu      sync.Mutex
	pools   map[string]Pool // by DSN, shared across versions
	changed chan struct{}   // closed when the next topology is put in force
	retired []*Topology     // replaced versions that may still have writes pinned

	drained chan struct{} // a retired version's last pinned write ended
	buffer  BufferStats
	// masterChanges counts hosts whose master changed when a map was put
	// in force (a failover, as this server saw it).
	masterChanges atomic.Int64

	// The topology lease (lease.go), under mu.
	leaseOn    bool      // SetLease was called: writes need the lease
	leaseUntil time.Time // writes may be acknowledged until then
	lapseEnd   time.Time // the last renewal that ended a lapse
}

// New builds the topology of m (already validated) and puts it in force.
// It connects lazily: a host that is down fails only what is routed to it.
func New(m *shardmap.Map, cfg Config) (*Router, error) {
	if cfg.PoolSize <= 0 {
		cfg.PoolSize = 64
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Router{cfg: cfg, pools: map[string]Pool{},
		changed: make(chan struct{}), drained: make(chan struct{}, 1)}
	t, err := r.build(m)
	if err != nil {
		r.Close()
		return nil, err
	}
	r.install(t)
	return r, nil
}

// Current is the topology in force. Load it once per operation, so that
// the operation's statements all route by one version of the map.
func (r *Router) Current() *Topology { return r.cur.Load() }

// Map is the shard map in force.
func (r *Router) Map() *shardmap.Map { return r.Current().m }

// MapFile is the file the map came from ("" when none).
func (r *Router) MapFile() string { return r.cfg.MapFile }

// Reload puts m (already validated) in force. Pools of hosts that stay are
// kept; calls in flight finish on the old map. The shard count and prefix
// cannot change while running.
func (r *Router) Reload(m *shardmap.Map) error {
	old := r.Current().m
	if m.Shards != old.Shards || m.DBPrefix != old.DBPrefix {
		return fmt.Errorf("topology.Reload: shards and db_prefix cannot change while running (%d %q → %d %q)",
			old.Shards, old.DBPrefix, m.Shards, m.DBPrefix)
	}
	t, err := r.build(m)
	if err != nil {
		return err
	}
	r.install(t)
	return nil
}

// MasterChanges is how many times a map put in force named another
// master for a host of the map it replaced (a failover), since start.
func (r *Router) MasterChanges() int64 { return r.masterChanges.Load() }

// countMasterChanges adds to masterChanges the hosts of both old and t
// whose master differs.
func (r *Router) countMasterChanges(old, t *Topology) {
	if old == nil || t == nil {
		return
	}
	was := map[string]string{}
	for _, h := range old.Hosts() {
		was[h.Name] = h.Addr
	}
	for _, h := range t.Hosts() {
		if a, ok := was[h.Name]; ok && a != h.Addr {
			r.masterChanges.Add(1)
		}
	}
}

// Close closes every pool.
func (r *Router) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for dsn, p := range r.pools {
		errs = append(errs, p.DB.Close())
		delete(r.pools, dsn)
	}
	return errors.Join(errs...)
}

func (r *Router) build(m *shardmap.Map) (*Topology, error) {
	t := &Topology{m: m, shards: make([]Shard, m.Shards), loaded: time.Now().UTC()}
	byName := map[string]*Host{}
	for name, spec := range m.Hosts {
		p, err := r.pool(spec.Master)
		if err != nil {
			return nil, fmt.Errorf("topology: host %q: %w", name, err)
		}
		h := &Host{Name: name, Addr: shardmap.HostAddr(spec.Master), Pool: p}
		for _, dsn := range spec.ReplicaDSNs() {
			p, err := r.pool(dsn)
			if err != nil {
				return nil, fmt.Errorf("topology: host %q replica: %w", name, err)
			}
			h.Replicas = append(h.Replicas, &Replica{Addr: shardmap.HostAddr(dsn), Pool: p})
		}
		h.ReplicaReads = len(h.Replicas) > 0 && (spec.ReplicaReads || r.cfg.ReplicaReads)
		byName[name] = h
	}
	var held []int // open but read-only: new users go there only when nothing else is open
	for _, rg := range m.Ranges {
		h := byName[rg.Host]
		for n := rg.First; n <= rg.Last; n++ {
			t.shards[n] = Shard{DB: shardsql.DB{N: n, Name: m.DBName(n)}, Host: h, ReadOnly: rg.ReadOnly}
			switch {
			case rg.IsOpen() && !rg.ReadOnly:
				t.open = append(t.open, n)
			case rg.IsOpen():
				held = append(held, n)
			}
		}
		if !containsHost(t.hosts, h) {
			t.hosts = append(t.hosts, h)
		}
	}
	for _, h := range byName {
		t.all = append(t.all, h)
	}
	slices.SortFunc(t.all, func(a, b *Host) int { return strings.Compare(a.Name, b.Name) })
	if len(t.open) == 0 {
		// Every open range is held (a failover of the only host): a new
		// user's create waits in the write buffer like any write there.
		t.open = held
	}
	if len(t.open) == 0 { // shardmap.Validate refuses such a map; a map built by hand may not be validated
		return nil, errors.New("topology: no range is open for new users")
	}
	return t, nil
}

func containsHost(hs []*Host, h *Host) bool {
	for _, x := range hs {
		if x == h {
			return true
		}
	}
	return false
}

// nameMeters makes every pool of t record its round trips as the host
// and role t gives it, and the pools t does not name record nothing. The
// caller holds r.mu.
func (r *Router) nameMeters(t *Topology) {
	named := map[*shardsql.Meter]bool{}
	for _, h := range t.all {
		r.cfg.RoundTrips.Name(h.Meter, h.Name, shardsql.RoleMaster)
		named[h.Meter] = true
		for _, rp := range h.Replicas {
			r.cfg.RoundTrips.Name(rp.Meter, h.Name, shardsql.RoleReplica)
			named[rp.Meter] = true
		}
	}
	for _, p := range r.pools {
		if !named[p.Meter] {
			p.Meter.Forget()
		}
	}
}

// pool returns the shared pool for dsn with its read queues, opening
// them the first time.
func (r *Router) pool(dsn string) (Pool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.pools[dsn]; ok {
		return p, nil
	}
	m := &shardsql.Meter{}
	db, err := DialMetered(dsn, r.cfg.PoolSize, m)
	if err != nil {
		return Pool{}, err
	}
	p := Pool{DB: db, Reads: pointread.NewQueue(db, r.cfg.Reads), Edges: edgeread.NewQueue(db, r.cfg.Edges), Meter: m}
	r.pools[dsn] = p
	return p, nil
}
