package replicas

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jmoiron/sqlx"
)

// Server is what one MariaDB server says about its part in replication:
// its own binary log and, when it replicates, SHOW SLAVE STATUS. Probe
// reads it.
type Server struct {
	ServerID        uint32
	ReadOnly        bool
	LogBin          bool // it keeps a binary log (a replica needs one to be promoted)
	LogSlaveUpdates bool // it logs what it replicates (so its replicas can follow it once promoted)
	StrictGTID      bool // gtid_strict_mode
	// Binlog is @@gtid_binlog_pos: the last GTID per domain in its
	// binary log, whether it wrote it or replicated it. BinlogState is
	// @@gtid_binlog_state: the last GTID of every server per domain.
	Binlog      Pos
	BinlogState []GTID
	// Applied is @@gtid_slave_pos: what its replication has applied.
	Applied Pos
	// SemiSyncMaster and SemiSyncSlave are the semi-synchronous
	// replication switches (rpl_semi_sync_master_enabled,
	// rpl_semi_sync_slave_enabled); SemiSyncMasterOn is whether the master
	// side is in semi-synchronous mode now (it falls back to asynchronous
	// after rpl_semi_sync_master_timeout without an acknowledgement),
	// SemiSyncSlaveOn whether its replication connection acknowledges.
	SemiSyncMaster, SemiSyncSlave     bool
	SemiSyncMasterOn, SemiSyncSlaveOn bool
	// SemiSyncClients is how many replicas are connected to it
	// acknowledging (Rpl_semi_sync_master_clients). A semi-synchronous
	// master with none commits nothing until one connects.
	SemiSyncClients int

	// Replica is SHOW SLAVE STATUS; nil when it replicates from nobody.
	Replica *ReplicaStatus
}

// ReplicaStatus is the row of SHOW SLAVE STATUS that matters here.
type ReplicaStatus struct {
	MasterAddr  string // Master_Host:Master_Port
	IORunning   string // Yes, No or Connecting
	SQLRunning  string // Yes or No
	UsingGTID   string // No, Slave_Pos or Current_Pos
	Received    Pos    // Gtid_IO_Pos: what the I/O thread has received
	SecondsBehd *int64 // Seconds_Behind_Master; nil when unknown (a thread stopped)
	IOErrno     int
	IOError     string
	SQLErrno    int
	SQLError    string
}

// Running reports whether both replication threads run.
func (r *ReplicaStatus) Running() bool { return r.IORunning == "Yes" && r.SQLRunning == "Yes" }

// Broken says what stops the replica from applying what its master
// writes ("" when nothing does): a stopped or failed thread.
func (r *ReplicaStatus) Broken() string {
	switch {
	case r.SQLErrno != 0:
		return fmt.Sprintf("its SQL thread stopped on error %d: %s", r.SQLErrno, r.SQLError)
	case r.SQLRunning != "Yes":
		return "its SQL thread is stopped"
	case r.IOErrno != 0:
		return fmt.Sprintf("its I/O thread failed with error %d: %s", r.IOErrno, r.IOError)
	case r.IORunning == "No":
		return "its I/O thread is stopped"
	}
	return ""
}

// Errant lists the GTIDs of s's binary log that its replication did not
// bring (transactions written on it directly): in a domain where Binlog
// is ahead of Applied, or absent from Applied. A server that never
// replicated has none by definition.
func (s Server) Errant() Pos {
	if s.Replica == nil && len(s.Applied) == 0 {
		return nil
	}
	var out Pos
	for _, g := range s.Binlog {
		a, ok := s.Applied.Domain(g.Domain)
		if !ok || a.Seq < g.Seq {
			out = append(out, g)
		}
	}
	return out
}

