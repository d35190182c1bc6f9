package store

import (
	"context"
	"fmt"
	"io"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// RepairReport counts what Repair found for one inverse pair of mappings.
type RepairReport struct {
	Mapping        string `json:"mapping"`         // the forward side, e.g. user_following
	Checked        int    `json:"checked"`         // rows read on both sides
	DeadEndpoint   int    `json:"dead_endpoint"`   // forward rows from or to a deleted object (pair removed)
	MissingInverse int    `json:"missing_inverse"` // forward rows whose inverse was missing (added)
	OrphanInverse  int    `json:"orphan_inverse"`  // inverse rows with no forward row (removed)
}

// Repair finds pairs of inverse mappings with one side missing and fixes
// them, trusting the forward side (the one written first): a forward row
// from or to a deleted object is removed with its inverse (a delete or an
// add racing a delete had not finished); a forward row without its inverse
// gets the inverse (the add had not finished); an inverse row without its
// forward row is removed (the remove had not finished). Counts change with
// the rows, in the same transactions. With dryRun it only counts. It is
// safe to run while clients write; a pair changed during the run is
// settled by the next run.
func (s *Repairs) Repair(ctx context.Context, dryRun bool, progress io.Writer) ([]RepairReport, error) {
	const op = "store.Repair"
	var out []RepairReport
	for _, fwd := range model.Mappings() {
		inv, ok := fwd.Inverse()
		if !ok || !fwd.Forward() {
			continue
		}
		rep := RepairReport{Mapping: fwd.String()}
		// Pass 1: forward rows with a deleted end, and forward rows whose
		// inverse is missing.
		dead := func(rows []shardsql.PairRow) ([]shardsql.PairRow, error) {
			live, gone, err := s.splitLive(ctx, fwd, rows)
			if err != nil {
				return nil, err
			}
			rep.DeadEndpoint += len(gone)
			if dryRun {
				return live, nil
			}
			for _, e := range gone {
				if err := s.lists.removePair(ctx, op, shardsql.Pair{M: fwd, From: e.From, To: e.To}); err != nil {
					return nil, err
				}
			}
			return live, nil
		}
		if err := s.scanPairs(ctx, fwd, inv, &rep.Checked, dead, func(e shardsql.PairRow) error {
			rep.MissingInverse++
			if dryRun {
				return nil
			}
			return s.healed(ctx, op, shardsql.Pair{M: fwd, From: e.From, To: e.To})
		}); err != nil {
			return out, err
		}
		// Pass 2: inverse rows whose forward row is missing.
		if err := s.scanPairs(ctx, inv, fwd, &rep.Checked, nil, func(e shardsql.PairRow) error {
			rep.OrphanInverse++
			if dryRun {
				return nil
			}
			return s.healed(ctx, op, shardsql.Pair{M: fwd, From: e.To, To: e.From})
		}); err != nil {
			return out, err
		}
		if progress != nil {
			fmt.Fprintf(progress, "repair: %s: checked %d rows, %d with a deleted end, %d missing inverse, %d orphan inverse\n", rep.Mapping, rep.Checked, rep.DeadEndpoint, rep.MissingInverse, rep.OrphanInverse)
		}
		out = append(out, rep)
	}
	return out, nil
}

// healed is heal, content with a pair that went because its target is
// gone.
func (s *Repairs) healed(ctx context.Context, op string, p shardsql.Pair) error {
	if err := s.lists.heal(ctx, op, p); err != nil && !model.IsCode(err, model.ENotFound) {
		return err
	}
	return nil
}

// splitLive splits forward rows of fwd into those whose both ends are live
// objects and those with a deleted (or never created) end.
func (s *Repairs) splitLive(ctx context.Context, fwd model.Mapping, rows []shardsql.PairRow) (live, gone []shardsql.PairRow, err error) {
	alive := map[uint64]bool{}
	for _, side := range []struct {
		typ idcodec.Type
		id  func(shardsql.PairRow) uint64
	}{{fwd.From(), func(r shardsql.PairRow) uint64 { return r.From }}, {fwd.To(), func(r shardsql.PairRow) uint64 { return r.To }}} {
		seen := map[uint64]bool{}
		var ids []uint64
		for _, r := range rows {
			if id := side.id(r); !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		for start := 0; start < len(ids); start += 500 {
			objs, err := s.objectsByID(ctx, ids[start:min(start+500, len(ids))], side.typ)
			if err != nil {
				return nil, nil, err
			}
			for _, o := range objs {
				alive[o.ID] = true
			}
		}
	}
	for _, r := range rows {
		if alive[r.From] && alive[r.To] {
			live = append(live, r)
		} else {
			gone = append(gone, r)
		}
	}
	return live, gone, nil
}

// scanPairs reads every row of m on every shard, in batches, keeps those
// that keep (nil: all) returns, and calls missing(row)
// for each row whose mirror in other (to → from) does not exist.
func (s *Repairs) scanPairs(ctx context.Context, m, other model.Mapping, checked *int, keep func([]shardsql.PairRow) ([]shardsql.PairRow, error), missing func(shardsql.PairRow) error) error {
	const op = "store.Repair"
	t := s.router.Current()
	for n := range t.Len() {
		sh, _ := t.Shard(n)
		err := s.scanTable(ctx, sh, m.Table(), 1000, func(got []shardsql.PairRow) error {
			*checked += len(got)
			check := got
			if keep != nil {
				var err error
				if check, err = keep(got); err != nil {
					return err
				}
			}
			return s.checkMirrors(ctx, t, other, check, missing)
		})
		if err != nil {
			return classify(op, sh, err)
		}
	}
	return nil
}

// checkMirrors looks up the mirror (to → from) of every row in other, one
// statement per shard, and reports the rows whose mirror is missing.
func (s *Repairs) checkMirrors(ctx context.Context, t *topology.Topology, other model.Mapping, rows []shardsql.PairRow, missing func(shardsql.PairRow) error) error {
	const op = "store.Repair"
	byShard := map[int][]shardsql.PairRow{}
	for _, r := range rows {
		n := int(idcodec.ShardOf(r.To))
		byShard[n] = append(byShard[n], r)
	}
	for n, rs := range byShard {
		sh, err := t.Shard(n)
		if err != nil {
			continue // the other side is on no configured shard: nothing to mirror to
		}
		mirrors := make([][2]uint64, len(rs))
		for i, r := range rs {
			mirrors[i] = [2]uint64{r.To, r.From}
		}
		found, err := shardsql.ExistingPairs(ctx, sh.Host.DB, sh.DB, other, mirrors)
		if err != nil {
			return classify(op, sh, err)
		}
		for _, r := range rs {
			if !found[[2]uint64{r.To, r.From}] {
				if err := missing(r); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
