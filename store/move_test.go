package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

func TestKeyCond(t *testing.T) {
	tb := tableInfo{name: "m", cols: []string{"from_id", "to_id", "sequence"}, pk: []int{0, 1}}
	where, args := tb.keyCond([]any{1, 2}, []any{3, 4})
	want := " WHERE ((`from_id` > ?) OR (`from_id` = ? AND `to_id` > ?)) AND ((`from_id` < ?) OR (`from_id` = ? AND `to_id` < ?) OR (`from_id` = ? AND `to_id` = ?))"
	if where != want || fmt.Sprint(args) != "[1 1 2 3 3 4 3 4]" {
		t.Fatalf("got %s %v", where, args)
	}
	if w, a := tb.keyCond(nil, nil); w != "" || a != nil {
		t.Fatalf("open range: %q %v", w, a)
	}
}

// moveEnv is two MySQL hosts, a map file placing shards 0-3 on h0 (the
// shared MariaDB) and 4-7 on h1 (a started host), a "server" store that
// follows the file, and a "mover" store as the command opens it.
type moveEnv struct {
	f      fileMap
	a, b   string // DSNs of h0 and h1
	server *Store
	mover  *Store
	dbA    *sql.DB
	dbB    *sql.DB
}

func newMoveEnv(t *testing.T, watch time.Duration, queryTimeout time.Duration) *moveEnv {
	t.Helper()
	a := testenv.MySQLDSN(t)
	b := testenv.SharedHost(t, "store-move").DSN()
	e := &moveEnv{a: a, b: b}
	e.f = newFileMap(t, []string{a, b}, "{shards: 0-3, host: h0}", "{shards: 4-7, host: h1}")
	e.server = openFile(t, e.f, queryTimeout, true)
	m, err := shardmap.Load(e.f.path, shardmap.DefaultShards, shardmap.DefaultDBPrefix)
	if err != nil {
		t.Fatal(err)
	}
	e.mover, err = Open(context.Background(), Config{Map: m, MapFile: e.f.path, CursorSecret: []byte("x"), Redis: RedisConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.mover.Close() })
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
			e.server.WatchMap(wctx, watch, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
		}()
		t.Cleanup(func() {
			cancel()
			<-done
		})
	}
	return e
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

// seedUsers creates users until n of them are on shards 0-3.
func seedUsers(t *testing.T, s *Store, n int) []uint64 {
	t.Helper()
	var out []uint64
	for i := 0; len(out) < n; i++ {
		if i > 50*n {
			t.Fatal("users never land on shards 0-3")
		}
		u := mustUser(t, s, fmt.Sprintf("u%d", i))
		if idcodec.ShardOf(u) < 4 {
			out = append(out, u)
		}
	}
	return out
}

