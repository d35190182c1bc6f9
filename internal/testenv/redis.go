package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const redisHowTo = "start Redis with: redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 " +
	"--save \"\" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log " +
	"(or set " + EnvRedisAddr + " to a reachable server, e.g. " + DefaultRedisAddr + ")"

var redisPrimary = primary{
	what:   "Redis",
	env:    EnvRedisAddr,
	def:    DefaultRedisAddr,
	howTo:  redisHowTo,
	ping:   pingRedis,
	docker: dockerRedis,
}

// RedisAddr returns the host:port of the primary Redis: the value of
// PINSTORE_TEST_REDIS_ADDR, or DefaultRedisAddr, once it answers PING within
// 3s. When it doesn't and a Docker engine is reachable, it starts redis:7 with
// hash-max-listpack-entries 1024 (once per process) and returns its address.
// Otherwise it skips tb, or fails it when CI=true.
func RedisAddr(tb testing.TB) string {
	tb.Helper()
	return redisPrimary.get(tb)
}

func pingRedis(addr string) error {
	c := redis.NewClient(&redis.Options{
		Addr:          addr,
		DialTimeout:   pingTimeout,
		ReadTimeout:   pingTimeout,
		WriteTimeout:  pingTimeout,
		MaxRetries:    -1,
		DialerRetries: 1,
	})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	return c.Ping(ctx).Err()
}

// DropKeys deletes every key of the Redis at addr that starts with prefix,
// which must be one of UniquePrefix's (so it never matches a real key
// prefix). Failures are reported with tb.Errorf, so it is safe in
// tb.Cleanup.
func DropKeys(tb testing.TB, addr, prefix string) {
	tb.Helper()
	if err := checkPrefix(prefix); err != nil {
		tb.Errorf("testenv.DropKeys: %v", err)
		return
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err == nil && len(keys) > 0 {
			err = c.Unlink(ctx, keys...).Err()
		}
		if err != nil {
			tb.Errorf("testenv.DropKeys %s*: %v", prefix, err)
			return
		}
		if cursor = next; cursor == 0 {
			return
		}
	}
}
