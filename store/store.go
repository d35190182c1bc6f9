// Package store is what the HTTP layer calls: pinstore's objects and
// mappings in sharded MySQL, with the pin → owner cache in Redis. Each
// method routes its IDs, owns its transaction, runs the statements of
// package shardsql and turns driver errors into *model.Error.
//
// Store, what Open returns, is the sum of small parts, each a type with
// one job, all on one shared core (core.go: the caches and the reads by id
// through them, cache.go), which embeds the shards (the configuration, the
// router and its pools, and the helpers that route an id, bound a call and
// run a transaction: route.go, replicas.go). The generic parts
// follow the declarations of package model; a type's product rules hang
// on them by name, in tables keyed by the type (createRules, updateRules,
// deleteRules), never in a switch on the type; and they sit on them as
// parts of their own:
//
//	Objects    create (as each type declares), get, update, delete any object; pin owners (create.go, objects.go, delete.go, owners.go)
//	Lists      pages, counts, membership, moves; two-sided pairs (lists.go, edgecache.go, pairs.go)
//	Feeds      the hybrid home feed on top of follows and pins (feed.go, feedpull.go)
//	Usernames  users with unique names: create, look-up, index repair (usernames.go)
//	Saves      repins: a pin made by Objects, a pair kept by Lists (saves.go)
//	Sections   a board's sections and a pin's place in one (sections.go)
//	Keys       idempotency keys every create runs under (idempotency.go)
//	Repairs    what dead servers left: the mark sweep, the pair check (heal.go, repair.go)
//	Ops        the map in force, hosts, readiness, migrations (ops.go, migrate.go)
//
// A part that builds on another names it in a field (newStore wires them
// once), so which rule rides on which is read from the types.
//
// A request reads as its path through the packages below this one:
//
//	idcodec     ID → shard, type, local id
//	shardmap    the map file: shard → range → host (pure)
//	topology    the map in force: shard → host pool (with its read queues) and database dbNNNNN
//	shardsql    the statements of one shard database
//	pointread   reads by id coalesced per pool
//	edgeread    edge checks (HasMany) coalesced per pool
//	lanes       the lanes and queue, and their tuning, both of those share
//	replicas    replica lag, the pool a read uses, consistency tokens
//	fanout      the feed fan-out workers and the outbox sweep
//	ownercache  the Redis pin → owner hashes
//	reshard     moving shard ranges between hosts (never imports store)
//
// Invariants:
//   - Placement: a user on a random shard of an open range; a board on its
//     owner's shard; a pin on its board's shard; a comment on its pin's
//     shard. So creating any object and its own-list entries is one
//     transaction on one shard.
//   - A mapping row lives on its from-shard. A pair with an inverse is
//     written forward side first (user_following, user_likes), inverse
//     second, both on add and on remove; Repair restores inverses to match
//     the forward side.
//   - Deletes are soft (active: false); every read skips objects that are
//     not live, so a crash between a delete and its list removals never
//     shows a deleted object.
//   - The home feed is hybrid (feedpull.go): an author below
//     Config.FeedPullThreshold followers when they pin is fanned out into
//     user_feed; at or above, their pins are merged into each follower's
//     page at read time (feed_pulled lists, on the follower's shard, the
//     pulled authors they follow). A page is exact either way: newest
//     first by (sequence, pin id), each pin once.
//   - Every error leaving the package is a *model.Error; driver errors are
//     classified by number, never by message text (shardsql.Classify).
package store

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/internal/metrics"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/edgeread"
	"github.com/pinstore/pinstore/store/fanout"
	"github.com/pinstore/pinstore/store/pointread"
	"github.com/pinstore/pinstore/store/replicas"
	"github.com/pinstore/pinstore/store/shardmap"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// Config is everything Open needs. The zero value of each field but Map
