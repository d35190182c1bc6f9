package replicas

import (
	"context"
	"database/sql"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/store/topology"
)

// Commit is where one write transaction on a host's master runs, so that
// its GTID can go into the request's consistency token: on a connection
// of its own when the token needs it (a client request, a host whose
// replicas serve reads), since @@last_gtid is the GTID of the last
// transaction of the session; on the pool otherwise, costing nothing.
type Commit struct {
	db   *sqlx.DB
	conn *sqlx.Conn // nil when no GTID is wanted
	host string
}

// Begin returns the Commit of a transaction on h's master for ctx.
// Errors are the driver's (no connection).
func Begin(ctx context.Context, h *topology.Host) (*Commit, error) {
	c := &Commit{db: h.DB, host: h.Name}
	if !h.ReplicaReads || !collecting(ctx) {
		return c, nil
	}
	conn, err := h.DB.Connx(ctx)
	if err != nil {
		return nil, err
	}
	c.conn = conn
	return c, nil
}

// BeginTxx starts the transaction.
func (c *Commit) BeginTxx(ctx context.Context, opts *sql.TxOptions) (*sqlx.Tx, error) {
	if c.conn != nil {
		return c.conn.BeginTxx(ctx, opts)
	}
	return c.db.BeginTxx(ctx, opts)
}

// Committed notes the GTID of the transaction just committed in the
// request's token. A failure to read it leaves the token without it: the
// write stands, and a read with the token may then be served by a replica
// that lacks it only within the lag bound (Tracker).
func (c *Commit) Committed(ctx context.Context) {
	if c.conn == nil {
		return
	}
	var last string
	if err := c.conn.QueryRowxContext(context.WithoutCancel(ctx), "SELECT @@last_gtid").Scan(&last); err != nil {
		return
	}
	if p, err := ParsePos(last); err == nil {
		note(ctx, c.host, p)
	}
}

// Close gives the connection back to the pool.
func (c *Commit) Close() {
	if c.conn != nil {
		_ = c.conn.Close()
	}
}
