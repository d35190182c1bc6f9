package store

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pinstore/pinstore/store/ownercache"
)

// ownerCache wraps the Redis pin → owner cache. With Redis disabled its
// cache is nil and every look-up goes to MySQL.
type ownerCache struct {
	client redis.UniversalClient
	cache  *ownercache.Cache
	unsent *unsentDeletes
	stop   context.CancelFunc
}

// unsentDeletes are deleted pins whose cache entries Redis did not remove
// (it was down or slow). Until a retry removes them, look-ups of these
// pins skip the cache, so this process never vouches for a deleted pin.
type unsentDeletes struct {
	mu   sync.Mutex
	pins map[uint64]struct{}
}

// maxUnsentDeletes bounds the retry set; past it, deletes are logged.
const maxUnsentDeletes = 1 << 20

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
	retryCtx, stop := context.WithCancel(context.Background())
	s.owners = ownerCache{client: client, cache: ownercache.New(client, ownercache.Options{
		Prefix:     rc.Prefix,
		Timeout:    rc.Timeout,
		Logger:     s.log,
		Registerer: s.cfg.Registerer,
	}), unsent: &unsentDeletes{pins: map[uint64]struct{}{}}, stop: stop}
	go s.owners.retryDeletes(retryCtx, time.Second)
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
	o.stop()
	return o.client.Close()
}

// set writes one pair that was just committed to MySQL. A failure only
// costs a later miss.
func (o *ownerCache) set(ctx context.Context, pin, owner uint64) {
	if o.cache != nil {
		_ = o.cache.Set(ctx, map[uint64]uint64{pin: owner})
	}
}

// forget drops deleted pins, so the cache never vouches for them. Pins
// Redis did not drop are retried in the background and bypass the cache
// meanwhile; the feed fan-out of the delete (drop) makes it durable.
func (o *ownerCache) forget(ctx context.Context, pins ...uint64) {
	_ = o.drop(ctx, pins...)
}

// drop is forget, reporting whether Redis failed to take the deletes.
func (o *ownerCache) drop(ctx context.Context, pins ...uint64) error {
	if o.cache == nil {
		return nil
	}
	err := o.cache.Delete(ctx, pins...)
	if err == nil {
		return nil
	}
	o.unsent.mu.Lock()
	defer o.unsent.mu.Unlock()
	for _, p := range pins {
		if len(o.unsent.pins) < maxUnsentDeletes {
			o.unsent.pins[p] = struct{}{}
		}
	}
	return err
}

// retryDeletes sends the unsent deletes every interval until Redis takes
// them.
func (o *ownerCache) retryDeletes(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		o.unsent.mu.Lock()
		pins := make([]uint64, 0, len(o.unsent.pins))
		for p := range o.unsent.pins {
			pins = append(pins, p)
		}
		o.unsent.mu.Unlock()
		for start := 0; start < len(pins); start += 1000 {
			batch := pins[start:min(start+1000, len(pins))]
			if o.cache.Delete(ctx, batch...) != nil {
				break // still down: next tick
			}
			o.unsent.mu.Lock()
			for _, p := range batch {
				delete(o.unsent.pins, p)
			}
			o.unsent.mu.Unlock()
		}
	}
}

// bypass splits pins into those the cache may answer and those with an
// unsent delete, which must be read from MySQL.
func (o *ownerCache) bypass(pins []uint64) (cached, direct []uint64) {
	o.unsent.mu.Lock()
	defer o.unsent.mu.Unlock()
	if len(o.unsent.pins) == 0 {
		return pins, nil
	}
	for _, p := range pins {
		if _, ok := o.unsent.pins[p]; ok {
			direct = append(direct, p)
		} else {
			cached = append(cached, p)
		}
	}
	return cached, direct
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
	cached, direct := o.bypass(pins)
	if len(direct) == 0 {
		return o.cache.Lookup(ctx, pins, load)
	}
	out, err := load(ctx, direct)
	if err != nil || len(cached) == 0 {
		return out, err
	}
	if out == nil {
		out = map[uint64]uint64{}
	}
	more, err := o.cache.Lookup(ctx, cached, load)
	for p, owner := range more {
		out[p] = owner
	}
	return out, err
}