// TestMoveShardsUnderLoad is the proof: shards 0-3 move from h0 to h1
// while writers create pins and follow and unfollow on them, and a reader
// reads. Every acknowledged write is readable through the store afterwards
// (routed to h1), present in h1's databases, and h0 no longer has them.
func TestMoveShardsUnderLoad(t *testing.T) {
	const poll = 25 * time.Millisecond
	const queryTimeout = time.Second
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
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var unexpected atomic.Value
	fail := func(err error) { unexpected.CompareAndSwap(nil, err) }
	for i := range nw {
		w := &writer{follows: map[uint64]bool{}, definite: map[uint64]bool{}}
		ws[i] = w
		me := users[i]
		others := users[nw:]
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				switch r.IntN(3) {
				case 0:
					var o model.Object
					o, err = s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(boards[r.IntN(len(boards))]), Link: "https://example.com/w"}, 0)
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
					return
				}
			}
		}()
	}
	// A reader: reads never stop working.
	var reads atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.GetMany(ctx, seedPins[:20], idcodec.TypePin); err != nil {
				fail(fmt.Errorf("read during the move: %w", err))
				return
			}
			if _, err := s.List(ctx, model.BoardPins, boards[0], model.Page{Limit: 5}); err != nil {
				fail(fmt.Errorf("list during the move: %w", err))
				return
			}
			reads.Add(1)
		}
	}()

	time.Sleep(150 * time.Millisecond) // writes flowing before the copy starts
	var out bytes.Buffer
	rep, err := e.mover.MoveShards(ctx, MoveOptions{First: 0, Last: 3, To: "h1", MapPoll: poll, Settle: poll + queryTimeout + 200*time.Millisecond, Batch: 50, Progress: &out})
	time.Sleep(150 * time.Millisecond) // and after the switch
	close(stop)
	wg.Wait()
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
	if _, err := os.Stat(MoveLockPath(e.f.path)); !errors.Is(err, os.ErrNotExist) {
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
		for _, id := range all(t, s, model.UserFollowing, users[i], 100, false) {
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
			for _, id := range all(t, s, model.UserFollowers, to, 100, false) {
				back = back || id == users[i]
			}
			if back != state {
				t.Fatalf("writer %d: %d's followers include it = %v, acknowledged %v", i, to, back, state)
			}
		}
	}
	t.Logf("%d pins acknowledged, %d follow pairs checked, %d writes refused while held", acked, followsChecked, refused)
	if acked == 0 || refused == 0 || followsChecked == 0 {
		t.Fatalf("the load did not exercise the move: %d acked, %d refused, %d follows", acked, refused, followsChecked)
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
	check := func(t *testing.T, opt MoveOptions, code, msg string) {
		t.Helper()
		_, err := e.mover.MoveShards(ctx, opt)
		if !model.IsCode(err, code) || !strings.Contains(err.Error(), msg) {
			t.Fatalf("error %v, want %s mentioning %q", err, code, msg)
		}
		if got := e.mapText(t); got != before {
			t.Fatalf("map changed:\n%s", got)
		}
		if _, err := os.Stat(MoveLockPath(e.f.path)); !errors.Is(err, os.ErrNotExist) {
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
			check(t, MoveOptions{First: tt.first, Last: tt.last, To: tt.to, Abort: tt.name == "abort without a move"}, tt.code, tt.msg)
		})
	}
	t.Run("leftover on the target", func(t *testing.T) {
		name := e.f.prefix + "00001"
		if _, err := e.dbB.Exec("CREATE DATABASE " + name); err != nil {
			t.Fatal(err)
		}
		_, err := e.mover.MoveShards(ctx, MoveOptions{First: 0, Last: 1, To: "h1"})
		e.dbB.Exec("DROP DATABASE " + name)
		if !model.IsCode(err, model.EConflict) || !strings.Contains(err.Error(), "already has 1 of the range's databases") {
			t.Fatalf("error %v", err)
		}
		if e.mapText(t) != before {
			t.Fatal("map changed")
		}
	})
	t.Run("another mover running", func(t *testing.T) {
		f, err := os.OpenFile(MoveLockPath(e.f.path), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		_, err = e.mover.MoveShards(ctx, MoveOptions{First: 0, Last: 1, To: "h1"})
		f.Close()
		os.Remove(MoveLockPath(e.f.path))
		if !model.IsCode(err, model.EConflict) || !strings.Contains(err.Error(), "another pinstore move-shards is running") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("nothing left writable", func(t *testing.T) {
		e.f.write(t, "{shards: 0-3, host: h0}", "{shards: 4-7, host: h1, open: false}")
		before := e.mapText(t)
		_, err := e.mover.MoveShards(ctx, MoveOptions{First: 0, Last: 3, To: "h1"})
		if !model.IsCode(err, model.EInvalid) || !strings.Contains(err.Error(), "no writable range open") {
			t.Fatalf("error %v", err)
		}
		if e.mapText(t) != before {
			t.Fatal("map changed")
		}
	})
	t.Run("no map file", func(t *testing.T) {
		m, _ := shardmap.SingleHost(e.a, testShards, e.f.prefix)
		plain, err := Open(ctx, Config{Map: m, CursorSecret: []byte("x"), Redis: RedisConfig{Disabled: true}})
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		if _, err := plain.MoveShards(ctx, MoveOptions{First: 0, Last: 1, To: "default"}); !model.IsCode(err, model.EInvalid) {
			t.Fatalf("error %v", err)
		}
	})
}

var errKilled = errors.New("killed by the test")

// TestMoveShardsResumes kills a move at each step and runs it again; it
// also aborts one and fails one verification.
func TestMoveShardsResumes(t *testing.T) {
	e := newMoveEnv(t, 0, 0)
	s := e.mover
	users := seedUsers(t, s, 4)
	var pins []uint64
	for _, u := range users {
		b := mustBoard(t, s, u)
		for range 5 {
			pins = append(pins, mustPin(t, s, b))
		}
	}
	// Text that a careless copy would mangle: multi-byte UTF-8, quotes,
	// backslashes, NUL.
	const odd = "café 🎉 \"it's\" \\ back\x00slash"
	oddPin, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(mustBoard(t, s, users[0])), Link: "https://example.com/odd", Description: odd}, 0)
	if err != nil {
		t.Fatal(err)
	}
	pins = append(pins, oddPin.ID)
	allThere := func(t *testing.T) {
		t.Helper()
		if err := s.ReloadFile(); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetMany(ctx, pins, idcodec.TypePin)
		if err != nil || len(got) != len(pins) {
			t.Fatalf("%d of %d pins: %v", len(got), len(pins), err)
		}
		if last := got[len(got)-1]; !bytes.Equal(last.Doc, oddPin.Doc) || !last.CreatedAt.Equal(oddPin.CreatedAt) {
			t.Fatalf("pin changed in the move:\n%s %v\n%s %v", last.Doc, last.CreatedAt, oddPin.Doc, oddPin.CreatedAt)
		}
	}
	move := func(opt MoveOptions) (MoveReport, error) {
		opt.Settle = 50 * time.Millisecond
		opt.Batch = 7
		return s.MoveShards(ctx, opt)
	}
	killAt := func(step string) func(string) error {
		return func(s string) error {
			if s == step {
				return errKilled
			}
			return nil
		}
	}
	lockStep := func(t *testing.T) string {
		t.Helper()
		b, err := os.ReadFile(MoveLockPath(e.f.path))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "step: "); ok {
				return v
			}
		}
		t.Fatalf("no step in\n%s", b)
		return ""
	}

	t.Run("auto increment kept", func(t *testing.T) {
		// Ids handed out by rolled-back inserts are not handed out again.
		shard2 := e.f.prefix + "00002"
		if _, err := e.dbA.Exec("ALTER TABLE " + shard2 + ".pins AUTO_INCREMENT = 5000"); err != nil {
			t.Fatal(err)
		}
		if _, err := move(MoveOptions{First: 0, Last: 3, To: "h1"}); err != nil {
			t.Fatal(err)
		}
		allThere(t)
		var ai int64
		if err := e.dbB.QueryRow("SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'pins'", shard2).Scan(&ai); err != nil || ai < 5000 {
			t.Fatalf("AUTO_INCREMENT on the target = %d, %v", ai, err)
		}
		if _, err := move(MoveOptions{First: 0, Last: 3, To: "h0"}); err != nil { // and back
			t.Fatal(err)
		}
		allThere(t)
	})

	for _, step := range []string{"copy", "copied", "held", "final", "switched"} {
		t.Run("killed at "+step, func(t *testing.T) {
			from, to, dbFrom, dbTo := "h0", "h1", e.dbA, e.dbB
			if r, _ := s.Map().RangeOf(0); r.Host == "h1" {
				from, to, dbFrom, dbTo = to, from, dbTo, dbFrom
			}
			_, err := move(MoveOptions{First: 0, Last: 3, To: to, hook: killAt(step)})
			if !errors.Is(err, errKilled) {
				t.Fatalf("error %v", err)
			}
			if _, err := os.Stat(MoveLockPath(e.f.path)); err != nil {
				t.Fatalf("no lock file after the kill: %v", err)
			}
			allThere(t)
			if _, err := move(MoveOptions{First: 0, Last: 1, To: to}); !model.IsCode(err, model.EConflict) || !strings.Contains(err.Error(), "is in progress") {
				t.Fatalf("another move during this one: %v", err)
			}
			rep, err := move(MoveOptions{First: 0, Last: 3, To: to})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Resumed == "" {
				t.Fatalf("not resumed: %+v", rep)
			}
			allThere(t)
			if r, _ := s.Map().RangeOf(3); r.Host != to || r.ReadOnly {
				t.Fatalf("range %+v", r)
			}
			if got := e.databases(t, dbFrom); slicesContain(got, "00000") {
				t.Fatalf("%s still has shard 0: %v", from, got)
			}
			if got := e.databases(t, dbTo); !slicesContain(got, "00003") {
				t.Fatalf("%s lacks shard 3: %v", to, got)
			}
		})
	}

	t.Run("abort while held", func(t *testing.T) {
		if _, err := move(MoveOptions{First: 0, Last: 1, To: "h0", hook: killAt("held")}); !errors.Is(err, errKilled) {
			t.Fatalf("error %v", err)
		}
		if r, _ := s.Map().RangeOf(0); !r.ReadOnly {
			t.Fatalf("range %+v not read-only", r)
		}
		rep, err := move(MoveOptions{First: 0, Last: 1, To: "h0", Abort: true})
		if err != nil || !rep.Aborted {
			t.Fatalf("abort: %+v %v", rep, err)
		}
		allThere(t)
		if r, _ := s.Map().RangeOf(0); r.Host != "h1" || r.ReadOnly {
			t.Fatalf("range %+v", r)
		}
		if got := e.databases(t, e.dbA); slicesContain(got, "00000") {
			t.Fatalf("copies left on h0: %v", got)
		}
		if _, err := os.Stat(MoveLockPath(e.f.path)); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("lock file left")
		}
	})

	t.Run("verification fails", func(t *testing.T) {
		// A write acknowledged just before the hold (the final pass must
		// copy its chunk), then one that reaches the source while the
		// final pass runs (it outlived the settle time): the chunk's
		// verification fails and the move rolls back.
		shard0 := e.f.prefix + "00000"
		hook := func(step string) error {
			var q string
			switch step {
			case "held":
				q = "INSERT INTO " + shard0 + ".user_pins (from_id, to_id, sequence) VALUES (1, 2, 3)"
			case "chunk copied: user_pins":
				q = "INSERT INTO " + shard0 + ".user_pins (from_id, to_id, sequence) VALUES (1, 3, 3)"
			default:
				return nil
			}
			_, err := e.dbB.Exec(q)
			return err
		}
		_, err := move(MoveOptions{First: 0, Last: 3, To: "h0", hook: hook})
		if !model.IsCode(err, model.EConflict) || !strings.Contains(err.Error(), "verification failed") || !strings.Contains(err.Error(), "user_pins") {
			t.Fatalf("error %v", err)
		}
		if r, _ := s.Map().RangeOf(0); r.Host != "h1" || r.ReadOnly {
			t.Fatalf("range %+v", r)
		}
		if lockStep(t) != stepAborted {
			t.Fatalf("lock step %q", lockStep(t))
		}
		allThere(t)
		// Running it again copies the late rows too.
		if _, err := move(MoveOptions{First: 0, Last: 3, To: "h0"}); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := e.dbA.QueryRow("SELECT COUNT(*) FROM " + shard0 + ".user_pins WHERE from_id = 1").Scan(&n); err != nil || n != 2 {
			t.Fatalf("late rows on h0: %d %v", n, err)
		}
		allThere(t)
	})

	t.Run("late write after the switch", func(t *testing.T) {
		// A write that reaches the source after the final pass: the check
		// before the drop keeps that source database.
		shard1 := e.f.prefix + "00001"
		hook := func(step string) error {
			if step != "switched" {
				return nil
			}
			_, err := e.dbA.Exec("INSERT INTO " + shard1 + ".user_pins (from_id, to_id, sequence) VALUES (7, 8, 9)")
			return err
		}
		_, err := move(MoveOptions{First: 0, Last: 3, To: "h1", hook: hook})
		if !model.IsCode(err, model.EConflict) || !strings.Contains(err.Error(), "source shards 1 changed after the final verify") {
			t.Fatalf("error %v", err)
		}
		if got := e.databases(t, e.dbA); !slicesContain(got, "00001") || slicesContain(got, "00000") {
			t.Fatalf("h0 has %v; want shard 1 kept, the others dropped", got)
		}
		allThere(t)
		if _, err := move(MoveOptions{First: 0, Last: 3, To: "h1"}); !model.IsCode(err, model.EConflict) {
			t.Fatalf("rerun without --keep-source: %v", err)
		}
		if _, err := move(MoveOptions{First: 0, Last: 3, To: "h1", KeepSource: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(MoveLockPath(e.f.path)); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("lock file left")
		}
		allThere(t)
	})
}