// is a usable default.
type Config struct {
	Map            *shardmap.Map  // required
	MapFile        string         // where Map came from, for reloads; "" when built from the environment
	Source         TopologySource // where Map came from when it is not a file (etcd); nil otherwise
	CursorSecret   []byte         // signs list cursors; random when empty (cursors then die with the process)
	Limits         model.Limits   // document limits
	MaxDocBytes    int            // stored document limit; default 16 KiB
	PoolSize       int            // max open connections per host; default 64
	PointReadLanes int            // reads by id, and edge checks, out to a host at once before they are batched (pointread, edgeread); default 2
	QueryTimeout   time.Duration  // per-statement deadline when the caller set none; default 5s
	// Pace is called by the work that walks every shard (Migrate, Repair,
	// RepairFeeds) before each step on a host (a shard's migration, a batch
	// of rows), with the host's name in the map, and holds the step back
	// while it runs; an error ends the work. nil: never held back. The
	// commands set it from package cluster/throttle (busy hosts).
	Pace         func(ctx context.Context, host string) error
	FeedBackfill int           // a followee's newest pins a follow copies into the feed; default 1000
	FeedSweep    time.Duration // redo fan-out left in feed_outbox: at Open, then this often; 0 = never (tools)
	// FeedPullThreshold: an author with at least this many followers when
	// they pin is pulled (their pins merged into feeds at read time, not
	// fanned out); default 10,000 (DefaultFeedPullThreshold).
	FeedPullThreshold int64
	PairSweep         time.Duration // settle pairs left marked in pair_outbox: at Open, then this often; 0 = never (tools)
	// WriteBuffer is how long a write to a shard being switched by a move
	// waits for the new map before EMoving; default
	// topology.DefaultWriteBuffer, negative: no wait.
	WriteBuffer time.Duration
	// FailoverHold is how long a write whose master failed it before
	// anything was sent waits for a failover's new map (only on a host
	// with replicas); default topology.DefaultFailoverHold, negative: no
	// wait.
	FailoverHold time.Duration
	// WriteBufferMax is how many writes may wait at once; default
	// topology.DefaultWriteBufferMax.
	WriteBufferMax int64
	Redis          RedisConfig
	ObjectCache    ObjectCacheConfig
	// ReplicaReads lets every host's replicas serve reads
	// (PINSTORE_REPLICA_READS), besides hosts whose map entry says so;
	// Replicas tunes the lag bound and the token wait (package replicas).
	ReplicaReads bool
	Replicas     replicas.Config
	Logger       *slog.Logger
	Registerer   prometheus.Registerer
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

// ObjectCacheConfig tunes the object cache, kept in the Redis of Config.Redis.
type ObjectCacheConfig struct {
	Disabled bool          // read every object from MySQL
	Prefix   string        // key prefix; default "pinstore:c:"
	TTL      time.Duration // how long an entry lives; default 10 minutes
	// WholeList is the longest list of a user's likes or following the
	// edge cache holds whole (edgecache.go); 0 means DefaultWholeList, and
	// a negative value holds none whole (entries cached one by one).
	WholeList int
	// HashSize bounds the bytes fills write into one owner's hash of edges
	// and pages; 0 means objcache.DefaultHashSize. It is raised to hold a
	// user's lists whole (WholeList) in half of it.
	HashSize int
	// Near is how many objects each server keeps in its near copy of the
	// cache, in the process, in front of Redis (objcache, near.go); 0: none.
	// Every server on the same Redis must run a version that announces
	// its invalidations (every version with this field does).
	Near int
}

// defaultFeedBackfill is how many of a followee's newest pins a follow
// copies into the follower's feed.
const defaultFeedBackfill = 1000

// DefaultFeedPullThreshold is the follower count from which an author's
// pins are merged at read time instead of fanned out: a pin reaches 10,000
// feeds in about 0.15 s of writes (BenchmarkFanOut), while a pulled author
// costs each of their followers' feed pages one more index range scan.
const DefaultFeedPullThreshold = 10000

// Store is the sharded object and mapping store: what Open returns and
// the api calls. Its methods are its parts' (see the package doc); it
// adds only Close. It is safe for concurrent use; the shard map it routes
// by can be replaced while it runs (Router).
type Store struct {
	*core
	*Objects
	*Lists
	*Feeds
	*Usernames
	*Saves
	*Sections
	*Keys
	*Repairs
	*Ops

	stop context.CancelFunc // stops the background loops
	done chan struct{}      // closed when they have stopped
}

// Open connects to every host of cfg.Map (lazily: a host that is down fails
// only the calls routed to it) and to Redis (a Redis that is down costs
// only speed), and starts the feed fan-out.
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
	if cfg.QueryTimeout <= 0 {
		cfg.QueryTimeout = topology.DefaultQueryTimeout
	}
	if cfg.FeedBackfill <= 0 {
		cfg.FeedBackfill = defaultFeedBackfill
	}
	if cfg.FeedPullThreshold <= 0 {
		cfg.FeedPullThreshold = DefaultFeedPullThreshold
	}
	if cfg.WriteBuffer == 0 {
		cfg.WriteBuffer = topology.DefaultWriteBuffer
	}
	if cfg.FailoverHold == 0 {
		cfg.FailoverHold = topology.DefaultFailoverHold
	}
	if cfg.WriteBufferMax <= 0 {
		cfg.WriteBufferMax = topology.DefaultWriteBufferMax
	}
	if len(cfg.CursorSecret) == 0 {
		cfg.CursorSecret = make([]byte, 32)
		_, _ = rand.Read(cfg.CursorSecret)
		cfg.Logger.Warn("PINSTORE_CURSOR_SECRET is not set: list cursors are signed with a random key and stop working when this process restarts")
	}
	c := &core{shards: shards{cfg: cfg}, log: cfg.Logger, cursor: cursorCodec{key: cfg.CursorSecret},
		readStats: pointread.NewStats(cfg.Registerer), edgeStats: edgeread.NewStats(cfg.Registerer)}
	s := newStore(c)
	var err error
	s.router, err = topology.New(cfg.Map, topology.Config{
		MapFile:  cfg.MapFile,
		PoolSize: cfg.PoolSize,
		Reads:    pointread.Config{Lanes: cfg.PointReadLanes, Timeout: cfg.QueryTimeout, Stats: s.readStats},
		Edges:    edgeread.Config{Lanes: cfg.PointReadLanes, Timeout: cfg.QueryTimeout, Stats: s.edgeStats},
		Logger:   cfg.Logger,

		ReplicaReads: cfg.ReplicaReads,
		RoundTrips:   shardsql.NewRoundTrips(cfg.Registerer),
	})
	if err != nil {
		return nil, err
	}
	s.openCache(ctx)
	buf := s.router.Buffer()
	metrics.Register(cfg.Registerer, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pinstore_write_buffer_waits_total",
		Help: "Writes that waited in the server for a move's switch to a shard's new host."}, func() float64 { return float64(buf.Waited.Load()) }))
	metrics.Register(cfg.Registerer, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pinstore_write_buffer_expired_total",
		Help: "Writes refused with shard_moving: the switch outlasted the write buffer window, or too many writes waited."}, func() float64 { return float64(buf.Expired.Load()) }))
	metrics.Register(cfg.Registerer, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "pinstore_write_buffer_waiting",
		Help: "Writes waiting now for a move's switch."}, func() float64 { return float64(buf.Waiting()) }))
	router := s.router
	metrics.Register(cfg.Registerer, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "pinstore_master_changes_total",
		Help: "Hosts whose master changed in a map this server put in force (a failover), since start."}, func() float64 { return float64(router.MasterChanges()) }))
	s.feed = fanout.Start(s.router, fanout.Config{
		QueryTimeout: cfg.QueryTimeout,
		Sweep:        cfg.FeedSweep,
		DropOwners:   s.owners.Drop,
		Logger:       cfg.Logger,
		Registerer:   cfg.Registerer,
	})
	loops, stop := context.WithCancel(withoutBuffer(context.Background()))
	s.stop, s.done = stop, make(chan struct{})
	var wg sync.WaitGroup
	if cfg.PairSweep > 0 {
		wg.Go(func() { s.healLoop(loops, cfg.PairSweep) })
	}
	if s.objects.on() {
		wg.Go(func() { s.cacheLoop(loops) })
	}
	s.startReplicas(loops, &wg)
	wg.Go(func() { s.Ops.provisionLoop(loops) })
	go func() {
		wg.Wait()
		close(s.done)
	}()
	return s, nil
}

// newStore wires the parts of the store on c, each given the parts it
// calls.
func newStore(c *core) *Store {
	keys, feeds := &Keys{c}, &Feeds{c}
	usernames, lists := &Usernames{c, keys}, &Lists{c, feeds}
	objects := &Objects{core: c, keys: keys, feeds: feeds, lists: lists, usernames: usernames}
	return &Store{
		core:      c,
		Ops:       &Ops{c},
		Keys:      keys,
		Feeds:     feeds,
		Usernames: usernames,
		Lists:     lists,
		Objects:   objects,
		Saves:     &Saves{c, objects, lists},
		Sections:  &Sections{c},
		Repairs:   &Repairs{core: c, keys: keys, objs: objects, lists: lists, usernames: usernames},
	}
}

// Close finishes the queued feed fan-out (giving it one last try), then
// closes every pool and the Redis client.
func (s *Store) Close() error {
	s.stop()
	<-s.done
	s.feed.Close()
	s.owners.Close()
	if s.objects.on() {
		s.objects.cache.Close()
	}
	errs := []error{s.router.Close()}
	if s.redis != nil {
		errs = append(errs, s.redis.Close())
	}
	return errors.Join(errs...)
}
