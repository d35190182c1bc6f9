package reshard

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/pinstore/pinstore/cluster/changes"
	"github.com/pinstore/pinstore/store/shardmap"
)

// What the change stream (package changes) needs of a move, so that a
// consumer follows the range from host to host with nothing lost and
// nothing out of order:
//
//   - Every write the move makes is flagged in the binary log: its pools
//     set skip_replication on each connection (hosts.pool), so the copy,
//     the catch-up passes and the changes kept on the old copies are no
//     events. Replicas still apply flagged transactions (their default,
//     replicate_events_marked_for_skip = REPLICATE).
//   - Just before the switch, while writes are held and no write routed
//     by an older map is running, markArrival writes on the host that
//     takes the range an arrival mark naming each host the range leaves
//     and that host's binlog position then (after its last write to the
//     range). A stream that reads the mark waits until it has read the
//     leaving host that far before it tells anything the taking host
//     logged after it.

// markArrival writes the arrival marks of the switch about to be made on
// m (held): forward, on the target, naming each source; back (a revert),
// on each source, naming the target. A mark is a row of the change log
// inserted and deleted in one flagged transaction: the log stays empty,
// and the binlog carries the row.
func (mv *mover) markArrival(ctx context.Context, m *shardmap.Map, back bool) error {
	st := mv.lock.state
	type arrival struct {
		db   string   // a shard database of the range on the taking host
		from []string // the hosts the range leaves
	}
	arrive := map[string]*arrival{} // by taking host
	for sh := st.first; sh <= st.last; sh++ {
		take, leave := st.To, st.source(sh)
		if back {
			take, leave = leave, take
		}
		a := arrive[take]
		if a == nil {
			a = &arrival{db: m.DBName(sh)}
			arrive[take] = a
		}
		if !slices.Contains(a.from, leave) {
			a.from = append(a.from, leave)
		}
	}
	for take, a := range arrive {
		var rows []string
		var args []any
		for _, leave := range a.from {
			db, err := mv.hosts.db(m, leave)
			if err != nil {
				return err
			}
			var at string
			if err := db.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&at); err != nil {
				return fmt.Errorf("the binlog position of %s for the change stream: %w", leave, err)
			}
			if at == "" {
				continue // no binlog, or nothing in it: nothing to wait for
			}
			rows = append(rows, "(?, 0, ?, ?)")
			args = append(args, changes.ArrivalMark, leave, at)
		}
		if len(rows) == 0 {
			continue
		}
		db, err := mv.hosts.db(m, take)
		if err != nil {
			return err
		}
		tx, err := applyTx(ctx, db)
		if err != nil {
			return fmt.Errorf("mark the arrival on %s for the change stream: %w", take, err)
		}
		_, err = tx.ExecContext(ctx, "INSERT INTO "+a.db+"."+logTable+" (tbl, d, k1, k2) VALUES "+strings.Join(rows, ", "), args...)
		if err == nil {
			_, err = tx.ExecContext(ctx, "DELETE FROM "+a.db+"."+logTable+" WHERE seq >= LAST_INSERT_ID() AND tbl = ?", changes.ArrivalMark)
		}
		if err == nil {
			err = tx.Commit()
		}
		if err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("mark the arrival on %s for the change stream: %w", take, err)
		}
	}
	return nil
}
