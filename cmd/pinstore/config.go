package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pinstore/pinstore/auth"
	"github.com/pinstore/pinstore/cluster/failover"
	"github.com/pinstore/pinstore/store"
	"github.com/pinstore/pinstore/store/replicas"
	"github.com/pinstore/pinstore/store/shardmap"
	"github.com/pinstore/pinstore/store/topology"
)

// Every PINSTORE_* variable is read in this file; packages take plain
// config structs. docs/configuration.md lists them all.

// defaultFeedSweep is how often a server redoes fan-out that feed_outbox
// says is unfinished, when PINSTORE_FEED_SWEEP does not say otherwise.
const defaultFeedSweep = 5 * time.Minute

// storeConfig builds the store's Config from PINSTORE_SHARD_MAP (file),
// PINSTORE_MYSQL_DSN, PINSTORE_SHARDS, PINSTORE_DB_PREFIX,
// PINSTORE_CURSOR_SECRET, PINSTORE_MAX_DOC_BYTES, PINSTORE_MAX_DATA_BYTES,
// PINSTORE_POOL_SIZE, PINSTORE_POINT_READ_LANES,
// PINSTORE_FEED_PULL_THRESHOLD, PINSTORE_REDIS_ADDRS,
// PINSTORE_REDIS_CLUSTER, PINSTORE_REDIS_PASSWORD, PINSTORE_REDIS_PREFIX,
// PINSTORE_REDIS_DISABLED, PINSTORE_OBJECT_CACHE, PINSTORE_OBJECT_CACHE_PREFIX,
// PINSTORE_OBJECT_CACHE_TTL, PINSTORE_OBJECT_CACHE_NEAR, PINSTORE_WRITE_BUFFER,
// PINSTORE_WRITE_BUFFER_MAX, PINSTORE_REPLICA_READS, PINSTORE_REPLICA_LAG
// and PINSTORE_REPLICA_WAIT. With PINSTORE_TOPOLOGY the map is read from
// etcd by openTopology: Map then holds only the shard count and prefix.
func storeConfig(getenv func(string) string) (store.Config, error) {
	var cfg store.Config
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
	cfg.MapFile = getenv("PINSTORE_SHARD_MAP")
	switch {
	case getenv("PINSTORE_TOPOLOGY") != "":
		if cfg.MapFile != "" {
			return cfg, fmt.Errorf("PINSTORE_TOPOLOGY and PINSTORE_SHARD_MAP are both set: the shard map comes from one place; unset one")
		}
		// openTopology reads the map from etcd; these are its defaults.
		cfg.Map = &shardmap.Map{Shards: shards, DBPrefix: prefix}
	case cfg.MapFile != "":
		cfg.Map, err = shardmap.Load(cfg.MapFile, shards, prefix)
	default:
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
	// An author with at least this many followers when they pin is pulled
	// (merged into feeds at read time); docs/internals.md, "The home feed".
	if v := getenv("PINSTORE_FEED_PULL_THRESHOLD"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return cfg, fmt.Errorf("PINSTORE_FEED_PULL_THRESHOLD: %q is not a positive number", v)
		}
		cfg.FeedPullThreshold = n
	}
	addrs := getenv("PINSTORE_REDIS_ADDRS")
	if addrs == "" {
		addrs = "127.0.0.1:6379"
	}
	cfg.Redis.Addrs = strings.Split(addrs, ",")
	cfg.Redis.Password = getenv("PINSTORE_REDIS_PASSWORD")
	cfg.Redis.Prefix = getenv("PINSTORE_REDIS_PREFIX")
	if cfg.Redis.Cluster, err = envBool(getenv, "PINSTORE_REDIS_CLUSTER", false); err != nil {
		return cfg, err
	}
	if cfg.Redis.Disabled, err = envBool(getenv, "PINSTORE_REDIS_DISABLED", false); err != nil {
		return cfg, err
	}
	objectCache, err := envBool(getenv, "PINSTORE_OBJECT_CACHE", true)
	if err != nil {
		return cfg, err
	}
	cfg.ObjectCache.Disabled = !objectCache
	cfg.ObjectCache.Prefix = getenv("PINSTORE_OBJECT_CACHE_PREFIX")
	var err2 error
	if cfg.ObjectCache.TTL, err2 = durationFromEnv(getenv, "PINSTORE_OBJECT_CACHE_TTL", defaultObjectCacheTTL, false); err2 != nil {
		return cfg, err2
	}
	cfg.ObjectCache.Near = defaultObjectCacheNear
	if v := getenv("PINSTORE_OBJECT_CACHE_NEAR"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return cfg, fmt.Errorf("PINSTORE_OBJECT_CACHE_NEAR: %q is not a number of objects (0: no near copy)", v)
		}
		cfg.ObjectCache.Near = n
	}
	// How long a write to a range a move is switching waits for the new
	// map (0: refused at once with shard_moving), and how many may wait.
	// The default outlasts the hold of a move at its default settle with
	// the map file polled every PINSTORE_MAP_POLL (15s at the default 2s).
	poll, err2 := mapPoll(getenv)
	if err2 != nil {
		return cfg, err2
	}
	if cfg.WriteBuffer, err2 = durationFromEnv(getenv, "PINSTORE_WRITE_BUFFER", topology.WriteBufferFor(poll, topology.DefaultQueryTimeout), true); err2 != nil {
		return cfg, err2
	}
	if cfg.WriteBuffer == 0 {
		cfg.WriteBuffer = -1
	}
	cfg.FailoverHold = failoverWindow(getenv, cfg.WriteBuffer)
	if cfg.FailoverHold == 0 {
		cfg.FailoverHold = -1
	}
	if v := getenv("PINSTORE_WRITE_BUFFER_MAX"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return cfg, fmt.Errorf("PINSTORE_WRITE_BUFFER_MAX: %q is not a positive number", v)
		}
		cfg.WriteBufferMax = n
	}
	// Replica reads: off unless the map or PINSTORE_REPLICA_READS turns
	// them on; the lag a read without a token tolerates, and how long a
	// read with one waits for a replica
	// (docs/operations/replicas-and-failover.md).
	if cfg.ReplicaReads, err = envBool(getenv, "PINSTORE_REPLICA_READS", false); err != nil {
		return cfg, err
	}
	if cfg.Replicas.LagBound, err2 = durationFromEnv(getenv, "PINSTORE_REPLICA_LAG", replicas.DefaultLagBound, false); err2 != nil {
		return cfg, err2
	}
	if cfg.Replicas.Wait, err2 = durationFromEnv(getenv, "PINSTORE_REPLICA_WAIT", replicas.DefaultWait, true); err2 != nil {
		return cfg, err2
	}
	if cfg.Replicas.Wait == 0 {
		cfg.Replicas.Wait = -1 // never wait: a replica must have the token's writes already
	}
	return cfg, nil
}

