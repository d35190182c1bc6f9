package testenv

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"
)

// AppUser is the MySQL user ReplicationHost creates for pinstore's
// servers: every privilege but SUPER and READ_ONLY ADMIN, so that
// read_only stops its writes as it stops a production application's
// (root ignores read_only). No password.
const AppUser = "pinstore"

// SemiSyncMasterArgs and SemiSyncReplicaArgs are the mariadbd options of
// semi-synchronous replication in the recommended set-up (docs,
// Replicas): a master waits for a replica's acknowledgement after
// syncing its binary log, without a timeout in practice, once `pinstore
// replica add` has given it a replica and turned the wait on (before
// that, with no replica, it would commit nothing); a replica
// acknowledges, and must not itself wait for acknowledgements (it would
// wait, for nothing, on every transaction it applies).
var (
	SemiSyncMasterArgs  = []string{"--rpl-semi-sync-master-enabled=OFF", "--rpl-semi-sync-slave-enabled=ON", "--rpl-semi-sync-master-wait-point=AFTER_SYNC", "--rpl-semi-sync-master-timeout=31536000000"}
	SemiSyncReplicaArgs = []string{"--rpl-semi-sync-master-enabled=OFF", "--rpl-semi-sync-slave-enabled=ON", "--rpl-semi-sync-master-wait-point=AFTER_SYNC"}
)

// ReplicationHost starts a MariaDB server for MariaDB replication: a
// binary log, server_id id, GTIDs strict (HostOptions.ServerID), args
// besides (SemiSyncMasterArgs, --read-only …), and the user AppUser created
// without binary logging, as an operator provisions each server alike.
func ReplicationHost(tb testing.TB, name string, id int, args ...string) *Host {
	tb.Helper()
	return ReplicationHostWith(tb, name, HostOptions{ServerID: id, Args: args})
}

// ReplicationHostWith is ReplicationHost with all of a host's options
// (opts.ServerID must be set): a host in a network namespace, say.
func ReplicationHostWith(tb testing.TB, name string, opts HostOptions) *Host {
	tb.Helper()
	if opts.ServerID == 0 {
		tb.Fatalf("testenv.ReplicationHostWith %s: no ServerID", name)
	}
	h := StartHostWith(tb, name, opts)
	h.Exec(tb,
		"SET SESSION sql_log_bin = 0",
		"CREATE USER IF NOT EXISTS "+AppUser+"@'%'",
		"GRANT ALL PRIVILEGES ON *.* TO "+AppUser+"@'%'",
		"REVOKE SUPER, READ_ONLY ADMIN ON *.* FROM "+AppUser+"@'%'",
	)
	return h
}

// AppDSN is the DSN of AppUser on h, naming no database.
func (h *Host) AppDSN() string { return AppUser + "@tcp(" + h.Addr() + ")/" }

// Exec runs statements as root on h, in order, on one connection; the
// first that fails fails tb.
func (h *Host) Exec(tb testing.TB, stmts ...string) {
	tb.Helper()
	db, err := openMySQL(h.DSN(), 10*time.Second)
	if err != nil {
		tb.Fatalf("testenv: %s: %v", h.name, err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err != nil {
		tb.Fatalf("testenv: %s: %v", h.name, err)
	}
	defer conn.Close()
	for _, q := range stmts {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			tb.Fatalf("testenv: %s: %s: %v", h.name, q, err)
		}
	}
}

// Query returns the first column of the first row of q, run as root on h
// ("" when there is no row or it is NULL).
func (h *Host) Query(tb testing.TB, q string, args ...any) string {
	tb.Helper()
	db, err := openMySQL(h.DSN(), 10*time.Second)
	if err != nil {
		tb.Fatalf("testenv: %s: %v", h.name, err)
	}
	defer db.Close()
	var v *string
	if err := db.QueryRow(q, args...).Scan(&v); err != nil && !errors.Is(err, sql.ErrNoRows) {
		tb.Fatalf("testenv: %s: %s: %v", h.name, q, err)
	}
	if v == nil {
		return ""
	}
	return *v
}

// Addr is "127.0.0.1:PORT", or "IP:PORT" for a host in a network
// namespace (HostOptions.IP).
func (h *Host) Addr() string {
	if h.opts.IP != "" {
		return net.JoinHostPort(h.opts.IP, strconv.Itoa(h.port))
	}
	return localAddr(h.port)
}