// Probe reads s's replication state: one statement for its variables and
// positions, one for the semi-synchronous status and SHOW SLAVE STATUS.
func Probe(ctx context.Context, db sqlx.QueryerContext) (Server, error) {
	var s Server
	var binlog, state, applied string
	err := db.QueryRowxContext(ctx, `SELECT @@server_id, @@read_only, @@log_bin, @@log_slave_updates, @@gtid_strict_mode,
		@@gtid_binlog_pos, @@gtid_binlog_state, @@gtid_slave_pos, @@rpl_semi_sync_master_enabled, @@rpl_semi_sync_slave_enabled`).
		Scan(&s.ServerID, &s.ReadOnly, &s.LogBin, &s.LogSlaveUpdates, &s.StrictGTID, &binlog, &state, &applied, &s.SemiSyncMaster, &s.SemiSyncSlave)
	if err != nil {
		return s, fmt.Errorf("replicas.Probe: %w", err)
	}
	if s.Binlog, err = ParsePos(binlog); err == nil {
		if s.BinlogState, err = parseState(state); err == nil {
			s.Applied, err = ParsePos(applied)
		}
	}
	if err != nil {
		return s, fmt.Errorf("replicas.Probe: %w", err)
	}
	rows, err := db.QueryxContext(ctx, `SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS
		WHERE VARIABLE_NAME IN ('RPL_SEMI_SYNC_MASTER_STATUS', 'RPL_SEMI_SYNC_SLAVE_STATUS', 'RPL_SEMI_SYNC_MASTER_CLIENTS')`)
	if err != nil {
		return s, fmt.Errorf("replicas.Probe: %w", err)
	}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			rows.Close()
			return s, fmt.Errorf("replicas.Probe: %w", err)
		}
		on := strings.EqualFold(value, "ON")
		switch strings.ToUpper(name) {
		case "RPL_SEMI_SYNC_MASTER_STATUS":
			s.SemiSyncMasterOn = on
		case "RPL_SEMI_SYNC_SLAVE_STATUS":
			s.SemiSyncSlaveOn = on
		case "RPL_SEMI_SYNC_MASTER_CLIENTS":
			s.SemiSyncClients, _ = strconv.Atoi(value)
		}
	}
	if err := rows.Close(); err != nil {
		return s, fmt.Errorf("replicas.Probe: %w", err)
	}
	if s.Replica, err = slaveStatus(ctx, db); err != nil {
		return s, fmt.Errorf("replicas.Probe: %w", err)
	}
	return s, nil
}

// Stalled says why s, as a master, commits nothing now ("" when it
// does): it waits for a replica's acknowledgement of every commit and
// none is connected.
func (s Server) Stalled() string {
	if s.SemiSyncMaster && s.SemiSyncMasterOn && s.SemiSyncClients == 0 {
		return "it waits for a replica's acknowledgement of every commit (semi-synchronous replication) and no replica is connected"
	}
	return ""
}

// parseState reads @@gtid_binlog_state: one GTID per (domain, server).
func parseState(s string) ([]GTID, error) {
	var out []GTID
	for part := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		p, err := ParsePos(part)
		if err != nil {
			return nil, err
		}
		out = append(out, p...)
	}
	return out, nil
}

// slaveStatus reads SHOW SLAVE STATUS by column name (its columns vary
// between versions); nil when the server replicates from nobody.
func slaveStatus(ctx context.Context, db sqlx.QueryerContext) (*ReplicaStatus, error) {
	rows, err := db.QueryxContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	col := map[string]sql.NullString{}
	for i, c := range cols {
		col[c] = vals[i]
	}
	atoi := func(name string) int { n, _ := strconv.Atoi(col[name].String); return n }
	r := &ReplicaStatus{
		MasterAddr: col["Master_Host"].String + ":" + col["Master_Port"].String,
		IORunning:  col["Slave_IO_Running"].String,
		SQLRunning: col["Slave_SQL_Running"].String,
		UsingGTID:  col["Using_Gtid"].String,
		IOErrno:    atoi("Last_IO_Errno"),
		IOError:    col["Last_IO_Error"].String,
		SQLErrno:   atoi("Last_SQL_Errno"),
		SQLError:   col["Last_SQL_Error"].String,
	}
	if v := col["Seconds_Behind_Master"]; v.Valid {
		n, err := strconv.ParseInt(v.String, 10, 64)
		if err == nil {
			r.SecondsBehd = &n
		}
	}
	if r.Received, err = ParsePos(col["Gtid_IO_Pos"].String); err != nil {
		return nil, err
	}
	if rows.Next() {
		return nil, errors.New("more than one replication connection (multi-source replication is not supported)")
	}
	return r, rows.Err()
}
