package store

import (
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/replicas"
	"github.com/pinstore/pinstore/store/shardsql"
)

// replicated starts a MariaDB master and a replica of it that applies
// every transaction delay seconds late (MASTER_DELAY), replicating from
// the start of the master's binary log, and returns their root DSNs.
func replicated(t *testing.T, delay int) (master, replica *testenv.Host) {
	t.Helper()
	master = testenv.ReplicationHost(t, "st-master", 1, testenv.SemiSyncMasterArgs...)
	replica = testenv.ReplicationHost(t, "st-replica", 2, append(testenv.SemiSyncReplicaArgs, "--read-only=ON")...)
	replica.Exec(t, "SET GLOBAL gtid_slave_pos = ''",
		"CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = "+strconv.Itoa(master.Port())+", MASTER_USER = 'root', MASTER_USE_GTID = slave_pos, MASTER_DELAY = "+strconv.Itoa(delay),
		"START SLAVE")
	return master, replica
}

// TestCacheNeverServesAnOlderVersionWithReplicas is the never-stale test
// with replica reads on, through a replica three seconds behind its master
// (long enough that a loaded machine's create and page read fit inside it)
// and a lag bound that lets it serve: object reads still never return a
// version older than one acknowledged before they began, because the
// cache is filled from masters only. The replica does serve the reads
// that fill nothing: a list page the cache does not hold, read through
// it, misses a pin the master has, so the set-up is not reading masters
// alone.
func TestCacheNeverServesAnOlderVersionWithReplicas(t *testing.T) {
	master, replica := replicated(t, 3)
	tune := func(c *Config) {
		h := c.Map.Hosts["h0"].WithReplicas([]string{replica.DSN()})
		h.ReplicaReads = true
		c.Map.Hosts["h0"] = h
		c.Replicas.LagBound = 10 * time.Second
		c.Registerer = prometheus.NewRegistry()
	}
	a, m := openTestWith(t, tune, master.DSN())
	b, err := Open(ctx, Config{Map: m, CursorSecret: []byte("test"), Redis: a.cfg.Redis, ObjectCache: a.cfg.ObjectCache, Replicas: a.cfg.Replicas, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rctx := replicas.WithRequest(ctx, nil, false)

	// The replica serves: a list page read while it is seconds behind
	// misses a pin the master has.
	u := mustUser(t, a, "replicated")
	bd := mustBoard(t, a, u)
	h := a.router.Current().Hosts()[0]
	waitUntil(t, 20*time.Second, "the replica to serve, with the board", func() bool {
		if _, ok := a.replicas.Lag(h, h.Replicas[0]); !ok {
			return false
		}
		sh, local, err := a.router.Current().Route(bd, idcodec.TypeBoard)
		if err != nil {
			t.Fatal(err)
		}
		_, err = shardsql.ReadObject(ctx, h.Replicas[0].DB, sh.DB, idcodec.TypeBoard, local, shardsql.NoLock)
		return err == nil
	})
	if _, err := a.CreatePin(ctx, model.PinDoc{BoardID: model.ID(bd)}, 0); err != nil {
		t.Fatal(err)
	}
	before := testutil.ToFloat64(replicaReads(a))
	// A first page is the cache's (filled from the master, pagecache.go):
	// a time range is read where reads go.
	l, err := a.List(rctx, model.BoardPins, bd, model.Page{Since: time.UnixMilli(1)})
	if err != nil || len(l.Entries) != 0 {
		t.Fatalf("a page read from the replica seconds behind: %v, %d entries; want the replica's (no pins)", err, len(l.Entries))
	}
	if testutil.ToFloat64(replicaReads(a)) == before {
		t.Fatal("the page was not read from the replica")
	}
	if got, err := a.Get(rctx, bd, idcodec.TypeBoard); err != nil || got.Counts[0] != 1 {
		t.Fatalf("the board read through the cache: %v, counts %v; want the master's (1 pin)", err, got.Counts)
	}
	neverOlder(t, []*Store{a, b}, rctx)
}

// replicaReads is the tracker's count of reads sent to replicas.
func replicaReads(s *Store) prometheus.Counter {
	return s.replicas.ReadsToReplicas()
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: still waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
