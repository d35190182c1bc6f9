package shardsql

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/model"
)

// The statements of pair_outbox, and the read of one edge.
var (
	markPair   = declare("INSERT INTO {db}.pair_outbox (mapping, from_id, to_id, created_at) VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE created_at = VALUES(created_at)")
	lockPair   = declare("SELECT 1 FROM {db}.pair_outbox WHERE mapping = ? AND from_id = ? AND to_id = ? FOR UPDATE")
	unmarkPair = declare("DELETE FROM {db}.pair_outbox WHERE mapping = ? AND from_id = ? AND to_id = ?")
	duePairs   = declare("SELECT mapping, from_id, to_id FROM {db}.pair_outbox WHERE created_at <= ? LIMIT ?")
	readEdge   = perMapping("SELECT sequence FROM {db}.{table} WHERE from_id = ? AND to_id = ?")
)

// Pair is one pair of a mapping with an inverse, forward side: M (a
// forward mapping) from From to To.
type Pair struct {
	M        model.Mapping
	From, To uint64
}

// MarkPair records in db's pair_outbox that p's inverse may not match its
// forward row, taking the row's lock: the first statement of every
// transaction that changes p's forward row.
func MarkPair(ctx context.Context, x sqlx.ExecerContext, db DB, p Pair, at time.Time) error {
	_, err := x.ExecContext(ctx, db.sql(markPair), uint8(p.M), p.From, p.To, at)
	return err
}

// LockPair locks p's pair_outbox row (FOR UPDATE) and reports whether it
// is there: when it is not, a settle that began after the last change of
// the forward row has already run.
func LockPair(ctx context.Context, q sqlx.QueryerContext, db DB, p Pair) (bool, error) {
	var one int
	err := q.QueryRowxContext(ctx, db.sql(lockPair), uint8(p.M), p.From, p.To).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// UnmarkPair deletes p's pair_outbox row: p is settled.
func UnmarkPair(ctx context.Context, x sqlx.ExecerContext, db DB, p Pair) error {
	_, err := x.ExecContext(ctx, db.sql(unmarkPair), uint8(p.M), p.From, p.To)
	return err
}

// ReadEdge reads the sequence of from→to in m's table; ok is false when
// there is no such row.
func ReadEdge(ctx context.Context, q sqlx.QueryerContext, db DB, m model.Mapping, from, to uint64) (seq int64, ok bool, err error) {
	err = q.QueryRowxContext(ctx, db.sql(readEdge.of(m)), from, to).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return seq, err == nil, err
}

// DuePairs reads, with one statement, up to n pairs per database of dbs
// (all on one host) marked at or before cutoff.
func DuePairs(ctx context.Context, q sqlx.QueryerContext, dbs []DB, cutoff time.Time, n int) ([]Pair, error) {
	query, args := unionPerDB(dbs, duePairs, cutoff, n)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Pair
	for rows.Next() {
		var p Pair
		if err := rows.Scan(&p.M, &p.From, &p.To); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// unionPerDBTagged is unionPerDB for a statement whose first placeholder
// is the index of the database in dbs (so each row says which it came
// from).
func unionPerDBTagged(dbs []DB, s stmt, args ...any) (string, []any) {
	return union(dbs, s, true, args)
}

// unionPerDB runs statement s on each of dbs, joined by UNION ALL, each
// with args: a sweep of many shards of one host in one statement.
func unionPerDB(dbs []DB, s stmt, args ...any) (string, []any) {
	return union(dbs, s, false, args)
}

func union(dbs []DB, s stmt, tagged bool, args []any) (string, []any) {
	var b strings.Builder
	all := make([]any, 0, (len(args)+1)*len(dbs))
	for i, db := range dbs {
		if i > 0 {
			b.WriteString(" UNION ALL ")
		}
		b.WriteByte('(')
		b.WriteString(db.sql(s))
		b.WriteByte(')')
		if tagged {
			all = append(all, i)
		}
		all = append(all, args...)
	}
	return b.String(), all
}
