package shardsql

import (
	"context"
	"database/sql"

	"github.com/jmoiron/sqlx"
)

// A statement of a transaction whose result nobody reads (an outbox row,
// a count's upsert, a cache_outbox mark) need not cost a round trip of
// its own: the helpers of this package queue it on the *Tx (later), and
// it goes to the server with the next statement the transaction sends,
// as one multi-statement text, or with Flush before the commit. Order is
// kept: every statement of the *Tx sends the queue first, and the server
// runs a text's statements in order, stopping at the first that fails,
// whose error is then the error of the statement sent with it (and the
// transaction is rolled back, as for any failed statement). The pool
// needs multiStatements and interpolateParams (topology.Dial sets both),
// so that one text carries the statements and their arguments.

// later queues query with args, to be sent before the transaction's next
// statement; on anything but a *Tx it runs at once.
func later(ctx context.Context, x sqlx.ExecerContext, query string, args ...any) error {
	t, ok := x.(*Tx)
	if !ok {
		_, err := x.ExecContext(ctx, query, args...)
		return err
	}
	if t.queued.Len() > 0 {
		t.queued.WriteString("; ")
	}
	t.queued.WriteString(query)
	t.queuedArgs = append(t.queuedArgs, args...)
	return nil
}

// withQueued returns query and args preceded by the queued statements,
// and empties the queue.
func (t *Tx) withQueued(query string, args []any) (string, []any) {
	if t.queued.Len() == 0 {
		return query, args
	}
	t.queued.WriteString("; ")
	t.queued.WriteString(query)
	q, a := t.queued.String(), append(t.queuedArgs, args...)
	t.queued.Reset()
	t.queuedArgs = nil
	return q, a
}

// Flush sends the queued statements, if any: before the commit.
func (t *Tx) Flush(ctx context.Context) error {
	t.queueMarks()
	if t.queued.Len() == 0 {
		return nil
	}
	q, a := t.queued.String(), t.queuedArgs
	t.queued.Reset()
	t.queuedArgs = nil
	_, err := t.Tx.ExecContext(ctx, q, a...)
	return err
}

// ExecContext runs query after the queued statements, in one round trip;
// its result is query's.
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	query, args = t.withQueued(query, args)
	return t.Tx.ExecContext(ctx, query, args...)
}

// QueryContext runs query after the queued statements, in one round
// trip; its rows are query's.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	query, args = t.withQueued(query, args)
	return t.Tx.QueryContext(ctx, query, args...)
}

// QueryxContext is QueryContext for sqlx.
func (t *Tx) QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error) {
	query, args = t.withQueued(query, args)
	return t.Tx.QueryxContext(ctx, query, args...)
}

// QueryRowxContext is QueryContext for one row.
func (t *Tx) QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row {
	query, args = t.withQueued(query, args)
	return t.Tx.QueryRowxContext(ctx, query, args...)
}

// QueryRowContext is QueryContext for one row.
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	query, args = t.withQueued(query, args)
	return t.Tx.QueryRowContext(ctx, query, args...)
}
