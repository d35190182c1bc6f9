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
	MissingInverse int    `json:"missing_inverse"` // forward rows whose inverse was missing (added)
	OrphanInverse  int    `json:"orphan_inverse"`  // inverse rows with no forward row (removed)
}

// Repair finds pairs of inverse mappings with one side missing and fixes
// them, trusting the forward side (the one written first): a forward row
// without its inverse gets the inverse (the add had not finished); an
// inverse row without its forward row is removed (the remove had not
// finished). With dryRun it only counts. It is safe to run while clients
// write; a pair changed during the run is settled by the next run.
func (s *Store) Repair(ctx context.Context, dryRun bool, progress io.Writer) ([]RepairReport, error) {
	var out []RepairReport
	for _, fwd := range model.Mappings() {
		inv, ok := fwd.Inverse()
		if !ok || !fwd.Forward() {
			continue
		}
		rep := RepairReport{Mapping: fwd.String()}
		// Pass 1: forward rows whose inverse is missing.
		if err := s.scanPairs(ctx, fwd, inv, &rep.Checked, func(sh shard, e pairRow) error {
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
		if err := s.scanPairs(ctx, inv, fwd, &rep.Checked, func(_ shard, e pairRow) error {
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
			fmt.Fprintf(progress, "repair: %s: checked %d rows, %d missing inverse, %d orphan inverse\n", rep.Mapping, rep.Checked, rep.MissingInverse, rep.OrphanInverse)
		}
		out = append(out, rep)
	}
	return out, nil
}

type pairRow struct {
	from, to uint64
	seq      int64
}

// scanPairs reads every row of m on every shard, in batches, and calls
// missing(shardOfOtherSide, row) for each row whose mirror in other
// (to → from) does not exist.
func (s *Store) scanPairs(ctx context.Context, m, other model.Mapping, checked *int, missing func(shard, pairRow) error) error {
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
			if err := s.checkMirrors(ctx, t, other, got, missing); err != nil {
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
func (s *Store) checkMirrors(ctx context.Context, t *topology, other model.Mapping, rows []pairRow, missing func(shard, pairRow) error) error {
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