// readable counts the pins among ids that the store returns.
func readable(t *testing.T, s *Store, ids []uint64) int {
	t.Helper()
	n := 0
	for len(ids) > 0 {
		k := min(len(ids), MaxGetMany)
		got, err := s.GetMany(ctx, ids[:k], idcodec.TypePin)
		if err != nil {
			t.Fatal(err)
		}
		n += len(got)
		ids = ids[k:]
	}
	return n
}

func slicesContain(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// TestMoveShardsBench measures a move of PINSTORE_BENCH_MOVE_SHARDS shards
// (e.g. 256) of about PINSTORE_BENCH_MOVE_PINS pins each (default 1000)
// from the shared MariaDB to a second local host, with production defaults
// (map poll DefaultMapPoll, query timeout 5s, so settle 9s) and two writers
// creating pins on the moving shards. It is skipped unless the variable is
// set:
//
//	PINSTORE_BENCH_MOVE_SHARDS=256 go test -count=1 -run TestMoveShardsBench -v -timeout 30m ./store
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
	f := fileMap{path: filepath.Join(t.TempDir(), "shards.yaml"), prefix: testenv.UniquePrefix(t, "bm"), dsns: []string{a, b}, shards: n + 4}
	for _, d := range f.dsns {
		t.Cleanup(func() { testenv.DropDatabases(t, d, f.prefix) })
	}
	f.write(t, fmt.Sprintf("{shards: 0-%d, host: h0}", n-1), fmt.Sprintf("{shards: %d-%d, host: h1, open: false}", n, n+3))
	begin := time.Now()
	s := openFile(t, f, 0, true)
	t.Logf("migrated %d shards in %v", n+4, time.Since(begin).Round(time.Millisecond))

	// One user, board and pin per shard through the API, then the pin
	// cloned in SQL to perShard pins with their board_pins and user_pins.
	begin = time.Now()
	boards := make([]uint64, n)
	for have, i := 0, 0; have < n; i++ {
		if i > 40*n {
			t.Fatal("users never cover every shard")
		}
		u := mustUser(t, s, fmt.Sprintf("u%d", i))
		if sh := idcodec.ShardOf(u); boards[sh] == 0 {
			boards[sh] = mustBoard(t, s, u)
			have++
		}
	}
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
	if err := s.ReloadFile(); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.WatchMap(wctx, DefaultMapPoll, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	mover := openFile(t, f, 0, false)
	stop := make(chan struct{})
	var acked, refused atomic.Int64
	var wrote sync.Mutex
	var ackedPins []uint64
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 9))
			for {
				select {
				case <-stop:
					return
				default:
				}
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
					return
				}
			}
		}()
	}
	rep, err := mover.MoveShards(ctx, MoveOptions{First: 0, Last: n - 1, To: "h1", Progress: testWriter{t}})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if got := readable(t, s, ackedPins); got != len(ackedPins) {
		t.Fatalf("%d of %d acknowledged pins readable", got, len(ackedPins))
	}
	t.Logf("BENCH move-shards: %d shards, %d rows (%d pins seeded); copy %v; writes held off %v (settle %v + final pass and verify %v); total %v; writers: %d pins acknowledged, %d refused while held",
		rep.Shards, rep.Rows, seeded.Load(), round(rep.Copy), round(rep.Held), DefaultMapPoll+5*time.Second+2*time.Second, round(rep.Final), round(rep.Total), acked.Load(), refused.Load())
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
