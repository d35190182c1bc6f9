package reshard_test

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/reshard"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store"
	"github.com/pinstore/pinstore/store/shardmap"
)

var errKilled = errors.New("killed by the test")

// resumeEnv is a moveEnv with pins on shards 0-3, moved back and forth by
// the subtests of TestMoveShardsResumes. The server store routes by the
// map file only when told to (ReloadFile), as a server that has reloaded.
type resumeEnv struct {
	*moveEnv
	s      *store.Store
	boards []uint64 // on shards 0-3
	pins   []uint64 // every pin that must survive every move
	odd    model.Object
}

// move runs a move of shards 0-3 with a short settle and tiny chunks.
func (e *resumeEnv) move(opt reshard.Options) (reshard.Report, error) {
	opt.First, opt.Last = 0, 3
	opt.Settle = 50 * time.Millisecond
	opt.Batch = 7
	return e.moveEnv.move(opt)
}

// placed is where the map file puts shard sh, as a server that has
// reloaded it routes.
func (e *resumeEnv) placed(t *testing.T, sh int) shardmap.Range {
	t.Helper()
	if err := e.s.Router().ReloadFile(); err != nil {
		t.Fatal(err)
	}
	r, _ := e.s.Map().RangeOf(sh)
	return r
}

// sides is where shards 0-3 are now and where the other host is.
func (e *resumeEnv) sides(t *testing.T) (from, to string, dbFrom, dbTo *sql.DB) {
	if e.placed(t, 0).Host == "h1" {
		return "h1", "h0", e.dbB, e.dbA
	}
	return "h0", "h1", e.dbA, e.dbB
}

// write creates a pin on the range through the store if the map lets
// clients write it now, and adds it to the pins that must survive.
func (e *resumeEnv) write(t *testing.T) {
	t.Helper()
	if e.placed(t, 0).ReadOnly {
		return
	}
	e.pins = append(e.pins, mustPin(t, e.s, e.boards[len(e.pins)%len(e.boards)]))
}

// allThere checks every pin is readable through a server that has
// reloaded the map, and the odd one unchanged.
func (e *resumeEnv) allThere(t *testing.T) {
	t.Helper()
	if err := e.s.Router().ReloadFile(); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.GetMany(ctx, e.pins[:min(len(e.pins), store.MaxGetMany)], idcodec.TypePin)
	if err != nil {
		t.Fatal(err)
	}
	if n := readable(t, e.s, e.pins); n != len(e.pins) {
		t.Fatalf("%d of %d pins readable", n, len(e.pins))
	}
	for _, p := range got {
		if p.ID == e.odd.ID && (!bytes.Equal(p.Doc, e.odd.Doc) || !p.CreatedAt.Equal(e.odd.CreatedAt)) {
			t.Fatalf("pin changed in the move:\n%s %v\n%s %v", p.Doc, p.CreatedAt, e.odd.Doc, e.odd.CreatedAt)
		}
	}
}

// onlyOn checks that shards 0-3 are on host (writable), that only host
// has their databases, and that no change log, trigger or lock of a move
// is left anywhere.
func (e *resumeEnv) onlyOn(t *testing.T, host string) {
	t.Helper()
	if r := e.placed(t, 3); r.Host != host || r.ReadOnly {
		t.Fatalf("range %+v, want on %s", r, host)
	}
	have, other := e.dbA, e.dbB
	if host == "h1" {
		have, other = other, have
	}
	if got := e.databases(t, have); !slices.Contains(got, "00000") || !slices.Contains(got, "00003") {
		t.Fatalf("%s lacks the range: %v", host, got)
	}
	if got := e.databases(t, other); slices.Contains(got, "00000") || slices.Contains(got, "00003") {
		t.Fatalf("the other host still has the range: %v", got)
	}
	e.noMoveLeft(t)
}

// noMoveLeft checks that no change log, trigger or lock of a move is left.
func (e *resumeEnv) noMoveLeft(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(reshard.LockPath(e.f.path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lock file left: %v", err)
	}
	for _, db := range []*sql.DB{e.dbA, e.dbB} {
		var trg, logs int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA LIKE ?", e.f.prefix+"%").Scan(&trg); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA LIKE ? AND TABLE_NAME = 'reshard_log'", e.f.prefix+"%").Scan(&logs); err != nil {
			t.Fatal(err)
		}
		if trg != 0 || logs != 0 {
			t.Fatalf("%d triggers and %d change logs left", trg, logs)
		}
	}
}

