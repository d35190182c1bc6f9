package reshard

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

// How a move ends: kept in step for a while, finished (the old copies
// dropped), aborted before its switch, or rolled back when a check fails.

// keep applies the target's changes to the old copies for opt.Keep after
// the switch, every second.
func (mv *mover) keep(ctx context.Context) error {
	if mv.opt.Keep <= 0 {
		return nil
	}
	m, _, err := mv.loadMap(ctx)
	if err != nil {
		return err
	}
	mv.logf("keeping the old copies up to date for %v", mv.opt.Keep)
	until := time.Now().Add(mv.opt.Keep)
	for {
		n, err := mv.eachShard(ctx, m, "keeping the old copies", true, mv.opt.Parallel, mv.catchUpShard)
		mv.rep.Kept += n
		if err != nil {
			return err
		}
		if err := mv.hook("kept"); err != nil {
			return err
		}
		left := time.Until(until)
		if left <= 0 {
			break
		}
		if err := sleep(ctx, min(left, time.Second)); err != nil {
			return err
		}
	}
	mv.logf("kept the old copies up to date: %d changes applied", mv.rep.Kept)
	return nil
}

// finishStep ends a switched move: it waits until no server routes to the
// old copies, checks that no write reached them after the final pass (their
// change logs are empty; otherwise nothing is dropped, EConflict, unless
// KeepSource), then drops the old copies (or with KeepSource only their
// change logs and triggers), and the target's change logs and triggers.
func (mv *mover) finishStep(ctx context.Context) error {
	st := mv.lock.state
	if err := mv.hook("finish"); err != nil {
		return err
	}
	m, _, err := mv.loadMap(ctx)
	if err != nil {
		return err
	}
	if st.Step != stepFinishing {
		mv.logf("before dropping the old copies:")
		if err := mv.settle(ctx, m.Version()); err != nil {
			return err
		}
		late, err := mv.lateWrites(ctx, m, false)
		if err != nil {
			return err
		}
		if len(late) > 0 && !mv.opt.KeepSource {
			return model.Errorf(model.EConflict, "source shards %s changed after the final pass (a write routed on an old map outlived --settle %v, or a server did not reload the map): nothing was dropped and the move stays open; compare those shards with the target by hand, then end the move with --finish --keep-source (keeps the source databases), or move the range back with --revert",
				shardList(late), mv.opt.Settle)
		}
		st.Step = stepFinishing
		if err := mv.lock.save(ctx); err != nil {
			return err
		}
	}
	if err := mv.hook("finishing"); err != nil {
		return err
	}
	if err := mv.dropSide(ctx, m, false, !mv.opt.KeepSource); err != nil {
		return err
	}
	if err := mv.dropSide(ctx, m, true, false); err != nil {
		return err
	}
	if mv.opt.KeepSource {
		mv.logf("kept the source databases (--keep-source): stale copies now; drop them when convenient")
	}
	mv.logf("finished: dropped %d source databases and every change log and trigger of the move", mv.rep.Dropped)
	mv.rep.Finished = true
	return mv.lock.remove(ctx)
}

// side is the pool and name of shard sh's host on one side of the move:
// its source, or target true: the target.
func (mv *mover) side(m *shardmap.Map, sh int, target bool) (*sqlx.DB, string, error) {
	host := mv.lock.state.source(sh)
	if target {
		host = mv.lock.state.To
	}
	db, err := mv.hosts.db(m, host)
	return db, host, err
}

// lateWrites lists the shards whose old copy (the source's, or target
// true: the target's) has entries in its change log: writes that reached it
// after the final pass. A database or log already dropped has none.
func (mv *mover) lateWrites(ctx context.Context, m *shardmap.Map, target bool) ([]int, error) {
	st := mv.lock.state
	var late []int
	var mu sync.Mutex
	err := mv.parallel(ctx, st.first, st.last, 4*mv.opt.Parallel, func(ctx context.Context, sh int) error {
		db, _, err := mv.side(m, sh, target)
		if err != nil {
			return err
		}
		name := m.DBName(sh)
		var has int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", name, logTable).Scan(&has); err != nil || has == 0 {
			return err
		}
		n, err := logLen(ctx, db, name)
		if err != nil {
			return err
		}
		if n > 0 {
			mu.Lock()
			late = append(late, sh)
			mu.Unlock()
		}
		return nil
	})
	sort.Ints(late)
	return late, err
}

