package shardsql

import (
	"context"
	"strconv"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/model"
)

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
		b.WriteString("SELECT ")
		b.WriteString(strconv.Itoa(i))
		b.WriteString(", to_id FROM ")
		b.WriteString(c.DB.table(c.M.Table()))
		b.WriteString(" WHERE from_id = ? AND to_id IN (")
		args = append(args, c.From)
		for j, to := range c.Tos {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('?')
			args = append(args, to)
		}
		b.WriteByte(')')
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