// defaultObjectCacheNear is how many objects a server keeps in its near
// copy of the object cache, unless PINSTORE_OBJECT_CACHE_NEAR says
// otherwise: about 45 MB at the 450 bytes a cached pin takes.
const defaultObjectCacheNear = 100_000

// defaultObjectCacheTTL is how long an object stays in the cache, unless
// PINSTORE_OBJECT_CACHE_TTL says otherwise.
const defaultObjectCacheTTL = 10 * time.Minute

// mapPoll reads PINSTORE_MAP_POLL (a Go duration such as "2s"), defaulting
// to topology.DefaultMapPoll. Servers (Watch) and move-shards (its default
// settle time) must agree on it.
func mapPoll(getenv func(string) string) (time.Duration, error) {
	return durationFromEnv(getenv, "PINSTORE_MAP_POLL", topology.DefaultMapPoll, false)
}

// tokensPoll reads PINSTORE_TOKENS_POLL (a Go duration such as "2s"):
// how often a server checks the tokens file for changes, defaulting to
// auth.DefaultTokensPoll.
func tokensPoll(getenv func(string) string) (time.Duration, error) {
	return durationFromEnv(getenv, "PINSTORE_TOKENS_POLL", auth.DefaultTokensPoll, false)
}

// defaultPairSweep is how often a server settles pairs a request left
// unfinished (pair_outbox), when PINSTORE_PAIR_SWEEP does not say otherwise.
const defaultPairSweep = 2 * time.Second

