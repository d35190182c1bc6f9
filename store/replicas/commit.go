package replicas

import (
	"context"
	"database/sql"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// Commit is where one write transaction on a host's master runs: a
// connection of its own, taken from the host's pool, so that the GTID of
// the transaction can go into the request's consistency token when the
// token needs it (a client request, a host whose replicas serve reads),
// since @@last_gtid is the GTID of the last transaction of the session.
type Commit struct {
	conn *sqlx.Conn
	host string
	gtid bool // read the GTID after the commit
}

// Begin returns the Commit of a transaction on h's master for ctx.
// Errors are the driver's (no connection).
func Begin(ctx context.Context, h *topology.Host) (*Commit, error) {
	conn, err := h.DB.Connx(ctx)
	if err != nil {
		return nil, err
	}
	return &Commit{conn: conn, host: h.Name, gtid: h.ReplicaReads && collecting(ctx)}, nil
}

// Conn is the connection the transaction runs on.
func (c *Commit) Conn() *sqlx.Conn { return c.conn }

// Commit commits tx, the transaction begun on c's connection, and notes
// its GTID in the request's token when the token wants it: read in the
// commit's own round trip (the SELECT goes after the COMMIT in its text).
// A failure to read it leaves the token without it: the write stands, and
// a read with the token may then be served by a replica that lacks it only
// within the lag bound (Tracker).
func (c *Commit) Commit(ctx context.Context, tx *shardsql.Tx) error {
	if !c.gtid {
		return tx.Commit(ctx)
	}
	var last sql.NullString
	if err := tx.CommitReading(ctx, "SELECT @@last_gtid", &last); err != nil {
		return err
	}
	if p, err := ParsePos(last.String); err == nil {
		note(ctx, c.host, p)
	}
	return nil
}

// Close gives the connection back to the pool.
func (c *Commit) Close() {
	_ = c.conn.Close()
}
