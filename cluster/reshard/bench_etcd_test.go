package reshard_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/etcdtopo"
	"github.com/pinstore/pinstore/cluster/reshard"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store"
	"github.com/pinstore/pinstore/store/shardmap"
)

// etcdHome is the etcd topology as reshard.Home (cmd/pinstore has the same).
type etcdHome struct{ etcdtopo.Home }

func (h etcdHome) LockMoves(ctx context.Context) (reshard.MoveLock, error) {
	return h.Home.LockMoves(ctx)
}

// followEtcd makes s follow the map in etcd as `pinstore serve` does:
// new maps put in force, registered with the version it routes by and
// drained.
func followEtcd(t *testing.T, c *etcdtopo.Client, s *store.Store, id string, rev int64) {
	t.Helper()
	m := s.Map()
	f := c.Follow(ctx, rev, m.Version(), etcdtopo.FollowConfig{
		ID: id, Addr: id, Shards: m.Shards, DBPrefix: m.DBPrefix, Drain: s.Router().Drain,
		Apply: func(m *shardmap.Map, _ int64) error {
			if m.Version() == s.Map().Version() {
				return nil
			}
			return s.Router().Reload(m)
		},
	})
	t.Cleanup(f.Close)
}

// benchEtcdMove moves shards 0 … n-1 of f (seeded, s open on it) with the
// map in etcd: two servers (stores) follow it, each with the default write
// buffer and one writer creating pins on the moving shards.
func benchEtcdMove(t *testing.T, f fileMap, s *store.Store, n int, boards []uint64, seeded int64) {
	c, servers := etcdServers(t, f, s)
	ld := newLoad()
	var acked, failed atomic.Int64
	var wrote sync.Mutex
	var ackedPins []uint64
	var firstErr atomic.Value
	for i, sv := range servers {
		r := rand.New(rand.NewPCG(uint64(i), 9))
		ld.run(func() bool {
			o, err := sv.CreatePin(ctx, model.PinDoc{BoardID: model.ID(boards[r.IntN(n)]), Link: "https://example.com/w"}, 0)
			time.Sleep(5 * time.Millisecond)
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
				time.Sleep(10 * time.Millisecond)
				return true
			}
			acked.Add(1)
			wrote.Lock()
			ackedPins = append(ackedPins, o.ID)
			wrote.Unlock()
			return true
		})
	}
	time.Sleep(time.Second)
	rep, err := reshard.Move(ctx, reshard.Options{
		First: 0, Last: n - 1, To: "h1", Home: etcdHome{c.Home()}, Finish: true, Progress: testWriter{t},
		Confirm: func(ctx context.Context, v string) error {
			_, err := c.WaitDrained(ctx, v, time.Minute)
			return err
		},
		ConfirmDrains: true,
	})
	time.Sleep(time.Second)
	ld.halt()
	if err != nil {
		t.Fatal(err)
	}
	if got := readable(t, servers[1], ackedPins); got != len(ackedPins) {
		t.Fatalf("%d of %d acknowledged pins readable", got, len(ackedPins))
	}
	var waited, expired int64
	for _, sv := range servers {
		waited += sv.Router().Buffer().Waited.Load()
		expired += sv.Router().Buffer().Expired.Load()
	}
	first, _ := firstErr.Load().(string)
	t.Logf("BENCH move-shards on etcd: %d shards, %d rows (%d pins seeded); copy and catch-up %v (%d passes, %d changes); writes held off %v (final pass %v: %d changes applied, %d keys verified); total with --finish %v; two writers on two servers: %d pins acknowledged, %d writes failed (first: %q); writes that waited in a server's buffer: %d, of which refused after the window: %d",
		rep.Shards, rep.Rows, seeded, round(rep.Copy), rep.Passes, rep.CatchUp, round(rep.Held), round(rep.Final), rep.FinalRows, rep.Verified, round(rep.Total), acked.Load(), failed.Load(), first, waited, expired)
	if failed.Load() > 0 || expired > 0 {
		t.Errorf("writers saw %d errors, %d writes refused after the buffer window", failed.Load(), expired)
	}
}

// etcdServers puts s's map in a new etcd and returns its client and two
// servers following it: s, and a second store on f.
func etcdServers(t *testing.T, f fileMap, s *store.Store) (*etcdtopo.Client, []*store.Store) {
	t.Helper()
	e := testenv.StartEtcd(t, 1)
	u, _ := etcdtopo.ParseURL(e.URL(f.prefix))
	c, err := etcdtopo.Dial(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	rev, err := c.PutMap(ctx, s.Map(), 0, "bench")
	if err != nil {
		t.Fatal(err)
	}
	servers := []*store.Store{s, openFile(t, f, 0, false)}
	for i, sv := range servers {
		followEtcd(t, c, sv, "server"+string(rune('a'+i)), rev)
	}
	return c, servers
}

// boardOnEachShard creates users until one lives on each of the n shards,
// and a board for each: the boards, by shard.
func boardOnEachShard(t *testing.T, s *store.Store, n int) []uint64 {
	t.Helper()
	boards := make([]uint64, n)
	for have, i := 0, 0; have < n; i++ {
		if i > 100*n {
			t.Fatal("users never cover every shard")
		}
		u := mustUser(t, s, fmt.Sprintf("u%d", i))
		if sh := idcodec.ShardOf(u); boards[sh] == 0 {
			boards[sh] = mustBoard(t, s, u)
			have++
		}
	}
	return boards
}
