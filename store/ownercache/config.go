package ownercache

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/pinstore/pinstore/model"
)

// CheckConfig reads hash-max-listpack-entries (hash-max-ziplist-entries on
// servers older than Redis 7) from every server behind client (every shard
// of a cluster or ring) and returns a non-empty warning when one of them is
// below bucket, the number of fields per hash (BucketSize when bucket ≤ 0):
// Redis would then store full buckets as hash tables, using about five times
// the memory. It returns a *model.Error with code model.EUnavailable when a
// server cannot be asked (Redis down, CONFIG disabled or renamed).
func CheckConfig(ctx context.Context, client redis.UniversalClient, bucket int) (warning string, err error) {
	const op = "ownercache.CheckConfig"
	if bucket <= 0 {
		bucket = BucketSize
	}
	type low struct {
		addr, name string
		value      int
	}
	var (
		mu    sync.Mutex
		worst *low
	)
	check := func(ctx context.Context, cl redis.Cmdable, addr string) error {
		name, value, err := listpackEntries(ctx, cl)
		if err != nil {
			return fmt.Errorf("%s: %w", addr, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if value < bucket && (worst == nil || value < worst.value) {
			worst = &low{addr, name, value}
		}
		return nil
	}
	switch cl := client.(type) {
	case *redis.ClusterClient:
		err = cl.ForEachShard(ctx, func(ctx context.Context, shard *redis.Client) error {
			return check(ctx, shard, shard.Options().Addr)
		})
	case *redis.Ring:
		err = cl.ForEachShard(ctx, func(ctx context.Context, shard *redis.Client) error {
			return check(ctx, shard, shard.Options().Addr)
		})
	case *redis.Client:
		err = check(ctx, cl, cl.Options().Addr)
	default:
		err = check(ctx, client, "redis")
	}
	if err != nil {
		return "", model.Wrap(op, model.EUnavailable, "cannot read redis configuration", err)
	}
	if worst == nil {
		return "", nil
	}
	return fmt.Sprintf("redis %s: %s is %d, below the owner cache bucket size %d: "+
		"full buckets will be stored as hash tables and use about 5x the memory; "+
		"set %s to at least %d (e.g. 1024) in redis.conf or with CONFIG SET",
		worst.addr, worst.name, worst.value, bucket, worst.name, bucket), nil
}

// listpackEntries returns the name and value of the server's hash listpack
// (or, before Redis 7, ziplist) entry limit.
func listpackEntries(ctx context.Context, cl redis.Cmdable) (string, int, error) {
	for _, name := range []string{"hash-max-listpack-entries", "hash-max-ziplist-entries"} {
		m, err := cl.ConfigGet(ctx, name).Result()
		if err != nil {
			return "", 0, err
		}
		s, ok := m[name]
		if !ok {
			continue // unknown to this server version
		}
		v, err := strconv.Atoi(s)
		if err != nil {
			return "", 0, fmt.Errorf("CONFIG GET %s: %q is not an integer", name, s)
		}
		return name, v, nil
	}
	return "", 0, fmt.Errorf("CONFIG GET: server reports neither hash-max-listpack-entries nor hash-max-ziplist-entries")
}