// dropSide drops, on every shard of one side (the sources, or target true:
// the target), the database (drop), or only its change log and triggers.
// Databases already dropped are skipped. Dropping a database with triggers
// is a trigger statement for hosts.ddlLock.
func (mv *mover) dropSide(ctx context.Context, m *shardmap.Map, target, drop bool) error {
	st := mv.lock.state
	var dropped atomic.Int64
	err := mv.parallel(ctx, st.first, st.last, mv.opt.Parallel, func(ctx context.Context, sh int) error {
		db, host, err := mv.side(m, sh, target)
		if err != nil {
			return err
		}
		name := m.DBName(sh)
		if drop {
			if err := mv.dropDatabase(ctx, m, db, host, name); err != nil {
				return fmt.Errorf("drop shard %d on %q: %w", sh, host, err)
			}
			dropped.Add(1)
			return nil
		}
		var exists int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name).Scan(&exists); err != nil || exists == 0 {
			return err
		}
		tables, err := listTables(ctx, db, name)
		if err != nil {
			return fmt.Errorf("shard %d on %q: %w", sh, host, err)
		}
		if err := dropLog(ctx, db, mv.hosts.ddlLock(db), name, tables); err != nil {
			return fmt.Errorf("shard %d on %q: %w", sh, host, err)
		}
		return nil
	})
	mv.rep.Dropped += int(dropped.Load())
	return err
}

// dropDatabase drops the shard database name on host (its pool db) a table
// at a time, each drop after the throttle lets it, then the empty
// database. One DROP DATABASE of a shard's 32 tables stalls every write on
// the host while it runs, seconds on a busy host (TestMoveWriteGapBench);
// one table's drop is short, and the throttle spaces them.
func (mv *mover) dropDatabase(ctx context.Context, m *shardmap.Map, db *sqlx.DB, host, name string) error {
	var exists int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name).Scan(&exists); err != nil || exists == 0 {
		return err
	}
	var tables []string
	if err := sqlx.SelectContext(ctx, db, &tables, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME", name); err != nil {
		return err
	}
	th := mv.throttleHosts(m, host)
	for _, tb := range tables {
		if err := mv.throttle.Wait(ctx, th); err != nil {
			return err
		}
		if err := execLocked(ctx, db, mv.hosts.ddlLock(db), "DROP TABLE IF EXISTS "+name+".`"+tb+"`"); err != nil {
			return err
		}
	}
	return execLocked(ctx, db, mv.hosts.ddlLock(db), "DROP DATABASE IF EXISTS "+name)
}

// abort rolls back a move before its switch: the range writable on its
// sources, the target's copies dropped, the sources' change logs and
// triggers removed, the lock removed. After the switch the target may have
// taken writes: that is a revert.
func (mv *mover) abort(ctx context.Context, m *shardmap.Map, pos string) error {
	st := mv.lock.state
	switch {
	case st.Step == stepReverting:
		return model.Errorf(model.EConflict, "a revert of %s from %q is in progress: run it again with --revert to finish it", st.Range, st.To)
	case pos == stepSwitched || pos == stepRevertHold:
		return model.Errorf(model.EConflict, "the move of %s to %q has switched already and the target may have taken writes: move it back with --revert, or end it with --finish", st.Range, st.To)
	case pos == stepHold:
		back, err := mv.rewrite(ctx, stepHold, mv.onRange(func(r *shardmap.Range) { r.ReadOnly = false }), "aborted")
		if err != nil {
			return err
		}
		mv.logf("writes resumed on the source (map version %s)", back.Version())
	}
	if err := mv.dropSide(ctx, m, true, true); err != nil {
		return err
	}
	if err := mv.dropSide(ctx, m, false, false); err != nil {
		return err
	}
	mv.logf("aborted: dropped the copies on %s and the sources' change logs; the range stays on its source", st.To)
	mv.rep.Aborted = true
	return mv.lock.remove(ctx)
}

// rollback ends a hold whose verification failed: the range writable where
// it was before the hold, copies kept. Forward, the move is marked aborted
// (run it again to retry, or abort it); back, it stays switched.
func (mv *mover) rollback(ctx context.Context, mm *mismatch, back bool) error {
	st := mv.lock.state
	expect, step, where := stepHold, stepAborted, "its source"
	if back {
		expect, step, where = stepRevertHold, stepSwitched, fmt.Sprintf("%q", st.To)
	}
	restored, err := mv.rewrite(ctx, expect, mv.onRange(func(r *shardmap.Range) { r.ReadOnly = false }), "verification failed")
	if err != nil {
		return err
	}
	st.Step = step
	st.Note = mm.Error()
	st.Copied = st.Copied && back // forward, the next run copies again, repairing the target
	if err := mv.lock.save(ctx); err != nil {
		return err
	}
	mv.logf("VERIFICATION FAILED: %v; the range is writable on %s again (map version %s), nothing was dropped", mm, where, restored.Version())
	again := "rerun to try again or add --abort to drop the copies"
	if back {
		again = "rerun with --revert to try again"
	}
	return model.Wrap("", model.EConflict, fmt.Sprintf("verification failed (%v): the range is writable on %s again; the copies are kept: %s", mm, where, again), nil)
}