func killAt(step string) func(string) error {
	return func(s string) error {
		if s == step {
			return errKilled
		}
		return nil
	}
}

// killed runs opt with a kill at step, which must happen; the move is
// then in progress and refuses another.
func (e *resumeEnv) killed(t *testing.T, opt reshard.Options, step string) {
	t.Helper()
	if _, err := e.move(reshard.WithHook(opt, killAt(step))); !errors.Is(err, errKilled) {
		t.Fatalf("not killed at %q: %v", step, err)
	}
	if _, err := os.Stat(reshard.LockPath(e.f.path)); err != nil {
		t.Fatalf("no lock file after the kill: %v", err)
	}
	if _, err := e.moveEnv.move(reshard.Options{First: 0, Last: 1, To: opt.To}); !model.IsCode(err, model.EConflict) || !strings.Contains(err.Error(), "is in progress") {
		t.Fatalf("another move during this one: %v", err)
	}
}

// TestMoveShardsResumes kills a move, and a revert, at each of their
// steps, writes while it is stopped (when the map lets clients write), and
// runs it again: it carries on with nothing lost, each shard on one host
// in the map and, once over, its databases on that host alone, with no
// change log or trigger left. It also aborts one, fails a verification,
// carries a write that reaches the source while held, and catches a write
// that reaches an old copy after the switch.
func TestMoveShardsResumes(t *testing.T) {
	me := newMoveEnv(t, 0, 0)
	e := &resumeEnv{moveEnv: me, s: me.server}
	for _, u := range seedUsers(t, e.s, 4) {
		b := mustBoard(t, e.s, u)
		e.boards = append(e.boards, b)
		for range 5 {
			e.pins = append(e.pins, mustPin(t, e.s, b))
		}
	}
	// Text that a careless copy would mangle: multi-byte UTF-8, quotes,
	// backslashes, NUL.
	const odd = "café 🎉 \"it's\" \\ back\x00slash"
	var err error
	e.odd, err = e.s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(e.boards[0]), Link: "https://example.com/odd", Description: odd}, 0)
	if err != nil {
		t.Fatal(err)
	}
	e.pins = append(e.pins, e.odd.ID)

	t.Run("auto increment kept", func(t *testing.T) {
		// Ids handed out by rolled-back inserts are not handed out again.
		shard2 := e.f.prefix + "00002"
		if _, err := e.dbA.Exec("ALTER TABLE " + shard2 + ".pins AUTO_INCREMENT = 5000"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.move(reshard.Options{To: "h1", Finish: true}); err != nil {
			t.Fatal(err)
		}
		e.allThere(t)
		var ai int64
		if err := e.dbB.QueryRow("SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'pins'", shard2).Scan(&ai); err != nil || ai < 5000 {
			t.Fatalf("AUTO_INCREMENT on the target = %d, %v", ai, err)
		}
		e.onlyOn(t, "h1")
		if _, err := e.move(reshard.Options{To: "h0", Finish: true}); err != nil { // and back
			t.Fatal(err)
		}
		e.allThere(t)
		e.onlyOn(t, "h0")
	})

	// A move killed at each step, then run again to its end.
	for _, step := range []string{"copy", "logging", "copied", "catch-up 1", "checked", "held", "final", "final applied 0", "verified", "finish", "finishing"} {
		t.Run("killed at "+step, func(t *testing.T) {
			_, to, _, _ := e.sides(t)
			e.write(t)
			e.killed(t, reshard.Options{To: to, Finish: true}, step)
			e.write(t) // acknowledged on whichever host the map names now
			e.allThere(t)
			rep, err := e.move(reshard.Options{To: to, Finish: true})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Resumed == "" || !rep.Finished {
				t.Fatalf("not resumed to the end: %+v", rep)
			}
			e.allThere(t)
			e.onlyOn(t, to)
		})
	}

	// Moved without --finish: switched, the old copies kept; written on the
	// new host; then a revert killed at each step and run again.
	for _, step := range []string{"revert", "catch-up 1", "checked", "held", "final", "final applied 0", "verified", "reverted"} {
		t.Run("revert killed at "+step, func(t *testing.T) {
			from, to, _, _ := e.sides(t)
			rep, err := e.move(reshard.Options{To: to})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Switched || rep.Finished {
				t.Fatalf("report %+v", rep)
			}
			if r := e.placed(t, 0); r.Host != to || r.ReadOnly {
				t.Fatalf("range %+v after the switch", r)
			}
			for range 3 {
				e.write(t) // on the new host, only
			}
			e.allThere(t)
			if _, err := e.move(reshard.Options{To: to, Abort: true}); !model.IsCode(err, model.EConflict) || !strings.Contains(err.Error(), "--revert") {
				t.Fatalf("abort after the switch: %v", err)
			}
			e.killed(t, reshard.Options{To: to, Revert: true}, step)
			e.write(t)
			e.allThere(t)
			if _, err := e.move(reshard.Options{To: to}); !model.IsCode(err, model.EConflict) || !strings.Contains(err.Error(), "--revert to finish it") {
				t.Fatalf("carrying on a revert without --revert: %v", err)
			}
			rep, err = e.move(reshard.Options{To: to, Revert: true})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Resumed == "" || !rep.Reverted || !rep.Finished {
				t.Fatalf("not reverted: %+v", rep)
			}
			e.allThere(t)
			e.onlyOn(t, from)
		})
	}

	t.Run("revert refused before the switch", func(t *testing.T) {
		from, to, _, _ := e.sides(t)
		e.killed(t, reshard.Options{To: to, Finish: true}, "held")
		if _, err := e.move(reshard.Options{To: to, Revert: true}); !model.IsCode(err, model.EConflict) || !strings.Contains(err.Error(), "--abort") {
			t.Fatalf("revert before the switch: %v", err)
		}
		rep, err := e.move(reshard.Options{To: to, Abort: true})
		if err != nil || !rep.Aborted {
			t.Fatalf("abort: %+v %v", rep, err)
		}
		e.allThere(t)
		e.onlyOn(t, from)
	})

	t.Run("verification fails", func(t *testing.T) {
		// A stray row on the target, as a bug in the copy would leave:
		// the check before the hold sees the counts differ, the count
		// while held finds it still there, and the move rolls back.
		from, to, _, dbTo := e.sides(t)
		shard0 := e.f.prefix + "00000"
		hook := func(step string) error {
			if step != "copied" {
				return nil
			}
			_, err := dbTo.Exec("INSERT IGNORE INTO " + shard0 + ".user_pins (from_id, to_id, sequence) VALUES (1, 2, 3)")
			return err
		}
		_, err := e.move(reshard.WithHook(reshard.Options{To: to, Finish: true}, hook))
		if !model.IsCode(err, model.EConflict) || !strings.Contains(err.Error(), "verification failed") || !strings.Contains(err.Error(), "user_pins") {
			t.Fatalf("error %v", err)
		}
		if r := e.placed(t, 0); r.Host != from || r.ReadOnly {
			t.Fatalf("range %+v", r)
		}
		b, _ := os.ReadFile(reshard.LockPath(e.f.path))
		if !strings.Contains(string(b), "step: "+reshard.StepAborted) {
			t.Fatalf("lock:\n%s", b)
		}
		e.write(t)
		e.allThere(t)
		// Running it again repairs the target and finishes.
		if _, err := e.move(reshard.Options{To: to, Finish: true}); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := dbTo.QueryRow("SELECT COUNT(*) FROM " + shard0 + ".user_pins WHERE from_id = 1").Scan(&n); err != nil || n != 0 {
			t.Fatalf("stray row on the target: %d %v", n, err)
		}
		e.allThere(t)
		e.onlyOn(t, to)
	})

	t.Run("write reaching the source while held", func(t *testing.T) {
		// A write routed by a server still on an old map, landing on the
		// source after the final pass drained its log: the pass finds the
		// log not empty, applies it and verifies again.
		_, to, dbFrom, dbTo := e.sides(t)
		shard1 := e.f.prefix + "00001"
		wrote := false
		hook := func(step string) error {
			if step != "final applied 1" || wrote {
				return nil
			}
			wrote = true
			_, err := dbFrom.Exec("INSERT INTO " + shard1 + ".user_pins (from_id, to_id, sequence) VALUES (4, 5, 6)")
			return err
		}
		if _, err := e.move(reshard.WithHook(reshard.Options{To: to, Finish: true}, hook)); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := dbTo.QueryRow("SELECT COUNT(*) FROM " + shard1 + ".user_pins WHERE from_id = 4 AND to_id = 5").Scan(&n); err != nil || n != 1 {
			t.Fatalf("the late row on the target: %d %v", n, err)
		}
		e.allThere(t)
		e.onlyOn(t, to)
	})

	t.Run("every kind of change after the check", func(t *testing.T) {
		// Client changes of every kind between the check and the hold, and
		// while held: the counts carried from the check (each log entry
		// says what its change did to the row count) match the target's,
		// so the move switches, and the target has the source's rows.
		_, to, dbFrom, dbTo := e.sides(t)
		up := e.f.prefix + "00000.user_pins"
		held := false
		hook := func(step string) error {
			var qs []string
			switch {
			case step == "checked":
				qs = []string{
					"INSERT INTO " + up + " VALUES (900, 1, 1), (900, 2, 2), (900, 3, 3), (900, 4, 4)",
					"UPDATE " + up + " SET sequence = 10 WHERE from_id = 900 AND to_id = 1",
					"UPDATE " + up + " SET to_id = 5 WHERE from_id = 900 AND to_id = 2",
					"DELETE FROM " + up + " WHERE from_id = 900 AND to_id = 3",
					"REPLACE INTO " + up + " VALUES (900, 4, 44)",
					"INSERT INTO " + up + " VALUES (900, 1, 1) ON DUPLICATE KEY UPDATE sequence = 11",
					"INSERT INTO " + up + " VALUES (900, 6, 6) ON DUPLICATE KEY UPDATE sequence = 66",
					"INSERT IGNORE INTO " + up + " VALUES (900, 6, 7)",
				}
			case step == "final applied 0" && !held:
				held = true // a server on an old map, once
				qs = []string{
					"INSERT INTO " + up + " VALUES (901, 1, 1)",
					"DELETE FROM " + up + " WHERE from_id = 900 AND to_id = 5",
				}
			}
			for _, q := range qs {
				if _, err := dbFrom.Exec(q); err != nil {
					return err
				}
			}
			return nil
		}
		if _, err := e.move(reshard.WithHook(reshard.Options{To: to, Finish: true}, hook)); err != nil {
			t.Fatal(err)
		}
		if !held {
			t.Fatal("no write while held")
		}
		rows, err := dbTo.Query("SELECT from_id, to_id, sequence FROM " + up + " WHERE from_id IN (900, 901) ORDER BY from_id, to_id")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var f, k, q int
			if err := rows.Scan(&f, &k, &q); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%d/%d/%d", f, k, q))
		}
		rows.Close()
		if want := []string{"900/1/11", "900/4/44", "900/6/6", "901/1/1"}; !slices.Equal(got, want) {
			t.Fatalf("target rows %v, want %v", got, want)
		}
		if _, err := dbTo.Exec("DELETE FROM " + up + " WHERE from_id IN (900, 901)"); err != nil {
			t.Fatal(err)
		}
		e.allThere(t)
		e.onlyOn(t, to)
	})

	t.Run("late write after the switch", func(t *testing.T) {
		// A write that reaches the old copy after the switch: the check
		// before the drop finds it in the old copy's change log, drops
		// nothing and keeps the move open.
		from, to, dbFrom, _ := e.sides(t)
		shard1 := e.f.prefix + "00001"
		hook := func(step string) error {
			if step != "finish" {
				return nil
			}
			_, err := dbFrom.Exec("INSERT INTO " + shard1 + ".user_pins (from_id, to_id, sequence) VALUES (7, 8, 9)")
			return err
		}
		_, err := e.move(reshard.WithHook(reshard.Options{To: to, Finish: true}, hook))
		if !model.IsCode(err, model.EConflict) || !strings.Contains(err.Error(), "source shards 1 changed after the final pass") {
			t.Fatalf("error %v", err)
		}
		if got := e.databases(t, dbFrom); !slices.Contains(got, "00001") || !slices.Contains(got, "00000") {
			t.Fatalf("%s has %v; want every source kept", from, got)
		}
		e.allThere(t)
		if _, err := e.move(reshard.Options{To: to, Finish: true}); !model.IsCode(err, model.EConflict) {
			t.Fatalf("rerun without --keep-source: %v", err)
		}
		rep, err := e.move(reshard.Options{To: to, Finish: true, KeepSource: true})
		if err != nil || !rep.Finished {
			t.Fatalf("%+v %v", rep, err)
		}
		e.noMoveLeft(t)
		if got := e.databases(t, dbFrom); !slices.Contains(got, "00001") {
			t.Fatalf("--keep-source dropped the source: %v", got)
		}
		e.allThere(t)
	})
}
