package failover

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/store/shardmap"
	"github.com/pinstore/pinstore/store/topology"
)

// Home is where the shard map lives (reshard.FileHome, etcdtopo.Home): read
// it with a revision, and write it as a compare-and-swap on that revision.
type Home interface {
	ReadMap(ctx context.Context, shards int, prefix string) (*shardmap.Map, string, error)
	WriteMap(ctx context.Context, m *shardmap.Map, rev, note string) (string, error)
	String() string
}

// Credentials are a MySQL user and password; the zero value means "the
// ones the map's DSN carries".
type Credentials struct {
	User, Password string
}

// ParseCredentials reads "user:password" (or "user", no password).
func ParseCredentials(s string) (Credentials, error) {
	if s == "" {
		return Credentials{}, nil
	}
	user, pass, _ := strings.Cut(s, ":")
	if user == "" {
		return Credentials{}, errors.New(`want "user:password"`)
	}
	return Credentials{User: user, Password: pass}, nil
}

// Access is how this package reaches MariaDB servers. Servers' DSNs in
// the map carry the application's user, which should not be able to
// write to a read-only server; replication set-up and promotion need an
// administrator (SUPER or READ_ONLY ADMIN, REPLICATION SLAVE ADMIN …).
type Access struct {
	// Admin replaces the credentials of every DSN of the map for this
	// package's connections (PINSTORE_MYSQL_ADMIN); zero: the DSN's own.
	Admin Credentials
	// Replication is the user replicas connect to their master with
	// (CHANGE MASTER TO MASTER_USER, PINSTORE_REPLICATION_USER); zero:
	// Admin, or the master DSN's own.
	Replication Credentials
}

// open connects to the server of dsn as the administrator, with a small
// pool, checking that it answers.
func (a Access) open(ctx context.Context, dsn string) (*sqlx.DB, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, errors.New("DSN does not parse")
	}
	if a.Admin.User != "" {
		c.User, c.Passwd = a.Admin.User, a.Admin.Password
	}
	db, err := topology.Dial(c.FormatDSN(), 4)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s is not answering: %w", shardmap.HostAddr(dsn), err)
	}
	return db, nil
}

// source is how a replica reaches master dsn: address and the replication
// credentials.
func (a Access) source(dsn string) (host string, port int, cred Credentials, err error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", 0, cred, errors.New("DSN does not parse")
	}
	if c.Net != "tcp" {
		return "", 0, cred, fmt.Errorf("master %s is not reached over TCP: a replica cannot connect to it", shardmap.HostAddr(dsn))
	}
	h, p, err := net.SplitHostPort(c.Addr)
	if err != nil {
		h, p = c.Addr, "3306"
	}
	port, err = strconv.Atoi(p)
	if err != nil {
		return "", 0, cred, fmt.Errorf("master %s: bad port", shardmap.HostAddr(dsn))
	}
	cred = a.Replication
	if cred.User == "" {
		cred = a.Admin
	}
	if cred.User == "" {
		cred = Credentials{User: c.User, Password: c.Passwd}
	}
	return h, port, cred, nil
}

// dsnAddr is what to call a server in messages.
func dsnAddr(dsn string) string {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "?"
	}
	return c.Addr
}
