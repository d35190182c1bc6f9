package reshard

import (
	"context"
	"database/sql"
	"fmt"
)

// rowCounts is one shard's row count of every table on both sides, read by
// the check before the hold and carried forward by every change log entry
// applied since (applyLog), so that the pass while writes are held compares
// the counts both sides have then without reading a table: its cost grows
// with the changes applied, not with the shard's size.
//
// Why the carried counts are the counts. The source's are read in one
// snapshot with the sums of the entries its log held then (S0): the count
// then minus those sums is the count before S0's changes, and adding the
// sums of every entry applied since (S0, which is all applied by the time
// the log is empty, and every later entry) gives the count now, as long as
// every client change is logged, which the triggers make so (a change and
// its entry commit together). The target is written by the move alone
// (its own writes are never logged and no server routes to it), so its
// count now is its count at the check plus what each apply inserted minus
// what it deleted.
type rowCounts struct {
	src, dst map[string]int64 // by table
}

// add carries the counts of table forward by an apply: logged is the
// change the applied entries record on the source, written the change the
// apply made on the target.
func (c *rowCounts) add(table string, logged, written int64) {
	c.src[table] += logged
	c.dst[table] += written
}

// readCounts counts every table of tables on both sides of w: the source in
// one read-only snapshot with the sums of its change log's entries (see
// rowCounts), the target (which only the move writes) as it is. It returns
// the counts to carry forward and how many tables' counts differ now.
func readCounts(ctx context.Context, w shardWork, tables []tableInfo) (*rowCounts, int, error) {
	tx, err := w.src.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return nil, 0, err
	}
	defer tx.Rollback()
	src, err := countRows(ctx, tx, w.name, tables, false)
	if err != nil {
		return nil, 0, fmt.Errorf("count: %w", err)
	}
	var pending []struct {
		Table string `db:"tbl"`
		Sum   int64  `db:"s"`
	}
	if err := tx.SelectContext(ctx, &pending, "SELECT tbl, COALESCE(SUM(d), 0) AS s FROM "+w.name+"."+logTable+" GROUP BY tbl"); err != nil {
		return nil, 0, fmt.Errorf("sum the change log: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, 0, err
	}
	dst, err := countRows(ctx, w.dst, w.name, tables, false)
	if err != nil {
		return nil, 0, fmt.Errorf("count on the target: %w", err)
	}
	c := &rowCounts{src: map[string]int64{}, dst: map[string]int64{}}
	differ := 0
	for i, tb := range tables {
		c.src[tb.name], c.dst[tb.name] = src[i], dst[i]
		if src[i] != dst[i] {
			differ++
		}
	}
	for _, p := range pending {
		c.src[p.Table] -= p.Sum
	}
	return c, differ, nil
}

// verify returns a *mismatch for the first table of tables whose carried
// counts differ.
func (c *rowCounts) verify(shard int, tables []tableInfo) error {
	for _, tb := range tables {
		if s, d := c.src[tb.name], c.dst[tb.name]; s != d {
			return &mismatch{shard: shard, table: tb.name, what: "row count, read before the hold and carried forward by the changes applied since", src: tableSum{rows: s}, dst: tableSum{rows: d}}
		}
	}
	return nil
}
