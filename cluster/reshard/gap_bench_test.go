package reshard_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/reshard"
	"github.com/pinstore/pinstore/cluster/throttle"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
)

// slowWrite is the write time over which TestMoveWriteGapBench notes when
// a write began.
const slowWrite = 300 * time.Millisecond

// gapClass is a group of writers: the shards they write to and what they
// saw.
type gapClass struct {
	name   string
	boards []uint64

	mu       sync.Mutex
	acked    int
	failed   int
	firstErr string
	longest  time.Duration // the longest a write took
	at       time.Time     // when it began
	slow     []time.Time   // when each write over slowWrite began
	gap      time.Duration // the longest time between two acknowledgements of one writer
	ids      []uint64
}

func (c *gapClass) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.acked, c.failed, c.firstErr, c.longest, c.gap, c.slow = 0, 0, "", 0, 0, nil
}

// TestMoveWriteGapBench measures what writers see during a move at the
// highest write rate the hosts sustain: writers on three groups of shards
// (the moving range, a range staying on the source host, the target
// host's own range), on two servers following the map in etcd with the
// default write buffer, write as fast as they are answered, first for the
// set time without a move (the rate the hosts sustain, and the longest
// write then), then while the moving range moves and finishes. It logs,
// per group, writes a second, the longest write, the longest time between
// two acknowledgements of one writer, and errors, and fails on an error
// or a lost write. PINSTORE_BENCH_MOVE_GAP is the time without a move:
//
//	PINSTORE_BENCH_MOVE_GAP=15s go test -count=1 -run TestMoveWriteGapBench -v -timeout 30m ./cluster/reshard
//
// PINSTORE_BENCH_MOVE_PINS (default 2000) is the pins on each moving shard;
// PINSTORE_BENCH_MOVE_REDO, when set, is the throttle's redo log limit in
// percent (-1: off).
func TestMoveWriteGapBench(t *testing.T) {
	quiet, _ := time.ParseDuration(os.Getenv("PINSTORE_BENCH_MOVE_GAP"))
	if quiet <= 0 {
		t.Skip("set PINSTORE_BENCH_MOVE_GAP to run the move's write gap benchmark")
	}
	perShard := 2000
	if v, _ := strconv.Atoi(os.Getenv("PINSTORE_BENCH_MOVE_PINS")); v > 0 {
		perShard = v
	}
	var lim throttle.Limits
	if v := os.Getenv("PINSTORE_BENCH_MOVE_REDO"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("PINSTORE_BENCH_MOVE_REDO: %v", err)
		}
		lim.RedoLogPercent = n
	}
	const group, writers = 8, 4 // shards per group, writers per group
	// Two private hosts: the machine's shared MariaDB serves other tests,
	// whose DDL stalls its writes now and then.
	a := testenv.SharedHost(t, "bench-gap-a").DSN()
	b := testenv.SharedHost(t, "bench-gap-b").DSN()
	f := newFileMap(t, fileMap{prefix: testenv.UniquePrefix(t, "gap"), dsns: []string{a, b}, shards: 3 * group},
		fmt.Sprintf("{shards: 0-%d, host: h0}", 2*group-1), fmt.Sprintf("{shards: %d-%d, host: h1}", 2*group, 3*group-1))
	s := openFile(t, f, 0, true)

	boards := boardOnEachShard(t, s, 3*group)
	// The moving shards get perShard pins each, cloned in SQL.
	db, err := sql.Open("mysql", a)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for sh := range group {
		p := mustPin(t, s, boards[sh])
		name := s.Map().DBName(sh)
		for _, q := range []string{
			fmt.Sprintf("INSERT INTO %[1]s.pins (doc, version, created_at, updated_at) SELECT JSON_SET(p.doc, '$.description', REPEAT('pin ', 20)), 1, p.created_at, p.updated_at FROM %[1]s.pins p JOIN %[1]s.seq_1_to_%[2]d q WHERE p.local_id = %[3]d", name, perShard-1, idcodec.LocalOf(p)),
			fmt.Sprintf("INSERT INTO %[1]s.board_pins (from_id, to_id, sequence) SELECT %[2]d, (%[3]d << 46) | (1 << 36) | local_id, 1700000000000 + local_id FROM %[1]s.pins WHERE local_id > %[4]d", name, boards[sh], sh, idcodec.LocalOf(p)),
		} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
	}

	c, servers := etcdServers(t, f, s)
	dbB, err := sql.Open("mysql", b)
	if err != nil {
		t.Fatal(err)
	}
	defer dbB.Close()
	hosts := []*hostSignals{{name: "h0", db: db}, {name: "h1", db: dbB}}
	watching, stop := context.WithCancel(ctx)
	defer stop()
	for _, h := range hosts {
		go h.watch(watching)
	}

	classes := []*gapClass{
		{name: "moving range (h0 → h1)", boards: boards[:group]},
		{name: "staying on the source h0", boards: boards[group : 2*group]},
		{name: "on the target h1", boards: boards[2*group:]},
	}
	ld := newLoad()
	for ci, cl := range classes {
		for w := range writers {
			sv := servers[w%2]
			r := rand.New(rand.NewPCG(uint64(ci), uint64(w)))
			last := time.Now()
			ld.run(func() bool {
				start := time.Now()
				o, err := sv.CreatePin(ctx, model.PinDoc{BoardID: model.ID(cl.boards[r.IntN(len(cl.boards))]), Link: "https://example.com/g"}, 0)
				now := time.Now()
				cl.mu.Lock()
				defer cl.mu.Unlock()
				if err != nil {
					cl.failed++
					if cl.firstErr == "" {
						cl.firstErr = err.Error()
					}
					return true
				}
				cl.acked++
				cl.ids = append(cl.ids, o.ID)
				if now.Sub(start) > slowWrite {
					cl.slow = append(cl.slow, start)
				}
				if now.Sub(start) > cl.longest {
					cl.longest, cl.at = now.Sub(start), start
				}
				cl.gap = max(cl.gap, now.Sub(last))
				last = now
				return true
			})
		}
	}
	var began time.Time
	report := func(phase string, d time.Duration) {
		var around []time.Duration // when a write over 600 ms began
		for _, cl := range classes {
			if cl.longest > 2*slowWrite {
				around = append(around, cl.at.Sub(began))
			}
		}
		for _, h := range hosts {
			h.report(t, phase, around)
		}
		for _, cl := range classes {
			cl.mu.Lock()
			var slow []string
			for _, at := range cl.slow {
				slow = append(slow, fmt.Sprintf("%.1fs", at.Sub(began).Seconds()))
			}
			t.Logf("BENCH %s, %s: %.0f writes/s, longest write %v (from %v), longest gap between a writer's acknowledgements %v, %d failed %q; writes over %v began at %s",
				phase, cl.name, float64(cl.acked)/d.Seconds(), round(cl.longest), round(cl.at.Sub(began)), round(cl.gap), cl.failed, cl.firstErr, slowWrite, strings.Join(slow, " "))
			cl.mu.Unlock()
		}
	}

	time.Sleep(2 * time.Second) // warm up
	for _, cl := range classes {
		cl.reset()
	}
	began = time.Now()
	for _, h := range hosts {
		h.restart()
	}
	time.Sleep(quiet)
	report("without a move", quiet)
	for _, cl := range classes {
		cl.reset()
	}
	began = time.Now()
	for _, h := range hosts {
		h.restart()
	}
	rep, err := reshard.Move(ctx, reshard.Options{
		First: 0, Last: group - 1, To: "h1", Home: etcdHome{c.Home()}, Finish: os.Getenv("PINSTORE_BENCH_MOVE_NOFINISH") == "", Progress: elapsedWriter{t, began}, Throttle: lim,
		Confirm: func(ctx context.Context, v string) error {
			_, err := c.WaitDrained(ctx, v, time.Minute)
			return err
		},
		ConfirmDrains: true,
	})
	took := time.Since(began)
	report("during the move", took)
	ld.halt()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("BENCH the move: %d shards, %d rows; copy and catch-up %v (%d passes, %d changes); writes held off %v (%v; final pass: %d changes, %d keys verified); total %v",
		rep.Shards, rep.Rows, round(rep.Copy), rep.Passes, rep.CatchUp, round(rep.Held), rep.Phases, rep.FinalRows, rep.Verified, round(rep.Total))
	var ids []uint64
	for _, cl := range classes {
		if cl.failed > 0 {
			t.Errorf("%s: %d writes failed (first: %s)", cl.name, cl.failed, cl.firstErr)
		}
		ids = append(ids, cl.ids...)
	}
	if got := readable(t, servers[1], ids); got != len(ids) {
		t.Fatalf("%d of %d acknowledged pins readable", got, len(ids))
	}
}

// elapsedWriter sends progress lines to t.Log with the time since start.
type elapsedWriter struct {
	t     *testing.T
	start time.Time
}

func (w elapsedWriter) Write(p []byte) (int, error) {
	w.t.Logf("+%v %s", round(time.Since(w.start)), strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
