package ownercache_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pinstore/pinstore/store/ownercache"
)

// startCluster starts a Redis Cluster of three masters on private loopback
// ports and returns their addresses once every node reports cluster_state:ok.
func startCluster(t *testing.T) []*redisServer {
	t.Helper()
	nodes := make([]*redisServer, 3)
	for i := range nodes {
		nodes[i] = startRedis(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000", "--hash-max-listpack-entries", "1024")
	}
	ctx := context.Background()
	const slots = 16384
	for i, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr()})
		defer c.Close()
		lo, hi := i*slots/len(nodes), (i+1)*slots/len(nodes)-1
		if err := c.Do(ctx, "cluster", "addslotsrange", lo, hi).Err(); err != nil {
			t.Fatalf("CLUSTER ADDSLOTSRANGE on %s: %v", n.Addr(), err)
		}
		if i > 0 {
			if err := c.ClusterMeet(ctx, "127.0.0.1", fmt.Sprint(n.port)).Err(); err != nil {
				t.Fatal(err)
			}
			first := redis.NewClient(&redis.Options{Addr: nodes[0].Addr()})
			defer first.Close()
			if err := first.ClusterMeet(ctx, "127.0.0.1", fmt.Sprint(n.port)).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr()})
		defer c.Close()
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster not ready: %q %v", info, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nodes
}

// TestCluster runs the cache on a three-master Redis Cluster: a batch over
// many buckets (hence slots and nodes) is one pipeline call that go-redis
// splits per node, every bucket is one key on one node, and CheckConfig asks
// every node.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	nodes := startCluster(t)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
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
	for _, n := range nodes {
		nc := redis.NewClient(&redis.Options{Addr: n.Addr()})
		k := int(nc.DBSize(ctx).Val())
		nc.Close()
		if k == 0 {
			t.Errorf("node %s holds no bucket", n.Addr())
		}
		total += k
	}
	if want := buckets(pins); total != want {
		t.Errorf("cluster holds %d keys, want %d (one per bucket)", total, want)
	}

	if warn, err := ownercache.CheckConfig(ctx, client, 0); err != nil || warn != "" {
		t.Errorf("CheckConfig on a 1024 cluster = %q, %v", warn, err)
	}
	low := redis.NewClient(&redis.Options{Addr: nodes[1].Addr()})
	defer low.Close()
	if err := low.ConfigSet(ctx, "hash-max-listpack-entries", "128").Err(); err != nil {
		t.Fatal(err)
	}
	warn, err := ownercache.CheckConfig(ctx, client, 0)
	if err != nil || !strings.Contains(warn, nodes[1].Addr()) || !strings.Contains(warn, "128") {
		t.Errorf("CheckConfig with one node at 128 = %q, %v; want a warning naming %s", warn, err, nodes[1].Addr())
	}
}
