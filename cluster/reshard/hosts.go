package reshard

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
	"github.com/pinstore/pinstore/store/topology"
)

// hosts is a move's own connection pools, one per DSN, opened on first use
// with topology.Dial (so with the servers' driver settings) and closed when
// the move ends. It is safe for concurrent use.
type hosts struct {
	size  int // connections per pool
	mu    sync.Mutex
	pools map[string]*sqlx.DB
	ddl   map[*sqlx.DB]*sync.Mutex
}

func newHosts(size int) *hosts {
	return &hosts{size: size, pools: map[string]*sqlx.DB{}, ddl: map[*sqlx.DB]*sync.Mutex{}}
}

// ddlLock is the lock a move holds around each trigger statement, and each
// drop of a database with triggers, that it sends to the host of db: one
// at a time per host. MariaDB (10.11) running such statements at once on
// one server can leave a trigger file's backup behind (table.TRG-) after
// they succeed, and that stray file then makes DROP DATABASE fail with
// "Directory not empty". Across processes, a MariaDB user lock on the
// server does the same (execHostLocked).
func (h *hosts) ddlLock(db *sqlx.DB) *sync.Mutex {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.ddl[db]
	if !ok {
		l = &sync.Mutex{}
		h.ddl[db] = l
	}
	return l
}

// pool returns the pool for dsn, opening it the first time.
func (h *hosts) pool(dsn string) (*sqlx.DB, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if db, ok := h.pools[dsn]; ok {
		return db, nil
	}
	db, err := topology.Dial(flagged(dsn), h.size)
	if err != nil {
		return nil, err
	}
	h.pools[dsn] = db
	return db, nil
}

// db is the pool of the host the map names name. A host missing from the
// map (an operator removed it during a move) is EConflict, never a default
// DSN.
func (h *hosts) db(m *shardmap.Map, name string) (*sqlx.DB, error) {
	spec, ok := m.Hosts[name]
	if !ok || spec.Master == "" {
		return nil, model.Errorf(model.EConflict, "host %q of the move is no longer in the shard map; put it back to finish or roll back the move", name)
	}
	return h.pool(spec.Master)
}

// flagged is dsn with skip_replication set on every connection: every
// write a move makes is flagged in the binary log, so the change stream
// tells none of them (stream.go). A DSN that does not parse is left as it
// is, for Dial to refuse.
func flagged(dsn string) string {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return dsn
	}
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	c.Params["skip_replication"] = "1"
	return c.FormatDSN()
}

// close closes every pool. An error closing one (a connection already
// broken) changes nothing the move did, so it is not reported.
func (h *hosts) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for dsn, db := range h.pools {
		_ = db.Close()
		delete(h.pools, dsn)
	}
}

// serverID identifies a MySQL server whatever address reaches it.
func serverID(ctx context.Context, db *sqlx.DB) (string, error) {
	var host, dir string
	var port int
	if err := db.QueryRowContext(ctx, "SELECT @@hostname, @@port, @@datadir").Scan(&host, &port, &dir); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s:%d:%s", host, port, dir), nil
}
