package ownercache_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/store/ownercache"
)

// TestCluster runs the cache on a three-master Redis Cluster: a batch over
// many buckets (hence slots and nodes) is one pipeline call that go-redis
// splits per node, every bucket is one key on one node, and CheckConfig asks
// every node.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	addrs := testenv.RedisCluster(t, "--hash-max-listpack-entries", "1024")
	hook := &countHook{}
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { client.Close() })
	client.AddHook(hook)
	ctx := context.Background()
	if err := client.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	c := ownercache.New(client, ownercache.Options{Timeout: time.Second})

	pins, truth := realisticPairs(6, 1000)
	l := &mapLoader{truth: truth}
	if _, err := c.Lookup(ctx, pins, l.load); err != nil {
		t.Fatal(err)
	}
	hook.reset()
	l.reset()
	got, err := c.Lookup(ctx, pins, l.load)
	if err != nil {
		t.Fatal(err)
	}
	if calls, _ := l.loaded(); calls != 0 {
		t.Errorf("second Lookup on the cluster called load %d times", calls)
	}
	for _, p := range pins {
		if got[p] != truth[p] {
			t.Fatalf("pin %d = %d, want %d", p, got[p], truth[p])
		}
	}
	if p, q := hook.pipelines.Load(), hook.process.Load(); p != 1 || q != 0 {
		t.Errorf("cluster Lookup (all hits): %d pipeline calls, %d single commands; want 1, 0", p, q)
	}

	total := 0
	for _, addr := range addrs {
		nc := redis.NewClient(&redis.Options{Addr: addr})
		k := int(nc.DBSize(ctx).Val())
		nc.Close()
		if k == 0 {
			t.Errorf("node %s holds no bucket", addr)
		}
		total += k
	}
	if want := buckets(pins); total != want {
		t.Errorf("cluster holds %d keys, want %d (one per bucket)", total, want)
	}

	if warn, err := ownercache.CheckConfig(ctx, client, 0); err != nil || warn != "" {
		t.Errorf("CheckConfig on a 1024 cluster = %q, %v", warn, err)
	}
	low := redis.NewClient(&redis.Options{Addr: addrs[1]})
	defer low.Close()
	if err := low.ConfigSet(ctx, "hash-max-listpack-entries", "128").Err(); err != nil {
		t.Fatal(err)
	}
	warn, err := ownercache.CheckConfig(ctx, client, 0)
	if err != nil || !strings.Contains(warn, addrs[1]) || !strings.Contains(warn, "128") {
		t.Errorf("CheckConfig with one node at 128 = %q, %v; want a warning naming %s", warn, err, addrs[1])
	}
}
