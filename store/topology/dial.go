package topology

import (
	"database/sql"
	"errors"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/store/shardsql"
)

// Dial opens a pool of at most size connections to the MySQL host at dsn
// (a DSN that names no database) with pinstore's driver settings:
// client-side interpolation (one round trip per statement), several
// statements in one text (a transaction sends the statements whose
// results it does not read with its next one: shardsql's later), UTC
// times and session time zone, and a 2 s dial timeout unless the DSN sets
// one, so a dead host fails fast. It connects lazily: a host that is down fails the
// statements sent to it, not Dial. Errors never echo the DSN.
func Dial(dsn string, size int) (*sqlx.DB, error) { return DialMetered(dsn, size, nil) }

// DialMetered is Dial with connections whose round trips m records
// (shardsql.Meter): the pools of a Router.
func DialMetered(dsn string, size int, m *shardsql.Meter) (*sqlx.DB, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, errors.New("DSN does not parse")
	}
	c.InterpolateParams = true
	c.MultiStatements = true
	c.ParseTime = true
	c.Loc = time.UTC
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Second
	}
	// No per-packet read/write timeouts: each one costs a SetDeadline
	// syscall per packet. A statement runs under its context's deadline,
	// and a transaction's statements under the transaction's, kept on the
	// socket (shardsql.Connector).
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	if _, ok := c.Params["time_zone"]; !ok {
		c.Params["time_zone"] = "'+00:00'"
	}
	connector, err := shardsql.Connector(c, m)
	if err != nil {
		return nil, errors.New("DSN is not usable")
	}
	db := sqlx.NewDb(sql.OpenDB(connector), "mysql")
	db.SetMaxOpenConns(size)
	db.SetMaxIdleConns(size)
	db.SetConnMaxLifetime(5 * time.Minute)
	db.SetConnMaxIdleTime(time.Minute)
	return db, nil
}
