package reshard_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/reshard"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store"
	"github.com/pinstore/pinstore/store/topology"
)

// moveEnv is two MySQL hosts, a map file placing shards 0-3 on h0 (the
// shared MariaDB) and 4-7 on h1 (a started host), and a "server" store
// opened from the file. Moves run as the command runs them, from the map
// file alone.
type moveEnv struct {
	f      fileMap
	a, b   string // DSNs of h0 and h1
	server *store.Store
	dbA    *sql.DB
	dbB    *sql.DB
}

// newMoveEnv builds the hosts, the map file and the server store; with
// watch > 0 the server follows the file every watch.
func newMoveEnv(t *testing.T, watch time.Duration, queryTimeout time.Duration) *moveEnv {
	t.Helper()
	a := testenv.MySQLDSN(t)
	b := testenv.SharedHost(t, "reshard").DSN()
	e := &moveEnv{a: a, b: b}
	e.f = newFileMap(t, fileMap{prefix: testenv.UniquePrefix(t, "mv"), dsns: []string{a, b}}, "{shards: 0-3, host: h0}", "{shards: 4-7, host: h1}")
	e.server = openFile(t, e.f, queryTimeout, true)
	for _, p := range []struct {
		db  **sql.DB
		dsn string
	}{{&e.dbA, a}, {&e.dbB, b}} {
		db, err := sql.Open("mysql", p.dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		*p.db = db
	}
	if watch > 0 {
		wctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.server.Router().Watch(wctx, watch, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		}()
		t.Cleanup(func() {
			cancel()
			<-done
		})
	}
	return e
}

// move runs a move of the env's map file.
func (e *moveEnv) move(opt reshard.Options) (reshard.Report, error) {
	opt.MapFile = e.f.path
	return reshard.Move(ctx, opt)
}

// databases lists the shard databases of the test's prefix on db.
func (e *moveEnv) databases(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ? ORDER BY SCHEMA_NAME", e.f.prefix+"%")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		out = append(out, strings.TrimPrefix(n, e.f.prefix))
	}
	return out
}

