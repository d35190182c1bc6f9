package reshard_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/reshard"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store"
	"github.com/pinstore/pinstore/store/topology"
)

// TestMoveShardsBench measures a move of PINSTORE_BENCH_MOVE_SHARDS shards
// (e.g. 256) of about PINSTORE_BENCH_MOVE_PINS pins each (default 1000)
// from the shared MariaDB to a second local host, and finishes it, with
// production defaults (map poll DefaultMapPoll, query timeout 5s, so settle
// 9s) and two writers creating pins on the moving shards. It is skipped
// unless the variable is set:
//
//	PINSTORE_BENCH_MOVE_SHARDS=256 go test -count=1 -run TestMoveShardsBench -v -timeout 30m ./cluster/reshard
//
// With PINSTORE_BENCH_MOVE_TOPOLOGY=etcd the same data moves the way a
// fleet on etcd moves it (benchEtcdMove): the map in a real etcd, two
// servers following it with the default write buffer, one writer on each.
func TestMoveShardsBench(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PINSTORE_BENCH_MOVE_SHARDS"))
	if n <= 0 {
		t.Skip("set PINSTORE_BENCH_MOVE_SHARDS to run the move benchmark")
	}
	perShard := 1000
	if v, _ := strconv.Atoi(os.Getenv("PINSTORE_BENCH_MOVE_PINS")); v > 0 {
		perShard = v
	}
	a := testenv.MySQLDSN(t)
	b := testenv.SharedHost(t, "bench-move").DSN()
	f := newFileMap(t, fileMap{prefix: testenv.UniquePrefix(t, "bm"), dsns: []string{a, b}, shards: n + 4},
		fmt.Sprintf("{shards: 0-%d, host: h0}", n-1), fmt.Sprintf("{shards: %d-%d, host: h1, open: false}", n, n+3))
	begin := time.Now()
	s := openFile(t, f, 0, true)
	t.Logf("migrated %d shards in %v", n+4, time.Since(begin).Round(time.Millisecond))

	// One user, board and pin per shard through the API, then the pin
	// cloned in SQL to perShard pins with their board_pins and user_pins.
	begin = time.Now()
	boards := boardOnEachShard(t, s, n)
	db, err := sql.Open("mysql", a)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var seeded atomic.Int64
	var wg sync.WaitGroup
	work := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sh := range work {
				p := mustPin(t, s, boards[sh])
				obj, _ := s.Get(ctx, boards[sh], idcodec.TypeBoard)
				owner := ownerOf(t, obj.Doc)
				name := s.Map().DBName(sh)
				local := idcodec.LocalOf(p)
				for _, q := range []string{
					fmt.Sprintf("INSERT INTO %[1]s.pins (doc, version, created_at, updated_at) SELECT JSON_SET(p.doc, '$.link', CONCAT('https://example.com/p/', q.seq), '$.description', REPEAT('pin ', 20)), 1, p.created_at, p.updated_at FROM %[1]s.pins p JOIN %[1]s.seq_1_to_%[2]d q WHERE p.local_id = %[3]d", name, perShard-1, local),
					fmt.Sprintf("INSERT INTO %[1]s.board_pins (from_id, to_id, sequence) SELECT %[2]d, (%[3]d << 46) | (1 << 36) | local_id, 1700000000000 + local_id FROM %[1]s.pins WHERE local_id > %[4]d", name, boards[sh], sh, local),
					fmt.Sprintf("INSERT INTO %[1]s.user_pins (from_id, to_id, sequence) SELECT %[2]d, (%[3]d << 46) | (1 << 36) | local_id, 1700000000000 + local_id FROM %[1]s.pins WHERE local_id > %[4]d", name, owner, sh, local),
					fmt.Sprintf("UPDATE %s.mapping_counts SET n = n + %d WHERE (from_id = %d AND mapping = %d) OR (from_id = %d AND mapping = %d)", name, perShard-1, boards[sh], uint8(model.BoardPins), owner, uint8(model.UserPins)),
				} {
					if _, err := db.Exec(q); err != nil {
						t.Error(err)
						return
					}
				}
				seeded.Add(int64(perShard))
			}
		}()
	}
	for sh := range n {
		work <- sh
	}
	close(work)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if c := count(t, s, model.BoardPins, boards[0]); c != int64(perShard) {
		t.Fatalf("board 0 has %d pins", c)
	}
	t.Logf("seeded %d pins on %d shards in %v", seeded.Load(), n, time.Since(begin).Round(time.Millisecond))

	// Open h1's range so that new users have somewhere to go while the
	// moving range is read-only.
	f.write(t, fmt.Sprintf("{shards: 0-%d, host: h0}", n-1), fmt.Sprintf("{shards: %d-%d, host: h1}", n, n+3))
	if err := s.Router().ReloadFile(); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("PINSTORE_BENCH_MOVE_TOPOLOGY") == "etcd" {
		benchEtcdMove(t, f, s, n, boards, seeded.Load())
		return
	}
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Router().Watch(wctx, topology.DefaultMapPoll, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ld := newLoad()
	var acked, refused atomic.Int64
	var wrote sync.Mutex
	var ackedPins []uint64
	for i := range 2 {
		r := rand.New(rand.NewPCG(uint64(i), 9))
		ld.run(func() bool {
			o, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(boards[r.IntN(n)]), Link: "https://example.com/w"}, 0)
			time.Sleep(5 * time.Millisecond)
			switch {
			case err == nil:
				acked.Add(1)
				wrote.Lock()
				ackedPins = append(ackedPins, o.ID)
				wrote.Unlock()
			case model.IsCode(err, model.EMoving):
				refused.Add(1)
				time.Sleep(10 * time.Millisecond)
			default:
				t.Error(err)
				return false
			}
			return true
		})
	}
	rep, err := reshard.Move(ctx, reshard.Options{First: 0, Last: n - 1, To: "h1", MapFile: f.path, Finish: true, Progress: testWriter{t}})
	ld.halt()
	if err != nil {
		t.Fatal(err)
	}
	if got := readable(t, s, ackedPins); got != len(ackedPins) {
		t.Fatalf("%d of %d acknowledged pins readable", got, len(ackedPins))
	}
	t.Logf("BENCH move-shards: %d shards, %d rows (%d pins seeded); copy and catch-up %v (%d passes, %d changes); writes held off %v (settle %v + final pass %v: %d changes applied, %d keys verified); total %v; writers: %d pins acknowledged, %d refused while held",
		rep.Shards, rep.Rows, seeded.Load(), round(rep.Copy), rep.Passes, rep.CatchUp, round(rep.Held), topology.DefaultMapPoll+5*time.Second+2*time.Second, round(rep.Final), rep.FinalRows, rep.Verified, round(rep.Total), acked.Load(), refused.Load())
}

// testWriter sends progress lines to t.Log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func ownerOf(t *testing.T, doc []byte) uint64 {
	t.Helper()
	d, err := model.DecodeDoc(idcodec.TypeBoard, doc)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(d.(*model.BoardDoc).OwnerID)
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// count is the length of a list as the store keeps it.
func count(t *testing.T, s *store.Store, m model.Mapping, from uint64) int64 {
	t.Helper()
	n, err := s.Count(ctx, m, from)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
