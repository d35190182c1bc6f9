package store

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"

	"github.com/pinstore/pinstore/internal/tracing"
	"github.com/pinstore/pinstore/store/edgeread"
	"github.com/pinstore/pinstore/store/fanout"
	"github.com/pinstore/pinstore/store/objcache"
	"github.com/pinstore/pinstore/store/ownercache"
	"github.com/pinstore/pinstore/store/pointread"
)

// core is what every part of the store shares: the shards (route.go,
// replicas.go), the caches and their upkeep (cache.go), and the reads by
// id through the object cache (objects.go, lists.go).
type core struct {
	shards
	log       *slog.Logger
	cursor    cursorCodec
	feed      *fanout.Fanout
	readStats *pointread.Stats // reads by id of every pool's queue (topology.Pool)
	edgeStats *edgeread.Stats  // edge checks of every pool's queue

	redis  redis.UniversalClient // nil when the cache is disabled
	owners *ownercache.Guard     // nil when the cache is disabled

	provision provisioning // the hosts' last provisioning check (provision.go)
}

// openCache connects the owner cache. A Redis that is down is not an
// error (the store answers from MySQL meanwhile); a reachable Redis whose
// listpack limit is below the bucket size is warned about.
func (s *core) openCache(ctx context.Context) {
	rc := s.cfg.Redis
	if rc.Disabled {
		return
	}
	if rc.Timeout <= 0 {
		rc.Timeout = 200 * time.Millisecond // a 1,000-pin pipeline under load needs more than 50ms
	}
	poolSize := s.cfg.PoolSize
	if poolSize <= 0 {
		poolSize = 64
	}
	s.redis = redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:                 rc.Addrs,
		IsClusterMode:         rc.Cluster,
		Password:              rc.Password,
		DialTimeout:           200 * time.Millisecond,
		ReadTimeout:           rc.Timeout,
		WriteTimeout:          rc.Timeout,
		ContextTimeoutEnabled: true,
		DialerRetries:         1,
		MaxRetries:            -1,
		PoolSize:              poolSize,
		// RESP2: pinstore uses nothing of RESP3 (no client-side caching,
		// no push notifications), and under RESP3 go-redis looks for
		// pending pushes around every command: 2% of a cached get's CPU.
		Protocol: 2,
	})
	if tracing.On() {
		// Spans of the cache's commands, without their arguments (keys
		// and cached documents).
		if err := redisotel.InstrumentTracing(s.redis, redisotel.WithDBStatement(false)); err != nil {
			s.log.Warn("redis tracing not set up", "error", err.Error())
		}
	}
	s.ownerCache = ownercache.New(s.redis, ownercache.Options{
		Prefix:     rc.Prefix,
		Timeout:    rc.Timeout,
		Logger:     s.log,
		Registerer: s.cfg.Registerer,
	})
	s.owners = ownercache.NewGuard(s.ownerCache)
	if !s.cfg.ObjectCache.Disabled {
		s.objects = newObjectCache(objcache.New(s.redis, objcache.Options{
			Prefix:     s.cfg.ObjectCache.Prefix,
			TTL:        s.cfg.ObjectCache.TTL,
			Timeout:    rc.Timeout,
			Logger:     s.log,
			Registerer: s.cfg.Registerer,
			EdgeOwners: edgeOwner,
			HashSize:   edgeHashSize(s.cfg.ObjectCache),
			Near:       s.cfg.ObjectCache.Near,
		}), s.cfg.Registerer)
	}
	c, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	warning, err := ownercache.CheckConfig(c, s.redis, ownercache.BucketSize)
	switch {
	case err != nil:
		s.log.Warn("redis is not answering; owner look-ups go to MySQL until it is back", "err", err.Error())
	case warning != "":
		s.log.Warn(warning)
	}
}
