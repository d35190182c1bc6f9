package store

import (
	"context"
	"errors"
	"time"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// pairGrace is how old a pair's mark must be before a sweep settles it: a
// request settles its own pair at once, so a mark older than this was
// most likely left by a server that died (settling a live request's pair
// as well is harmless: settles queue on the mark and the second finds
// nothing to do).
const pairGrace = time.Second

// Sweep batching: the shards of one host read per statement, and the
// marks read per shard.
const (
	sweepShardsPerStatement = 64
	sweepMarksPerShard      = 100
)

// Repairs finishes what servers that died left half-done: the sweep of
// pair, delete and user marks (HealPairs, every Config.PairSweep) and the
// full check of every pair's two sides (Repair, repair.go).
type Repairs struct {
	*core
	keys      *Keys
	objs      *Objects
	lists     *Lists
	usernames *Usernames
}

// healLoop settles, at start-up and then every interval, the pairs marked
// in pair_outbox that no request settled: what a server that died between
// the two sides of a pair left; at start-up and then hourly it deletes
// expired idempotency keys (SweepKeys). It stops when ctx is done.
func (s *Repairs) healLoop(ctx context.Context, every time.Duration) {
	olderThan := time.Duration(0) // at start-up: everything, a dead server's marks included
	t := time.NewTicker(every)
	defer t.Stop()
	var keysSwept time.Time
	for {
		if n, err := s.HealPairs(ctx, olderThan); err != nil {
			s.log.Warn("pair sweep incomplete; the next one retries", "err", model.ErrorMessage(err))
		} else if n > 0 {
			s.log.Info("pair sweep: settled pairs a request left unfinished", "pairs", n)
		}
		if time.Since(keysSwept) >= keySweepEvery {
			keysSwept = time.Now()
			if n, err := s.keys.SweepKeys(ctx); err != nil {
				s.log.Warn("idempotency key sweep incomplete; the next one retries", "err", model.ErrorMessage(err))
			} else if n > 0 {
				s.log.Info("idempotency key sweep: deleted expired keys", "keys", n)
			}
		}
		olderThan = pairGrace
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// HealPairs settles every pair marked in pair_outbox for longer than
// olderThan, and finishes every user whose create did not finish (pending
// for olderThan plus 4 s longer), on every host (one statement per 64
// shards of a host reads each kind), and returns how many it settled. A host that is down, or a
// shard being moved, is skipped and retried by the next sweep; the error
// names what failed.
func (s *Repairs) HealPairs(ctx context.Context, olderThan time.Duration) (int, error) {
	const op = "store.HealPairs"
	t := s.router.Current()
	cutoff := shardsql.Now().Add(-olderThan)
	settled := 0
	var errs []error
	for _, h := range t.Hosts() {
		var dbs []shardsql.DB
		for _, n := range t.ShardsOf(h) {
			if sh, _ := t.Shard(n); !sh.ReadOnly {
				dbs = append(dbs, sh.DB)
			}
		}
		for start := 0; start < len(dbs); start += sweepShardsPerStatement {
			// Pinned, and only the shards still writable on h in the map
			// in force: a move may have begun since t was read.
			pt, release := s.router.Enter()
			var chunk []shardsql.DB
			for _, db := range dbs[start:min(start+sweepShardsPerStatement, len(dbs))] {
				if sh, _ := pt.Shard(db.N); !sh.ReadOnly && sh.Host.Name == h.Name {
					chunk = append(chunk, db)
				}
			}
			n, err := s.healHost(ctx, op, h, chunk, cutoff)
			release()
			settled += n
			if err != nil {
				errs = append(errs, err)
				break // the next statement would likely fail the same way
			}
		}
		if ctx.Err() != nil {
			break
		}
	}
	return settled, errors.Join(errs...)
}

// healHost settles the due pairs of some of a host's shards, and finishes
// the users whose create did not finish (older than userClaimGrace).
func (s *Repairs) healHost(ctx context.Context, op string, h *topology.Host, dbs []shardsql.DB, cutoff time.Time) (int, error) {
	c, cancel := s.deadline(ctx)
	due, err := shardsql.DuePairs(c, h.DB, dbs, cutoff, sweepMarksPerShard)
	var users []shardsql.UserClaim
	if err == nil {
		users, err = shardsql.DueUserClaims(c, h.DB, dbs, cutoff.Add(pairGrace-userClaimGrace), sweepMarksPerShard)
	}
	cancel()
	if err != nil {
		return 0, shardsql.Classify(op, h.Name, err)
	}
	settled := 0
	for _, p := range due {
		var err error
		if p.To == 0 {
			err = s.objs.drainList(ctx, op, p) // a delete's list, left half-emptied
		} else {
			err = s.lists.settle(ctx, op, p)
		}
		if err != nil && !model.IsCode(err, model.ENotFound) {
			return settled, err
		}
		settled++
	}
	for _, u := range users {
		if err := s.usernames.finishUser(ctx, op, u); err != nil {
			return settled, err
		}
		settled++
	}
	_, err = s.sweepCached(ctx, op, h, dbs) // cache invalidations a dead writer left (cache.go)
	return settled, err
}
