package reshard

import (
	"context"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

// revert moves a switched range back to its source hosts: catch-up passes
// apply the target's change log (every client write since the switch) to
// the old copies while the target takes writes, then the same cutover as
// a move's, the other way (hold on the target, the last changes applied
// and verified, the map back on the sources), and the move ends: the
// target's copies dropped (kept with KeepSource), the sources' change logs
// and triggers removed.
func (mv *mover) revert(ctx context.Context, m *shardmap.Map, pos string) error {
	st := mv.lock.state
	switch {
	case st.Step == stepFinishing:
		return model.Errorf(model.EConflict, "the move of %s to %q is being finished (its old copies are being dropped) and can no longer be reverted: run it again with --finish to end it", st.Range, st.To)
	case st.Step != stepReverting && pos != stepSwitched:
		return model.Errorf(model.EConflict, "the move of %s to %q has not switched yet (the map says %s): roll it back with --abort", st.Range, st.To, pos)
	case st.Step == stepReverting && pos == stepHold:
		return model.Errorf(model.EConflict, "a revert of %s is recorded but the map holds the range read-only on its source; fix the map by hand", st.Range)
	}
	if st.Step != stepReverting {
		st.Step = stepReverting
		if err := mv.lock.save(ctx); err != nil {
			return err
		}
		mv.logf("reverting: moving shards %s back from %s to %s", st.Range, st.To, joinFrom(st))
	}
	if err := mv.hook("revert"); err != nil {
		return err
	}
	switch pos {
	case stepSwitched:
		if err := mv.catchUp(ctx, m, true); err != nil {
			return err
		}
		var err error
		if m, _, err = mv.loadMap(ctx); err != nil {
			return err
		}
		fallthrough
	case stepRevertHold:
		if err := mv.cutover(ctx, m, true, pos == stepRevertHold); err != nil {
			return err
		}
	}
	mv.rep.Switched = true
	return mv.revertCleanup(ctx)
}

// revertCleanup ends a reverted move: once no server routes to the target
// any more, and no write reached it after the final pass, the target's
// copies are dropped (or with KeepSource only their change logs), and the
// sources' change logs and triggers removed.
func (mv *mover) revertCleanup(ctx context.Context) error {
	st := mv.lock.state
	if err := mv.hook("reverted"); err != nil {
		return err
	}
	m, _, err := mv.loadMap(ctx)
	if err != nil {
		return err
	}
	mv.logf("before dropping the copies on %s:", st.To)
	if err := mv.settle(ctx, m.Version()); err != nil {
		return err
	}
	late, err := mv.lateWrites(ctx, m, true)
	if err != nil {
		return err
	}
	if len(late) > 0 && !mv.opt.KeepSource {
		return model.Errorf(model.EConflict, "target shards %s changed after the revert's final pass (a write routed on an old map outlived --settle %v): nothing was dropped; compare those shards with the sources by hand, then run --revert --keep-source to end the move keeping the target's copies",
			shardList(late), mv.opt.Settle)
	}
	if err := mv.dropSide(ctx, m, true, !mv.opt.KeepSource); err != nil {
		return err
	}
	if err := mv.dropSide(ctx, m, false, false); err != nil {
		return err
	}
	mv.logf("reverted: shards %s are on %s again; dropped %d copies on %s and every change log and trigger of the move", st.Range, joinFrom(st), mv.rep.Dropped, st.To)
	mv.rep.Reverted, mv.rep.Finished = true, true
	return mv.lock.remove(ctx)
}

// joinFrom names where the range was before the move.
func joinFrom(st *moveState) string {
	s := ""
	for i, f := range st.From {
		if i > 0 {
			s += ", "
		}
		s += f.Shards + "@" + f.Host
	}
	return s
}
