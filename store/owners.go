package store

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pinstore/pinstore/store/ownercache"
)

// ownerCache wraps the Redis pin → owner cache. With Redis disabled its
// cache is nil and every look-up goes to MySQL.
type ownerCache struct {
	client redis.UniversalClient
	cache  *ownercache.Cache
}

// openCache connects the owner cache. It does not fail when Redis is down
// (Redis is a cache: the store answers from MySQL meanwhile), but warns
// when Redis is reachable and its listpack limit is below the bucket size.
func (s *Store) openCache(ctx context.Context) error {
	rc := s.cfg.Redis
	if rc.Disabled {
		return nil
	}
	if rc.Timeout <= 0 {
		rc.Timeout = 200 * time.Millisecond // a 1,000-pin pipeline under load needs more than 50ms
	}
	client := redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:                 rc.Addrs,
		IsClusterMode:         rc.Cluster,
		Password:              rc.Password,
		DialTimeout:           200 * time.Millisecond,
		ReadTimeout:           rc.Timeout,
		WriteTimeout:          rc.Timeout,
		ContextTimeoutEnabled: true,
		DialerRetries:         1,
		MaxRetries:            -1,
		PoolSize:              s.cfg.PoolSize,
	})
	s.owners = ownerCache{client: client, cache: ownercache.New(client, ownercache.Options{
		Prefix:     rc.Prefix,
		Timeout:    rc.Timeout,
		Logger:     s.log,
		Registerer: s.cfg.Registerer,
	})}
	c, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	warning, err := ownercache.CheckConfig(c, client, ownercache.BucketSize)
	switch {
	case err != nil:
		s.log.Warn("redis is not answering; owner look-ups go to MySQL until it is back", "err", err.Error())
	case warning != "":
		s.log.Warn(warning)
	}
	return nil
}

func (o *ownerCache) close() error {
	if o.client == nil {
		return nil
	}
	return o.client.Close()
}

// set writes one pair that was just committed to MySQL. A failure only
// costs a later miss.
func (o *ownerCache) set(ctx context.Context, pin, owner uint64) {
	if o.cache != nil {
		_ = o.cache.Set(ctx, map[uint64]uint64{pin: owner})
	}
}

// forget drops deleted pins, so the cache never vouches for them.
func (o *ownerCache) forget(ctx context.Context, pins ...uint64) {
	if o.cache != nil {
		_ = o.cache.Delete(ctx, pins...)
	}
}

func (o *ownerCache) ready(ctx context.Context) (bool, string) {
	if o.client == nil {
		return true, ""
	}
	c, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := o.client.Ping(c).Err(); err != nil {
		return false, "redis is not answering"
	}
	return true, ""
}

func (o *ownerCache) lookup(ctx context.Context, pins []uint64, load ownercache.LoadFunc) (map[uint64]uint64, error) {
	if o.cache == nil {
		return load(ctx, pins)
	}
	return o.cache.Lookup(ctx, pins, load)
}
