package store

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pinstore/pinstore/model"
)

// Edge checks through two stores (servers) on the same shards, with one
// lane per host so concurrent checks share statements: a check never
// misses a like acknowledged before it began, whichever server took the
// like and whichever answers the check, and each answer is its own
// check's (the likes of other users, put at the same time, never leak in).
// Without the object cache, every check is one edge-check job of the
// MySQL path; with it, checks the edge cache answers whole are none.
func TestEdgeChecksNeverOlderAcrossServers(t *testing.T) {
	t.Run("mysql", func(t *testing.T) { edgeChecksNeverOlderAcrossServers(t, false) })
	t.Run("cached", func(t *testing.T) { edgeChecksNeverOlderAcrossServers(t, true) })
}

func edgeChecksNeverOlderAcrossServers(t *testing.T, cached bool) {
	a, _ := openTestWith(t, func(c *Config) { c.PointReadLanes = 1; c.ObjectCache.Disabled = !cached })
	b, err := Open(ctx, Config{Map: a.cfg.Map, CursorSecret: []byte("test"), Redis: a.cfg.Redis, ObjectCache: a.cfg.ObjectCache, PointReadLanes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	stores := []*Store{a, b}
	owner := mustUser(t, a, "owner")
	board := mustBoard(t, a, owner)
	const nUsers, nPins = 4, 24
	var pins []uint64
	for range nPins {
		pins = append(pins, mustPin(t, a, board))
	}
	var users []uint64
	for i := range nUsers {
		users = append(users, mustUser(t, a, fmt.Sprintf("liker%d", i)))
	}
	acked := make([]atomic.Int64, nUsers) // users[i] likes pins[:acked[i]], acknowledged
	var wg sync.WaitGroup
	for i := range users {
		wg.Go(func() { // users[i] likes the pins in order (i odd: every other), through alternating servers
			for k := range pins {
				if i%2 == 1 && k%2 == 1 {
					acked[i].Add(1)
					continue
				}
				if err := stores[k%2].AddMapping(ctx, model.UserLikes, users[i], pins[k]); err != nil {
					t.Error(err)
					return
				}
				acked[i].Add(1)
				time.Sleep(time.Millisecond)
			}
		})
	}
	var checks, violations atomic.Int64
	done := make(chan struct{})
	var readers sync.WaitGroup
	for r := range 16 {
		readers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 2))
			for {
				select {
				case <-done:
					return
				default:
				}
				i := rng.IntN(nUsers)
				before := int(acked[i].Load())
				got, err := stores[rng.IntN(2)].HasMany(ctx, model.UserLikes, users[i], pins)
				if err != nil {
					t.Error(err)
					return
				}
				checks.Add(1)
				for k, liked := range got {
					odd := i%2 == 1 && k%2 == 1
					if k < before && liked == odd || odd && liked {
						violations.Add(1)
						t.Errorf("user %d, pin %d: liked=%v, with %d likes acknowledged before the check began", i, k, liked, before)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(done)
	readers.Wait()
	if checks.Load() == 0 || violations.Load() != 0 {
		t.Fatalf("%d checks, %d older than acknowledged", checks.Load(), violations.Load())
	}
	var n, stmts float64
	for _, s := range stores {
		n += testutil.ToFloat64(s.edgeStats.Jobs)
		stmts += testutil.ToFloat64(s.edgeStats.Statements)
	}
	if !cached && int64(n) != checks.Load() {
		t.Fatalf("%v edge checks counted for %d checks", n, checks.Load())
	}
	if cached {
		hits := a.objects.cache.EdgeStats().Hits.Load() + b.objects.cache.EdgeStats().Hits.Load()
		if int64(n) >= checks.Load() || hits == 0 {
			t.Fatalf("%v edge checks of MySQL for %d checks, %d edges from the cache: the cache answered none", n, checks.Load(), hits)
		}
	}
	t.Logf("%d checks in %v jobs, %v statements", checks.Load(), n, stmts)
}
