package fanout

import (
	"context"
	"errors"
	"time"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// sweepLimit bounds the outbox rows one sweep takes from one shard.
const sweepLimit = 10000

// sweepLoop redoes the fan-out that feed_outbox says is unfinished: all of
// it at start-up (a server that died left it there; a live peer's rows are
// merely written twice, which is harmless), then every interval the rows
// older than the interval.
func (f *Fanout) sweepLoop(ctx context.Context, every time.Duration) {
	olderThan := time.Duration(0)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if n, err := f.Sweep(ctx, olderThan); err != nil {
			f.log.Warn("feed outbox sweep incomplete; the next one retries", "err", model.ErrorMessage(err))
		} else if n > 0 {
			f.log.Info("feed outbox sweep: redoing unfinished fan-out", "pins", n)
		}
		olderThan = every
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep queues the fan-out of every pin whose feed_outbox row is older
// than olderThan (up to 10,000 per shard per call), and the telling of
// every pulled author whose followers are not all told yet, and returns
// how many jobs it queued. Shards on a host that is down are skipped (and named in the
// error); shards being moved are left for the next sweep.
func (f *Fanout) Sweep(ctx context.Context, olderThan time.Duration) (int, error) {
	const op = "fanout.Sweep"
	t := f.r.Current()
	cutoff := shardsql.Now().Add(-olderThan)
	queued := 0
	var errs []error
	down := map[*topology.Host]bool{}
	for n := range t.Len() {
		sh, _ := t.Shard(n)
		if sh.ReadOnly || down[sh.Host] {
			continue
		}
		c, cancel := context.WithTimeout(ctx, f.cfg.QueryTimeout)
		due, err := shardsql.ReadOutbox(c, sh.Host.DB, sh.DB, cutoff, sweepLimit)
		cancel()
		if err != nil {
			down[sh.Host] = true
			errs = append(errs, shardsql.Classify(op, sh.Host.Name, err))
			continue
		}
		for _, r := range due {
			f.Enqueue(Job{Pin: r.Pin, Author: r.Author, Seq: r.Seq, Remove: r.Remove, Outbox: true})
		}
		queued += len(due)
		c, cancel = context.WithTimeout(ctx, f.cfg.QueryTimeout)
		untold, err := shardsql.UntoldPulled(c, sh.Host.DB, sh.DB, sweepLimit)
		cancel()
		if err != nil {
			down[sh.Host] = true
			errs = append(errs, shardsql.Classify(op, sh.Host.Name, err))
			continue
		}
		for _, a := range untold {
			f.Enqueue(Job{Author: a, Pull: true})
		}
		queued += len(untold)
		if ctx.Err() != nil {
			break
		}
	}
	return queued, errors.Join(errs...)
}
