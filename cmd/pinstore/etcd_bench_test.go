package main

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/pinstore/pinstore/cluster/etcdtopo"
	"github.com/pinstore/pinstore/store/shardmap"
)

// TestTopologySwitchBench measures how long a map pushed to etcd takes to
// be routed by on each of three servers (`pinstore serve`, following a
// three-member etcd cluster): from the moment etcd acknowledged the push
// to the moment each server's registration reports the new version (so
// it includes the server writing its registration back). Skipped unless
// PINSTORE_BENCH_TOPOLOGY_SWITCH names how many pushes to time:
//
//	PINSTORE_BENCH_TOPOLOGY_SWITCH=50 go test -count=1 -run TestTopologySwitchBench -v ./cmd/pinstore
func TestTopologySwitchBench(t *testing.T) {
	pushes, _ := strconv.Atoi(os.Getenv("PINSTORE_BENCH_TOPOLOGY_SWITCH"))
	if pushes <= 0 {
		t.Skip("set PINSTORE_BENCH_TOPOLOGY_SWITCH to run the switch benchmark")
	}
	f := startEtcdFleet(t, 3, 3)
	u, _ := etcdtopo.ParseURL(f.url)
	c, err := etcdtopo.Dial(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for {
		regs, _, err := c.Servers(ctx)
		if err == nil && len(regs) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("servers never registered: %v %v", regs, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	m, rev, err := c.Map(ctx, e2eShards, f.prefix)
	if err != nil {
		t.Fatal(err)
	}
	var lat []time.Duration
	var worst []time.Duration // per push, the slowest server
	for i := range pushes {
		open := i%2 == 0
		next, err := m.Rewrite(4, 7, func(r *shardmap.Range) { r.Open = &open })
		if err != nil {
			t.Fatal(err)
		}
		v := next.Version()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		// Watch the registrations from before the push, so no report is missed.
		_, srev, err := c.Servers(wctx)
		if err != nil {
			t.Fatal(err)
		}
		wch := c.Etcd().Watch(wctx, u.Prefix+"/servers/", clientv3.WithPrefix(), clientv3.WithRev(srev+1))
		if rev, err = c.PutMap(ctx, next, rev, "bench"); err != nil {
			t.Fatal(err)
		}
		acked := time.Now()
		seen := map[string]time.Duration{}
		for len(seen) < 3 {
			resp, ok := <-wch
			if !ok || resp.Err() != nil {
				t.Fatalf("push %d: watch ended: %v (seen %v)", i, resp.Err(), seen)
			}
			now := time.Now()
			for _, ev := range resp.Events {
				var r etcdtopo.Registration
				if json.Unmarshal(ev.Kv.Value, &r) == nil && r.Version == v {
					if _, ok := seen[r.ID]; !ok {
						seen[r.ID] = now.Sub(acked)
					}
				}
			}
		}
		cancel()
		var w time.Duration
		for _, d := range seen {
			lat = append(lat, d)
			w = max(w, d)
		}
		worst = append(worst, w)
		m = next
		time.Sleep(50 * time.Millisecond)
	}
	slices.Sort(lat)
	slices.Sort(worst)
	t.Logf("BENCH topology switch: %d pushes × 3 servers: per server median %v, p90 %v, max %v; slowest of the three per push: median %v, max %v",
		pushes, lat[len(lat)/2].Round(100*time.Microsecond), lat[len(lat)*9/10].Round(100*time.Microsecond), lat[len(lat)-1].Round(100*time.Microsecond),
		worst[len(worst)/2].Round(100*time.Microsecond), worst[len(worst)-1].Round(100*time.Microsecond))
}
