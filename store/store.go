// Package store keeps pinstore's objects and mappings in sharded MySQL,
// with the pin → owner cache in Redis.
//
// Invariants:
//   - Shard N is the database <prefix>N (%05d); every shard holds the same
//     tables (see package migrations). Database and table names are built
//     only from a validated shard integer and fixed table names.
//   - Routing is two pure steps: ID → shard (idcodec), shard → host (the
//     shard map). There is one connection pool per physical host.
//   - Placement: a user on a random shard of an open range; a board on its
//     owner's shard; a pin on its board's shard; a comment on its pin's
//     shard. So creating any object and its own-list entries is one
//     transaction on one shard.
//   - A mapping row lives on its from-shard. A pair with an inverse is
//     written forward side first (user_following, user_likes), inverse
//     second, both on add and on remove; Repair restores inverses to match
//     the forward side.
//   - Every error leaving the package is a *model.Error; driver errors are
//     classified by number, never by message text.
package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
	"github.com/pinstore/pinstore/store/topology"
)

// Config is everything Open needs.
type Config struct {
	Map            *shardmap.Map // required
	MapFile        string        // where Map came from, for Reload; "" when built from env
	CursorSecret   []byte        // signs list cursors; random when empty (cursors then die with the process)
	Limits         model.Limits  // document limits
	MaxDocBytes    int           // stored document limit; default 16 KiB
	PoolSize       int           // max open connections per host; default 64
	PointReadLanes int           // Get statements out to a host at once before reads are batched (pointread.go); default 2
	QueryTimeout   time.Duration // per-statement deadline when the caller set none; default 5s
	FeedBackfill   int           // a followee's newest pins a follow copies into the feed; default 1000
	FeedSweep      time.Duration // redo fan-out left in feed_outbox: at Open, then this often; 0 = never (tools)
	Redis          RedisConfig
	Logger         *slog.Logger
	Registerer     prometheus.Registerer
}

// RedisConfig names the Redis (or Redis Cluster) holding the owner cache.
type RedisConfig struct {
	Addrs    []string // one address: a single Redis; several, or Cluster: a cluster
	Cluster  bool
	Password string
	Prefix   string        // key prefix; default "pinstore:o:"
	Timeout  time.Duration // per call; default 200ms
	Disabled bool          // run without a cache (every look-up from MySQL)
}

// ConfigFromEnv builds a Config from PINSTORE_* variables:
// PINSTORE_SHARD_MAP (file), PINSTORE_MYSQL_DSN, PINSTORE_SHARDS,
// PINSTORE_DB_PREFIX, PINSTORE_CURSOR_SECRET, PINSTORE_MAX_DOC_BYTES,
// PINSTORE_MAX_DATA_BYTES, PINSTORE_POOL_SIZE, PINSTORE_POINT_READ_LANES,
// PINSTORE_REDIS_ADDRS,
// PINSTORE_REDIS_CLUSTER, PINSTORE_REDIS_PASSWORD, PINSTORE_REDIS_PREFIX,
// PINSTORE_REDIS_DISABLED.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var cfg Config
	shards, prefix := shardmap.DefaultShards, shardmap.DefaultDBPrefix
	if v := getenv("PINSTORE_SHARDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return cfg, fmt.Errorf("PINSTORE_SHARDS: %q is not a number", v)
		}
		shards = n
	}
	if v := getenv("PINSTORE_DB_PREFIX"); v != "" {
		prefix = v
	}
	var err error
	if cfg.MapFile = getenv("PINSTORE_SHARD_MAP"); cfg.MapFile != "" {
		cfg.Map, err = shardmap.Load(cfg.MapFile, shards, prefix)
	} else {
		dsn := getenv("PINSTORE_MYSQL_DSN")
		if dsn == "" {
			dsn = shardmap.DefaultDSN
		}
		cfg.Map, err = shardmap.SingleHost(dsn, shards, prefix)
	}
	if err != nil {
		return cfg, err
	}
	cfg.CursorSecret = []byte(getenv("PINSTORE_CURSOR_SECRET"))
	for name, dst := range map[string]*int{
		"PINSTORE_MAX_DOC_BYTES":    &cfg.MaxDocBytes,
		"PINSTORE_MAX_DATA_BYTES":   &cfg.Limits.MaxDataBytes,
		"PINSTORE_POOL_SIZE":        &cfg.PoolSize,
		"PINSTORE_POINT_READ_LANES": &cfg.PointReadLanes,
	} {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return cfg, fmt.Errorf("%s: %q is not a positive number", name, v)
			}
			*dst = n
		}
	}
	addrs := getenv("PINSTORE_REDIS_ADDRS")
	if addrs == "" {
		addrs = "127.0.0.1:6379"
	}
	cfg.Redis.Addrs = strings.Split(addrs, ",")
	cfg.Redis.Cluster = getenv("PINSTORE_REDIS_CLUSTER") == "true"
	cfg.Redis.Password = getenv("PINSTORE_REDIS_PASSWORD")
	cfg.Redis.Prefix = getenv("PINSTORE_REDIS_PREFIX")
	cfg.Redis.Disabled = getenv("PINSTORE_REDIS_DISABLED") == "true"
	return cfg, nil
}

