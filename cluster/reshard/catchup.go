package reshard

import (
	"context"
	"fmt"
	"time"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

// catchUpSmall is the backlog (change log entries applied by one catch-up
// pass) below which the next pass runs with writes held (and see
// backlogSmall for a backlog that stops shrinking above it). maxPasses bounds
// the passes while writes flow: a backlog that is still large after them,
// or that grew three passes in a row (writes arrive about as fast as they
// are applied), stops the move before its hold, which would then last too
// long.
const (
	catchUpSmall = 1000
	maxPasses    = 20
	stalledHold  = 2 * time.Second
)

// backlogSmall says whether catch-up pass number pass, which applied n
// changes in took after the previous pass applied prev, left a backlog
// small enough to apply while writes are held. Below catchUpSmall it is.
// Above it, a backlog that has stopped shrinking (within a tenth of the
// pass before) is as small as it gets while writes flow: the writes of one
// pass's duration, since a pass's time goes mostly to reading every
// shard's log, not to the changes. The pass while writes are held does
// about the same work, so such a backlog is taken when its pass was
// shorter than stalledHold, well inside the servers' write buffer.
func backlogSmall(pass int, n, prev int64, took time.Duration) bool {
	if n <= catchUpSmall {
		return true
	}
	return pass > 1 && n*10 >= prev*9 && took <= stalledHold
}

// catchUp applies the change logs of the side that takes writes to the
// other, pass after pass while writes flow, until a pass has only a small
// backlog left to apply (catchUpSmall), so that the pass while writes are
// held has only the last moments' changes.
func (mv *mover) catchUp(ctx context.Context, m *shardmap.Map, back bool) error {
	var prev int64
	growing := 0
	for pass := 1; ; pass++ {
		begin := time.Now()
		n, err := mv.eachShard(ctx, m, "catch-up", back, mv.opt.Parallel, mv.catchUpShard)
		mv.rep.Passes++
		mv.rep.CatchUp += n
		if err != nil {
			return err
		}
		took := time.Since(begin)
		mv.logf("catch-up pass %d: %d changes applied in %v", pass, n, round(took))
		if err := mv.hook(fmt.Sprintf("catch-up %d", pass)); err != nil {
			return err
		}
		if backlogSmall(pass, n, prev, took) {
			if mv.checked {
				return nil
			}
			// The check takes a while: another pass applies what came
			// meanwhile, so that the hold has only the last moments'.
			if err := mv.check(ctx, m, back); err != nil {
				return err
			}
			if err := mv.hook("checked"); err != nil {
				return err
			}
			continue
		}
		if pass > 1 && n > prev {
			growing++
		} else {
			growing = 0
		}
		prev = n
		if pass >= maxPasses || growing >= 3 {
			return model.Errorf(model.EUnavailable, "catch-up does not converge: pass %d still applied %d changes (writes arrive about as fast as the move applies them); writes were not held. Run the same command again when the load is lower, or add --abort", pass, n)
		}
	}
}
