package reshard_test

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/reshard"
	"github.com/pinstore/pinstore/store/shardmap"
)

var errKilled = errors.New("killed by the test")

// TestMoveShardsResumes kills a move at each step and runs it again; it
// also aborts one and fails one verification.
func TestMoveShardsResumes(t *testing.T) {
	e := newMoveEnv(t, 0, 0)
	s := e.server // routes by the map file only when told to (ReloadFile)
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
		if err := s.Router().ReloadFile(); err != nil {
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
	move := func(opt reshard.Options) (reshard.Report, error) {
		opt.Settle = 50 * time.Millisecond
		opt.Batch = 7
		return e.move(opt)
	}
	// placed is where the map file puts shard sh, as a server that has
	// reloaded it routes.
	placed := func(t *testing.T, sh int) shardmap.Range {
		t.Helper()
		if err := s.Router().ReloadFile(); err != nil {
			t.Fatal(err)
		}
		r, _ := s.Map().RangeOf(sh)
		return r
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
		b, err := os.ReadFile(reshard.LockPath(e.f.path))
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
		if _, err := move(reshard.Options{First: 0, Last: 3, To: "h1"}); err != nil {
			t.Fatal(err)
		}
		allThere(t)
		var ai int64
		if err := e.dbB.QueryRow("SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'pins'", shard2).Scan(&ai); err != nil || ai < 5000 {
			t.Fatalf("AUTO_INCREMENT on the target = %d, %v", ai, err)
		}
		if _, err := move(reshard.Options{First: 0, Last: 3, To: "h0"}); err != nil { // and back
			t.Fatal(err)
		}
		allThere(t)
	})

	for _, step := range []string{"copy", "copied", "held", "final", "switched"} {
		t.Run("killed at "+step, func(t *testing.T) {
			from, to, dbFrom, dbTo := "h0", "h1", e.dbA, e.dbB
			if r := placed(t, 0); r.Host == "h1" {
				from, to, dbFrom, dbTo = to, from, dbTo, dbFrom
			}
			_, err := move(reshard.WithHook(reshard.Options{First: 0, Last: 3, To: to}, killAt(step)))
			if !errors.Is(err, errKilled) {
				t.Fatalf("error %v", err)
			}
			if _, err := os.Stat(reshard.LockPath(e.f.path)); err != nil {
				t.Fatalf("no lock file after the kill: %v", err)
			}
			allThere(t)
			if _, err := move(reshard.Options{First: 0, Last: 1, To: to}); !model.IsCode(err, model.EConflict) || !strings.Contains(err.Error(), "is in progress") {
				t.Fatalf("another move during this one: %v", err)
			}
			rep, err := move(reshard.Options{First: 0, Last: 3, To: to})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Resumed == "" {
				t.Fatalf("not resumed: %+v", rep)
			}
			allThere(t)
			if r := placed(t, 3); r.Host != to || r.ReadOnly {
				t.Fatalf("range %+v", r)
			}
			if got := e.databases(t, dbFrom); slices.Contains(got, "00000") {
				t.Fatalf("%s still has shard 0: %v", from, got)
			}
			if got := e.databases(t, dbTo); !slices.Contains(got, "00003") {
				t.Fatalf("%s lacks shard 3: %v", to, got)
			}
		})
	}

	t.Run("abort while held", func(t *testing.T) {
		if _, err := move(reshard.WithHook(reshard.Options{First: 0, Last: 1, To: "h0"}, killAt("held"))); !errors.Is(err, errKilled) {
			t.Fatalf("error %v", err)
		}
		if r := placed(t, 0); !r.ReadOnly {
			t.Fatalf("range %+v not read-only", r)
		}
		rep, err := move(reshard.Options{First: 0, Last: 1, To: "h0", Abort: true})
		if err != nil || !rep.Aborted {
			t.Fatalf("abort: %+v %v", rep, err)
		}
		allThere(t)
		if r := placed(t, 0); r.Host != "h1" || r.ReadOnly {
			t.Fatalf("range %+v", r)
		}
		if got := e.databases(t, e.dbA); slices.Contains(got, "00000") {
			t.Fatalf("copies left on h0: %v", got)
		}
		if _, err := os.Stat(reshard.LockPath(e.f.path)); !errors.Is(err, os.ErrNotExist) {
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
		_, err := move(reshard.WithHook(reshard.Options{First: 0, Last: 3, To: "h0"}, hook))
		if !model.IsCode(err, model.EConflict) || !strings.Contains(err.Error(), "verification failed") || !strings.Contains(err.Error(), "user_pins") {
			t.Fatalf("error %v", err)
		}
		if r := placed(t, 0); r.Host != "h1" || r.ReadOnly {
			t.Fatalf("range %+v", r)
		}
		if lockStep(t) != reshard.StepAborted {
			t.Fatalf("lock step %q", lockStep(t))
		}
		allThere(t)
		// Running it again copies the late rows too.
		if _, err := move(reshard.Options{First: 0, Last: 3, To: "h0"}); err != nil {
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
		_, err := move(reshard.WithHook(reshard.Options{First: 0, Last: 3, To: "h1"}, hook))
		if !model.IsCode(err, model.EConflict) || !strings.Contains(err.Error(), "source shards 1 changed after the final verify") {
			t.Fatalf("error %v", err)
		}
		if got := e.databases(t, e.dbA); !slices.Contains(got, "00001") || slices.Contains(got, "00000") {
			t.Fatalf("h0 has %v; want shard 1 kept, the others dropped", got)
		}
		allThere(t)
		if _, err := move(reshard.Options{First: 0, Last: 3, To: "h1"}); !model.IsCode(err, model.EConflict) {
			t.Fatalf("rerun without --keep-source: %v", err)
		}
		if _, err := move(reshard.Options{First: 0, Last: 3, To: "h1", KeepSource: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(reshard.LockPath(e.f.path)); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("lock file left")
		}
		allThere(t)
	})
}