// Store is the sharded object and mapping store. It is safe for concurrent
// use; the shard map it routes by can be replaced while it runs (Reload).
type Store struct {
	cfg    Config
	log    *slog.Logger
	topo   atomic.Pointer[layout]
	cursor cursorCodec
	owners ownerCache
	feed   *fanout

	readStats pointReadStats

	mu    sync.Mutex
	pools map[string]*sqlx.DB // by master or replica DSN, shared across map versions
}

// host is one physical MySQL host as a topology knows it.
type host struct {
	name string
	addr string // no credentials; for errors and logs
	db   *sqlx.DB

	reads *pointReads // Get's queue (pointread.go)
}

// topology is one immutable version of the shard map with its pools.
type layout struct {
	m      *shardmap.Map
	shards []*host  // index = shard
	ro     []bool   // index = shard: writes refused (range being moved)
	hosts  []*host  // distinct, sorted by name
	names  []string // index = shard: database name
	open   []int    // shards open for new users
	loaded time.Time
}

// Open connects to every host of cfg.Map (lazily: a host that is down fails
// only the calls routed to it) and to Redis.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Map == nil {
		return nil, errors.New("store.Open: no shard map")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxDocBytes <= 0 {
		cfg.MaxDocBytes = 16 << 10
	}
	if cfg.PoolSize <= 0 {
		cfg.PoolSize = 64
	}
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = 5 * time.Second
	}
	if cfg.FeedBackfill <= 0 {
		cfg.FeedBackfill = defaultFeedBackfill
	}
	if len(cfg.CursorSecret) == 0 {
		cfg.CursorSecret = make([]byte, 32)
		_, _ = rand.Read(cfg.CursorSecret)
		cfg.Logger.Warn("PINSTORE_CURSOR_SECRET is not set: list cursors are signed with a random key and stop working when this process restarts")
	}
	s := &Store{cfg: cfg, log: cfg.Logger, pools: map[string]*sqlx.DB{}, cursor: cursorCodec{key: cfg.CursorSecret}, readStats: newPointReadStats(cfg.Registerer)}
	t, err := s.build(cfg.Map)
	if err != nil {
		return nil, err
	}
	s.topo.Store(t)
	s.startFanout()
	if err := s.openCache(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close finishes the queued feed fan-out (giving it one last try), then
// closes every pool and the Redis client.
func (s *Store) Close() error {
	if s.feed != nil {
		s.feed.stop()
		<-s.feed.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for dsn, db := range s.pools {
		errs = append(errs, db.Close())
		delete(s.pools, dsn)
	}
	errs = append(errs, s.owners.close())
	return errors.Join(errs...)
}

// Map returns the shard map in force.
func (s *Store) Map() *shardmap.Map { return s.topo.Load().m }

// Reload replaces the shard map in force with m (already validated). Pools
// of hosts that stay are kept; calls in flight finish on the old map.
// The shard count and prefix cannot change while running.
func (s *Store) Reload(m *shardmap.Map) error {
	old := s.topo.Load().m
	if m.Shards != old.Shards || m.DBPrefix != old.DBPrefix {
		return fmt.Errorf("store.Reload: shards and db_prefix cannot change while running (%d %q → %d %q)",
			old.Shards, old.DBPrefix, m.Shards, m.DBPrefix)
	}
	t, err := s.build(m)
	if err != nil {
		return err
	}
	s.topo.Store(t)
	return nil
}

func (s *Store) build(m *shardmap.Map) (*layout, error) {
	t := &layout{m: m, shards: make([]*host, m.Shards), ro: make([]bool, m.Shards), names: make([]string, m.Shards), loaded: time.Now().UTC()}
	byName := map[string]*host{}
	for name, spec := range m.Hosts {
		db, err := s.pool(spec.Master)
		if err != nil {
			return nil, fmt.Errorf("store: host %q: %w", name, err)
		}
		h := &host{name: name, addr: shardmap.HostAddr(spec.Master), db: db, reads: newPointReads(s.cfg.PointReadLanes)}
		byName[name] = h
	}
	for _, r := range m.Ranges {
		h := byName[r.Host]
		for sh := r.First; sh <= r.Last; sh++ {
			t.shards[sh] = h
			t.ro[sh] = r.ReadOnly
			if r.IsOpen() && !r.ReadOnly {
				t.open = append(t.open, sh)
			}
		}
	}
	for sh := range t.names {
		t.names[sh] = m.DBName(sh)
	}
	for _, r := range m.Ranges {
		h := byName[r.Host]
		if !containsHost(t.hosts, h) {
			t.hosts = append(t.hosts, h)
		}
	}
	if len(t.open) == 0 {
		return nil, errors.New("store: no writable range is open for new users")
	}
	return t, nil
}

func containsHost(hs []*host, h *host) bool {
	for _, x := range hs {
		if x == h {
			return true
		}
	}
	return false
}

// pool returns the shared pool for dsn (topology.Dial).
func (s *Store) pool(dsn string) (*sqlx.DB, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if db, ok := s.pools[dsn]; ok {
		return db, nil
	}
	db, err := topology.Dial(dsn, s.cfg.PoolSize)
	if err != nil {
		return nil, err
	}
	s.pools[dsn] = db
	return db, nil
}

// shard is a validated route: a shard number, its database and its host.
type shard struct {
	n    int
	db   string
	host *host
	ro   bool
}

// route validates that sh is a configured shard and returns its route.
func (t *layout) route(sh int) (shard, error) {
	if sh < 0 || sh >= len(t.shards) {
		return shard{}, model.Errorf(model.EInvalid, "shard %d is outside the configured 0-%d", sh, len(t.shards)-1)
	}
	return shard{n: sh, db: t.names[sh], host: t.shards[sh], ro: t.ro[sh]}, nil
}

// writable returns EMoving when the shard's range is read-only.
func (sh shard) writable(op string) error {
	if sh.ro {
		return &model.Error{Code: model.EMoving, Op: op, Message: fmt.Sprintf("shard %d is being moved; retry shortly", sh.n)}
	}
	return nil
}

// classify turns a driver error into a *model.Error by error number or
// type, naming the host (never its DSN).
func classify(op string, h *host, err error) error {
	if err == nil {
		return nil
	}
	var me *model.Error
	if errors.As(err, &me) {
		if me.Op == "" {
			me.Op = op
		}
		return me
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case 1062: // ER_DUP_ENTRY
			return model.Wrap(op, model.EConflict, "already exists", err)
		case 1049, 1146: // ER_BAD_DB_ERROR, ER_NO_SUCH_TABLE
			return model.Wrap(op, model.EUnavailable, fmt.Sprintf("a shard on mysql host %q is not provisioned (run pinstore migrate)", h.name), err)
		case 1366, 3140, 4025: // incorrect string value, invalid JSON (MySQL 8), CHECK (JSON_VALID) failed
			// The api refuses such bodies first; this keeps anything it
			// misses a client error rather than a 500.
			return model.Wrap(op, model.EInvalid, "the database refused the document (invalid text or JSON it cannot store)", err)
		case 1205, 1213: // lock wait timeout, deadlock
			return model.Wrap(op, model.EUnavailable, "the write conflicted with another; retry", err)
		case 1040, 1203, 1226, 1290, 1836, 2002, 2003, 2006, 2013: // too many connections, read-only, …
			return model.Wrap(op, model.EUnavailable, fmt.Sprintf("mysql host %q is unavailable", h.name), err)
		}
		return model.Wrap(op, model.EInternal, "", err)
	}
	if errors.Is(err, context.Canceled) {
		return model.Wrap(op, model.EUnavailable, "the request was cancelled", err)
	}
	if errors.Is(err, context.DeadlineExceeded) && h != nil {
		return model.Wrap(op, model.EUnavailable, fmt.Sprintf("mysql host %q did not answer in time", h.name), err)
	}
	// Everything else from the driver is a connection failure: refused,
	// reset, timed out, bad connection.
	name := "?"
	if h != nil {
		name = h.name
	}
	return model.Wrap(op, model.EUnavailable, fmt.Sprintf("mysql host %q is unavailable", name), err)
}