func (e *moveEnv) mapText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(e.f.path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDefaultsMatchServers: without a MapPoll, a move settles for the
// interval servers poll the map file at by default.
// TestMoveShardsUnderLoad is the proof: shards 0-3 move from h0 to h1
// while writers create pins and follow and unfollow on them, and a reader
// reads. Every acknowledged write is readable through the store afterwards
// (routed to h1), present in h1's databases, and h0 no longer has them.
func TestMoveShardsUnderLoad(t *testing.T) {
	const poll = 25 * time.Millisecond
	// The servers' default is 5s; 3s keeps the test short while leaving
	// room for the waits a loaded machine adds.
	const queryTimeout = 3 * time.Second
	e := newMoveEnv(t, poll, queryTimeout)
	s := e.server

	users := seedUsers(t, s, 8)
	var boards, seedPins []uint64
	for _, u := range users {
		b := mustBoard(t, s, u)
		boards = append(boards, b)
		for range 10 {
			seedPins = append(seedPins, mustPin(t, s, b))
		}
	}

	// Writers: each owns a follower (so a pair's last operation is known)
	// and creates pins on random boards of the range.
	type writer struct {
		pins     []uint64        // acknowledged pin creations
		follows  map[uint64]bool // followee → state after the last op
		definite map[uint64]bool // followee → the last op was acknowledged
		refused  int
	}
	const nw = 4
	ws := make([]*writer, nw)
	ld := newLoad()
	var unexpected atomic.Value
	fail := func(err error) { unexpected.CompareAndSwap(nil, err) }
	for i := range nw {
		w := &writer{follows: map[uint64]bool{}, definite: map[uint64]bool{}}
		ws[i] = w
		me := users[i]
		others := users[nw:]
		r := rand.New(rand.NewPCG(uint64(i), 7))
		ld.run(func() bool {
			var err error
			switch r.IntN(3) {
			case 0:
				var o model.Object
				// On the writers' own boards: the users they follow keep
				// their ten seed pins, so a follow copies ten into a feed.
				o, err = s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(boards[r.IntN(nw)]), Link: "https://example.com/w"}, 0)
				if err == nil {
					w.pins = append(w.pins, o.ID)
				}
			default:
				to := others[r.IntN(len(others))]
				follow := !w.follows[to]
				if follow {
					err = s.AddMapping(ctx, model.UserFollowing, me, to)
				} else {
					err = s.RemoveMapping(ctx, model.UserFollowing, me, to)
				}
				w.definite[to] = err == nil
				if err == nil {
					w.follows[to] = follow
				}
			}
			switch {
			case err == nil:
			case model.IsCode(err, model.EMoving):
				w.refused++
				time.Sleep(2 * time.Millisecond)
			default:
				fail(err)
				return false
			}
			return true
		})
	}
	// A reader: reads never stop working.
	var reads atomic.Int64
	ld.run(func() bool {
		if _, err := s.GetMany(ctx, seedPins[:20], idcodec.TypePin); err != nil {
			fail(fmt.Errorf("read during the move: %w", err))
			return false
		}
		if _, err := s.List(ctx, model.BoardPins, boards[0], model.Page{Limit: 5}); err != nil {
			fail(fmt.Errorf("list during the move: %w", err))
			return false
		}
		reads.Add(1)
		return true
	})

	time.Sleep(150 * time.Millisecond) // writes flowing before the copy starts
	var out bytes.Buffer
	// The server confirms each map as a server on etcd does: once it
	// routes by it and no write routed by an older one is running. (With
	// the settle time instead, the hold lasts longer than the query
	// timeout, and a follow whose transaction waits in the buffer for the
	// other side's shard, holding its own shard's transaction open, runs
	// out of time.)
	confirm := func(ctx context.Context, version string) error {
		for s.Map().Version() != version {
			if err := ctx.Err(); err != nil {
				return err
			}
			time.Sleep(5 * time.Millisecond)
		}
		return s.Router().Drain(ctx)
	}
	rep, err := e.move(reshard.Options{First: 0, Last: 3, To: "h1", Finish: true, MapPoll: poll, Confirm: confirm, ConfirmDrains: true, Batch: 200, Progress: &out})
	time.Sleep(150 * time.Millisecond) // and after the switch
	ld.halt()
	t.Logf("move output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	if err, _ := unexpected.Load().(error); err != nil {
		t.Fatalf("a writer or reader failed: %v", err)
	}
	t.Logf("report: %+v; reads %d", rep, reads.Load())

	// The map and the hosts.
	if r, _ := s.Map().RangeOf(2); r.Host != "h1" || r.ReadOnly {
		t.Fatalf("server map: shard 2 in %+v", r)
	}
	if _, err := os.Stat(reshard.LockPath(e.f.path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lock file left: %v", err)
	}
	if got := e.databases(t, e.dbA); len(got) != 0 {
		t.Fatalf("h0 still has %v", got)
	}
	if got := e.databases(t, e.dbB); len(got) != testShards {
		t.Fatalf("h1 has %v", got)
	}
	if rep.Shards != 4 || rep.Dropped != 4 || rep.Rows == 0 || rep.Held <= 0 || rep.Copy <= 0 {
		t.Fatalf("report %+v", rep)
	}

	// Every acknowledged write is on h1 and readable through the store.
	var acked, refused, followsChecked int
	for i, w := range ws {
		acked += len(w.pins)
		refused += w.refused
		if got := readable(t, s, w.pins); got != len(w.pins) {
			t.Fatalf("writer %d: %d of %d acknowledged pins readable", i, got, len(w.pins))
		}
		for _, p := range w.pins {
			var n int
			if err := e.dbB.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM %s.pins WHERE local_id = ?", s.Map().DBName(int(idcodec.ShardOf(p)))), idcodec.LocalOf(p)).Scan(&n); err != nil || n != 1 {
				t.Fatalf("pin %d not on h1: %d %v", p, n, err)
			}
		}
		following := map[uint64]bool{}
		for _, id := range listed(t, s, model.UserFollowing, users[i]) {
			following[id] = true
		}
		for to, state := range w.follows {
			if !w.definite[to] {
				continue
			}
			followsChecked++
			if following[to] != state {
				t.Fatalf("writer %d: follows %d = %v, acknowledged %v", i, to, following[to], state)
			}
			back := false
			for _, id := range listed(t, s, model.UserFollowers, to) {
				back = back || id == users[i]
			}
			if back != state {
				t.Fatalf("writer %d: %d's followers include it = %v, acknowledged %v", i, to, back, state)
			}
		}
	}
	// Writes to the range being switched waited in the server's buffer
	// instead of failing: the hold was exercised, and no client saw it.
	waited, expired := s.Router().Buffer().Waited.Load(), s.Router().Buffer().Expired.Load()
	t.Logf("%d pins acknowledged, %d follow pairs checked, %d writes waited while held, %d refused", acked, followsChecked, waited, refused)
	if acked == 0 || waited == 0 || followsChecked == 0 {
		t.Fatalf("the load did not exercise the move: %d acked, %d waited, %d follows", acked, waited, followsChecked)
	}
	if refused != 0 || expired != 0 {
		t.Fatalf("%d writes refused (%d expired in the buffer) during a %v hold: the buffer window is %v", refused, expired, rep.Held, topology.DefaultWriteBuffer)
	}
	if got, err := s.GetMany(ctx, seedPins, idcodec.TypePin); err != nil || len(got) != len(seedPins) {
		t.Fatalf("seed pins: %d of %d, %v", len(got), len(seedPins), err)
	}
	// New writes land on h1, with fresh local ids.
	p := mustPin(t, s, boards[0])
	var n int
	if err := e.dbB.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM %s.pins WHERE local_id = ?", s.Map().DBName(int(idcodec.ShardOf(p)))), idcodec.LocalOf(p)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("new pin not on h1: %v", err)
	}
}

