package store

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
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
// the rows, in the same transactions. With dryRun it only counts. It is safe to run while clients
// write; a pair changed during the run is settled by the next run.
func (s *Store) Repair(ctx context.Context, dryRun bool, progress io.Writer) ([]RepairReport, error) {
	var out []RepairReport
	for _, fwd := range model.Mappings() {
		inv, ok := fwd.Inverse()
		if !ok || !fwd.Forward() {
			continue
		}
		rep := RepairReport{Mapping: fwd.String()}
		// Pass 1: forward rows with a deleted end, and forward rows whose
		// inverse is missing.
		dead := func(rows []pairRow) ([]pairRow, error) {
			live, gone, err := s.splitLive(ctx, fwd, rows)
			if err != nil {
				return nil, err
			}
			rep.DeadEndpoint += len(gone)
			if dryRun {
				return live, nil
			}
			for _, e := range gone {
				if err := s.removePair(ctx, "store.Repair", fwd, e.from, e.to); err != nil {
					return nil, err
				}
			}
			return live, nil
		}
		if err := s.scanPairs(ctx, fwd, inv, &rep.Checked, dead, func(sh shard, e pairRow) error {
			rep.MissingInverse++
			if dryRun {
				return nil
			}
			return s.inTx(ctx, "store.Repair", sh, func(tx *sqlx.Tx) error {
				_, err := addEdge(ctx, tx, sh, inv, e.to, e.from, e.seq)
				return err
			})
		}); err != nil {
			return out, err
		}
		// Pass 2: inverse rows whose forward row is missing.
		if err := s.scanPairs(ctx, inv, fwd, &rep.Checked, nil, func(_ shard, e pairRow) error {
			rep.OrphanInverse++
			if dryRun {
				return nil
			}
			sh, _, err := s.resolve("store.Repair", e.from, inv.From())
			if err != nil {
				return err
			}
			return s.inTx(ctx, "store.Repair", sh, func(tx *sqlx.Tx) error {
				_, err := removeEdge(ctx, tx, sh, inv, e.from, e.to)
				return err
			})
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

type pairRow struct {
	from, to uint64
	seq      int64
}

// splitLive splits forward rows of fwd into those whose both ends are live
// objects and those with a deleted (or never created) end.
func (s *Store) splitLive(ctx context.Context, fwd model.Mapping, rows []pairRow) (live, gone []pairRow, err error) {
	alive := map[uint64]bool{}
	for _, side := range []struct {
		typ idcodec.Type
		id  func(pairRow) uint64
	}{{fwd.From(), func(r pairRow) uint64 { return r.from }}, {fwd.To(), func(r pairRow) uint64 { return r.to }}} {
		seen := map[uint64]bool{}
		var ids []uint64
		for _, r := range rows {
			if id := side.id(r); !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		for start := 0; start < len(ids); start += 500 {
			objs, err := s.GetMany(ctx, ids[start:min(start+500, len(ids))], side.typ)
			if err != nil {
				return nil, nil, err
			}
			for _, o := range objs {
				alive[o.ID] = true
			}
		}
	}
	for _, r := range rows {
		if alive[r.from] && alive[r.to] {
			live = append(live, r)
		} else {
			gone = append(gone, r)
		}
	}
	return live, gone, nil
}

// scanPairs reads every row of m on every shard, in batches, keeps those
// that keep (nil: all) returns, and calls missing(shardOfOtherSide, row)
// for each row whose mirror in other (to → from) does not exist.
func (s *Store) scanPairs(ctx context.Context, m, other model.Mapping, checked *int, keep func([]pairRow) ([]pairRow, error), missing func(shard, pairRow) error) error {
	const op = "store.Repair"
	const batch = 1000
	t := s.topo.Load()
	for n := range t.shards {
		sh, _ := t.route(n)
		var lastFrom, lastTo uint64
		for {
			rows, err := sh.host.db.QueryxContext(ctx, "SELECT from_id, to_id, sequence FROM "+sh.db+"."+m.Table()+
				" WHERE from_id > ? OR (from_id = ? AND to_id > ?) ORDER BY from_id, to_id LIMIT ?", lastFrom, lastFrom, lastTo, batch)
			if err != nil {
				return classify(op, sh.host, err)
			}
			var got []pairRow
			for rows.Next() {
				var r pairRow
				if err := rows.Scan(&r.from, &r.to, &r.seq); err != nil {
					rows.Close()
					return classify(op, sh.host, err)
				}
				got = append(got, r)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return classify(op, sh.host, err)
			}
			*checked += len(got)
			check := got
			if keep != nil {
				if check, err = keep(got); err != nil {
					return err
				}
			}
			if err := s.checkMirrors(ctx, t, other, check, missing); err != nil {
				return err
			}
			if len(got) < batch {
				break
			}
			lastFrom, lastTo = got[len(got)-1].from, got[len(got)-1].to
		}
	}
	return nil
}

// checkMirrors looks up the mirror (to → from) of every row in other, one
// statement per shard, and reports the rows whose mirror is missing.
func (s *Store) checkMirrors(ctx context.Context, t *layout, other model.Mapping, rows []pairRow, missing func(shard, pairRow) error) error {
	const op = "store.Repair"
	byShard := map[int][]pairRow{}
	for _, r := range rows {
		n := int(idcodec.ShardOf(r.to))
		byShard[n] = append(byShard[n], r)
	}
	for n, rs := range byShard {
		sh, err := t.route(n)
		if err != nil {
			continue // the other side is on no configured shard: nothing to mirror to
		}
		var q strings.Builder
		q.WriteString("SELECT from_id, to_id FROM " + sh.db + "." + other.Table() + " WHERE (from_id, to_id) IN (")
		args := make([]any, 0, 2*len(rs))
		for i, r := range rs {
			if i > 0 {
				q.WriteByte(',')
			}
			q.WriteString("(?,?)")
			args = append(args, r.to, r.from)
		}
		q.WriteByte(')')
		found := map[[2]uint64]bool{}
		res, err := sh.host.db.QueryContext(ctx, q.String(), args...)
		if err != nil {
			return classify(op, sh.host, err)
		}
		for res.Next() {
			var k [2]uint64
			if err := res.Scan(&k[0], &k[1]); err != nil {
				res.Close()
				return classify(op, sh.host, err)
			}
			found[k] = true
		}
		res.Close()
		for _, r := range rs {
			if !found[[2]uint64{r.to, r.from}] {
				if err := missing(sh, r); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
