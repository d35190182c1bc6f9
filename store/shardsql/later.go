package shardsql

import (
	"context"
	"database/sql"
	"strings"

	"github.com/jmoiron/sqlx"
)

// A statement of a transaction whose result nobody reads (an outbox row,
// a count's upsert, a cache_outbox mark) need not cost a round trip of
// its own: the helpers of this package queue it on the *Tx (later), and
// it goes to the server with the next statement the transaction sends,
// as one multi-statement text, or with the COMMIT (begin.go). Order is
// kept: every statement of the *Tx sends the queue first, and the server
// runs a text's statements in order, stopping at the first that fails,
// whose error is then the error of the statement sent with it (and the
// transaction is rolled back, as for any failed statement). The pool
// needs multiStatements and interpolateParams (topology.Dial sets both),
// so that one text carries the statements and their arguments.
//
// The queued statements go as one compound statement (BEGIN NOT ATOMIC …
// END) when there are several: MariaDB answers each statement of a text
// with a packet of its own, flushed as it finishes, and this process
// wakes up to read each; a block is answered once, when it is done, and
// an error in it is still the failing statement's. A pin's create then
// cost pinstore 37 % less CPU and MariaDB 23 % less (BENCHMARKS.md,
// "Create-pin").

// Ext is what a helper that both reads and writes takes: a host's pool
// or a *Tx.
type Ext interface {
	sqlx.ExecerContext
	sqlx.QueryerContext
}

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
	q, a := t.take("; " + query)
	return q, append(a, args...)
}

// take empties the queue into one text, followed by tail, and its
// arguments, about to be sent: from then on the server may hold the
// transaction open.
func (t *Tx) take(tail string) (string, []any) {
	q, a := t.queued.String(), t.queuedArgs
	if strings.Contains(q, "; ") { // several statements: one block
		q = "BEGIN NOT ATOMIC " + q + "; END"
	}
	t.queued.Reset()
	t.queuedArgs = nil
	if t.state == txQueued {
		t.state = txOpen
	}
	return q + tail, a
}

// ExecContext runs query after the queued statements, in one round trip;
// its result is query's.
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if t.state == txDone {
		return nil, errTxDone
	}
	sctx, span := t.roundTrip(ctx, query)
	query, args = t.withQueued(query, args)
	res, err := t.conn.ExecContext(t.run(sctx), query, args...)
	endRoundTrip(span, res, err)
	return res, err
}

// QueryContext runs query after the queued statements, in one round
// trip; its rows are query's.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if t.state == txDone {
		return nil, errTxDone
	}
	sctx, span := t.roundTrip(ctx, query)
	query, args = t.withQueued(query, args)
	rows, err := t.conn.QueryContext(t.run(sctx), query, args...)
	endRoundTrip(span, nil, err)
	return rows, err
}

// QueryxContext is QueryContext for sqlx.
func (t *Tx) QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error) {
	if t.state == txDone {
		return nil, errTxDone
	}
	sctx, span := t.roundTrip(ctx, query)
	query, args = t.withQueued(query, args)
	rows, err := t.conn.QueryxContext(t.run(sctx), query, args...)
	endRoundTrip(span, nil, err)
	return rows, err
}

// QueryRowxContext is QueryContext for one row.
func (t *Tx) QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row {
	sctx, span := t.roundTrip(ctx, query)
	query, args = t.withQueued(query, args)
	row := t.conn.QueryRowxContext(t.run(t.live(sctx)), query, args...)
	endRoundTrip(span, nil, row.Err())
	return row
}

// QueryRowContext is QueryContext for one row.
func (t *Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	sctx, span := t.roundTrip(ctx, query)
	query, args = t.withQueued(query, args)
	row := t.conn.QueryRowContext(t.run(t.live(sctx)), query, args...)
	endRoundTrip(span, nil, row.Err())
	return row
}

// live is ctx while t takes statements, and a done context after: a row
// read on a finished Tx fails (with context.Canceled) instead of running
// outside any transaction.
func (t *Tx) live(ctx context.Context) context.Context {
	if t.state != txDone {
		return ctx
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	return done
}