// TestMoveShardsRefused: each bad move is refused and changes nothing: the
// map file, no lock file, no database on the target.
func TestMoveShardsRefused(t *testing.T) {
	e := newMoveEnv(t, 0, 0)
	// h2 is h0 under another name.
	e.f.dsns = append(e.f.dsns, strings.Replace(e.a, "127.0.0.1", "localhost", 1))
	e.f.write(t, "{shards: 0-3, host: h0}", "{shards: 4-7, host: h1}")
	before := e.mapText(t)
	check := func(t *testing.T, opt reshard.Options, code, msg string) {
		t.Helper()
		_, err := e.move(opt)
		if !model.IsCode(err, code) || !strings.Contains(err.Error(), msg) {
			t.Fatalf("error %v, want %s mentioning %q", err, code, msg)
		}
		if got := e.mapText(t); got != before {
			t.Fatalf("map changed:\n%s", got)
		}
		if _, err := os.Stat(reshard.LockPath(e.f.path)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("lock file left: %v", err)
		}
		if got := e.databases(t, e.dbB); strings.Join(got, ",") != "00004,00005,00006,00007" {
			t.Fatalf("target databases %v", got)
		}
	}
	for _, tt := range []struct {
		name        string
		first, last int
		to          string
		code, msg   string
	}{
		{"unknown target", 0, 1, "nope", model.EInvalid, `target host "nope" is not in the shard map`},
		{"outside the map", 6, 9, "h0", model.EInvalid, "outside the map's shards 0-7"},
		{"already there", 4, 5, "h1", model.EConflict, "already on"},
		{"partly there", 2, 5, "h1", model.EConflict, "2 of the shards (4-5)"},
		{"same server", 0, 1, "h2", model.EInvalid, "same MySQL server"},
		{"abort without a move", 0, 1, "h1", model.EInvalid, "no move is in progress"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			check(t, reshard.Options{First: tt.first, Last: tt.last, To: tt.to, Abort: tt.name == "abort without a move"}, tt.code, tt.msg)
		})
	}
	t.Run("leftover on the target", func(t *testing.T) {
		name := e.f.prefix + "00001"
		if _, err := e.dbB.Exec("CREATE DATABASE " + name); err != nil {
			t.Fatal(err)
		}
		_, err := e.move(reshard.Options{First: 0, Last: 1, To: "h1"})
		e.dbB.Exec("DROP DATABASE " + name)
		if !model.IsCode(err, model.EConflict) || !strings.Contains(err.Error(), "already has 1 of the range's databases") {
			t.Fatalf("error %v", err)
		}
		if e.mapText(t) != before {
			t.Fatal("map changed")
		}
	})
	t.Run("another mover running", func(t *testing.T) {
		f, err := os.OpenFile(reshard.LockPath(e.f.path), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		_, err = e.move(reshard.Options{First: 0, Last: 1, To: "h1"})
		f.Close()
		os.Remove(reshard.LockPath(e.f.path))
		if !model.IsCode(err, model.EConflict) || !strings.Contains(err.Error(), "another pinstore move-shards is running") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("nothing left writable", func(t *testing.T) {
		e.f.write(t, "{shards: 0-3, host: h0}", "{shards: 4-7, host: h1, open: false}")
		before := e.mapText(t)
		_, err := e.move(reshard.Options{First: 0, Last: 3, To: "h1"})
		if !model.IsCode(err, model.EInvalid) || !strings.Contains(err.Error(), "no writable range open") {
			t.Fatalf("error %v", err)
		}
		if e.mapText(t) != before {
			t.Fatal("map changed")
		}
	})
	t.Run("no map file", func(t *testing.T) {
		if _, err := reshard.Move(ctx, reshard.Options{First: 0, Last: 1, To: "default"}); !model.IsCode(err, model.EInvalid) {
			t.Fatalf("error %v", err)
		}
	})
}
