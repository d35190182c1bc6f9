package shardsql

import (
	"context"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/model"
)

// listedAmongEach is the head of one check of ListedAmongEach: its index, to
// bind, and the entries of from_id's list among the to_ids that follow.
var listedAmongEach = perMapping("SELECT ?, to_id FROM {db}.{table} WHERE from_id = ? AND to_id IN (")

// Listed is one edge check of ListedAmongEach: which of Tos are on From's
// list M, in shard database DB.
type Listed struct {
	DB   DB
	M    model.Mapping
	From uint64
	Tos  []uint64
}

// ListedAmongEach is ListedAmong for many checks, all on one host, in one
// statement: a SELECT of the check's index and to_id per check, on the
// list's primary key (from_id, to_id), joined by UNION ALL. fn receives
// each (check, to_id) found; the order of rows is the server's. A check
// without Tos takes no part.
func ListedAmongEach(ctx context.Context, q sqlx.QueryerContext, checks []Listed, fn func(check int, to uint64)) error {
	var b strings.Builder
	var args []any
	for i, c := range checks {
		if len(c.Tos) == 0 {
			continue
		}
		if len(args) > 0 {
			b.WriteString(" UNION ALL ")
		}
		b.WriteString(placeholders(c.DB.sql(listedAmongEach.of(c.M)), len(c.Tos), "?", ")"))
		args = idArgs(append(args, i, c.From), c.Tos)
	}
	if len(args) == 0 {
		return nil
	}
	rows, err := q.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var i int
		var to uint64
		if err := rows.Scan(&i, &to); err != nil {
			return err
		}
		if i >= 0 && i < len(checks) {
			fn(i, to)
		}
	}
	return rows.Err()
}