// pairSweep reads PINSTORE_PAIR_SWEEP (a Go duration; "0" turns the sweep
// off), defaulting to defaultPairSweep.
func pairSweep(getenv func(string) string) (time.Duration, error) {
	return durationFromEnv(getenv, "PINSTORE_PAIR_SWEEP", defaultPairSweep, true)
}

// feedSweep reads PINSTORE_FEED_SWEEP (a Go duration; "0" turns the sweep
// off), defaulting to defaultFeedSweep.
func feedSweep(getenv func(string) string) (time.Duration, error) {
	return durationFromEnv(getenv, "PINSTORE_FEED_SWEEP", defaultFeedSweep, true)
}

// envBool reads the boolean variable name, def when unset: see parseBool.
func envBool(getenv func(string) string, name string, def bool) (bool, error) {
	return parseBool(name, getenv(name), def)
}

// parseBool is how every boolean PINSTORE_* variable is read: true, 1,
// yes or on; false, 0, no or off (in any case, spaces around ignored);
// def when empty. Anything else is an error naming the variable.
func parseBool(name, v string, def bool) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "":
		return def, nil
	case "true", "1", "yes", "on":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("%s: %q is not a boolean: use true or false (also 1/0, yes/no, on/off)", name, v)
}

// durationFromEnv reads the Go duration in variable name, def when unset;
// it must be positive, or with allowZero not negative.
func durationFromEnv(getenv func(string) string, name string, def time.Duration, allowZero bool) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d == 0 && !allowZero {
		what := "a positive duration"
		if allowZero {
			what = "a duration"
		}
		return 0, fmt.Errorf("%s: %q is not %s", name, v, what)
	}
	return d, nil
}

// serveEnv is what `pinstore serve` reads besides the store's Config.
type serveEnv struct {
	addr      string // PINSTORE_ADDR, default ":8080"
	logLevel  string // PINSTORE_LOG_LEVEL
	debugAddr string // PINSTORE_DEBUG_ADDR
	auth      authEnv
}

func readServeEnv(getenv func(string) string) serveEnv {
	e := serveEnv{addr: getenv("PINSTORE_ADDR"), logLevel: getenv("PINSTORE_LOG_LEVEL"), debugAddr: getenv("PINSTORE_DEBUG_ADDR"), auth: readAuthEnv(getenv)}
	if e.addr == "" {
		e.addr = ":8080"
	}
	return e
}

// authEnv is the authentication configuration, as given (token.go checks
// it): PINSTORE_DEV, PINSTORE_RATE_LIMIT, PINSTORE_RATE_BURST,
// PINSTORE_TOKENS_FILE and PINSTORE_TOKEN_SECRET.
type authEnv struct {
	dev, rateLimit, rateBurst, tokensFile, tokenSecret string
}

func readAuthEnv(getenv func(string) string) authEnv {
	return authEnv{
		dev:         getenv("PINSTORE_DEV"),
		rateLimit:   getenv("PINSTORE_RATE_LIMIT"),
		rateBurst:   getenv("PINSTORE_RATE_BURST"),
		tokensFile:  getenv("PINSTORE_TOKENS_FILE"),
		tokenSecret: getenv("PINSTORE_TOKEN_SECRET"),
	}
}

// adminToken is PINSTORE_ADMIN_TOKEN: the service token (scope admin) with
// which move-shards asks servers which map they route by.
func adminToken(getenv func(string) string) string { return getenv("PINSTORE_ADMIN_TOKEN") }

// autoFailover reads PINSTORE_FAILOVER (off, the default, or auto) and
// PINSTORE_FAILOVER_AFTER (how long a majority of the servers must have
// seen a master unreachable; default 2s).
func autoFailover(getenv func(string) string) (on bool, after time.Duration, err error) {
	switch v := getenv("PINSTORE_FAILOVER"); v {
	case "", "off":
	case "auto":
		on = true
	default:
		return false, 0, fmt.Errorf("PINSTORE_FAILOVER: %q is not off or auto", v)
	}
	after, err = durationFromEnv(getenv, "PINSTORE_FAILOVER_AFTER", failover.DefaultAfter, false)
	return on, after, err
}
