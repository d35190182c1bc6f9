package failover

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/internal/progress"
	"github.com/pinstore/pinstore/migrations"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/replicas"
	"github.com/pinstore/pinstore/store/shardmap"
)

// ReplicaOptions says which server to make a replica of which host.
type ReplicaOptions struct {
	Host string // the host, as the map names it
	DSN  string // the replica as the servers will reach it (the application's user)

	Home     Home
	Shards   int    // defaults a map without shards assumes
	DBPrefix string // and its prefix
	Access   Access

	// SemiSync turns semi-synchronous replication on, on the master
	// (wait point AFTER_SYNC) and the replica, before the replica starts.
	SemiSync bool
	// Rebuild copies the master's shard databases onto the server even
	// when it holds transactions the master lacks (a former master's
	// unreplicated writes): they are thrown away.
	Rebuild bool
	// Wait bounds how long the new replica may take to catch up; default
	// 5 minutes.
	Wait time.Duration
	// Dump and Client are the mariadb-dump and mariadb binaries; default
	// found on PATH.
	Dump, Client string
	Progress     io.Writer // receives progress lines (every second while the copy runs); nil for none
}

// ReplicaReport is what AddReplica did.
type ReplicaReport struct {
	Replica  string // its address
	Copied   bool   // a copy of the shard databases was loaded (else it caught up by GTID from what it held)
	From     string // GTID position replication started from
	Applied  string // position applied when it caught up
	SemiSync bool   // its replication acknowledges semi-synchronously
	Took     time.Duration
	Version  string // version of the map written ("" when it already named the replica)
}

// AddReplica makes the server at opt.DSN a replica of opt.Host's master
// and names it among the host's replicas in the map. The server must keep
// a binary log with log_slave_updates (so it can be promoted) and have
// another server_id. How it starts:
//
//   - a server with no GTID history gets a consistent copy of the host's
//     shard databases (mariadb-dump --single-transaction --gtid, loaded
//     without binary logging) and replicates from the copy's position;
//   - a server with history that the master has all of (a former master
//     whose unacknowledged transactions were rolled back, a replica
//     re-pointed) replicates from its own position, copying nothing;
//   - a server holding transactions the master lacks is refused
//     (EConflict, naming them) unless opt.Rebuild, which copies.
//
// The server is made read-only first. It returns once the replica has
// applied everything the master had when replication started.
func AddReplica(ctx context.Context, opt ReplicaOptions) (ReplicaReport, error) {
	const op = "failover.AddReplica"
	start := time.Now()
	rep := ReplicaReport{Replica: dsnAddr(opt.DSN)}
	if opt.Wait <= 0 {
		opt.Wait = 5 * time.Minute
	}
	out := opt.Progress
	if out == nil {
		out = io.Discard
	}
	m, rev, spec, err := readHost(ctx, opt.Home, opt.Shards, opt.DBPrefix, opt.Host)
	if err != nil {
		return rep, err
	}
	if _, err := mysql.ParseDSN(opt.DSN); err != nil {
		return rep, model.Errorf(model.EInvalid, "the replica's DSN does not parse")
	}
	if shardmap.HostAddr(opt.DSN) == shardmap.HostAddr(spec.Master) {
		return rep, model.Errorf(model.EInvalid, "%s is host %q's master, not a replica", rep.Replica, opt.Host)
	}
	master, err := opt.Access.open(ctx, spec.Master)
	if err != nil {
		return rep, model.Errorf(model.EUnavailable, "host %q's master: %v", opt.Host, err)
	}
	defer master.Close()
	target, err := opt.Access.open(ctx, opt.DSN)
	if err != nil {
		return rep, model.Errorf(model.EUnavailable, "the new replica: %v", err)
	}
	defer target.Close()
	ms, err := replicas.Probe(ctx, master)
	if err != nil {
		return rep, err
	}
	ts, err := replicas.Probe(ctx, target)
	if err != nil {
		return rep, err
	}
	switch {
	case !ms.LogBin:
		return rep, model.Errorf(model.EInvalid, "host %q's master keeps no binary log: start it with log_bin (docs/operations/replicas-and-failover.md)", opt.Host)
	case !ts.LogBin || !ts.LogSlaveUpdates:
		return rep, model.Errorf(model.EInvalid, "%s must keep a binary log with log_slave_updates, or it could never be promoted: start it with log_bin and log_slave_updates (docs/operations/replicas-and-failover.md)", rep.Replica)
	case ts.ServerID == ms.ServerID:
		return rep, model.Errorf(model.EInvalid, "%s has the master's server_id %d: give every server its own", rep.Replica, ms.ServerID)
	}
	copyIt := len(ts.Binlog) == 0 && len(ts.Applied) == 0
	if !copyIt {
		if errant := notIn(ts, ms); len(errant) > 0 {
			if !opt.Rebuild {
				return rep, model.Errorf(model.EConflict, "%s holds %d transactions host %q's master does not have (%s): they would be lost or break replication. "+
					"If it is a former master, these are writes no replica received before the failover; add --rebuild to replace its shard databases with a copy of the master's",
					rep.Replica, countGTIDs(errant, ms), opt.Host, replicas.Pos(errant).String())
			}
			copyIt = true
		}
	}

	// Fence it, and forget any replication it had.
	for _, q := range []string{"SET GLOBAL read_only = ON", "STOP SLAVE", "RESET SLAVE ALL"} {
		if _, err := target.ExecContext(ctx, q); err != nil {
			return rep, fmt.Errorf("%s: %s on %s: %w", op, q, rep.Replica, err)
		}
	}
	from := "current_pos"
	if copyIt {
		fmt.Fprintf(out, "replica add: copying host %s's shard databases from %s to %s\n", opt.Host, dsnAddr(spec.Master), rep.Replica)
		pos, err := copyShards(ctx, opt, m, spec.Master, master, target)
		if err != nil {
			return rep, fmt.Errorf("%s: copy: %w", op, err)
		}
		rep.Copied, rep.From, from = true, pos.String(), "slave_pos"
	} else {
		cur := ts.Binlog.Merge(ts.Applied)
		rep.From = cur.String()
		fmt.Fprintf(out, "replica add: %s has the master's history up to %s; replicating from there\n", rep.Replica, orNone(rep.From))
	}
	if err := pointAt(ctx, opt.Access, target, spec.Master, from, opt.SemiSync); err != nil {
		return rep, fmt.Errorf("%s: %w", op, err)
	}
	if _, err := target.ExecContext(ctx, "START SLAVE"); err != nil {
		return rep, fmt.Errorf("%s: START SLAVE on %s: %w", op, rep.Replica, err)
	}
	ms, err = replicas.Probe(ctx, master)
	if err != nil {
		return rep, err
	}
	fmt.Fprintf(out, "replica add: waiting for %s to apply the master's %s\n", rep.Replica, orNone(ms.Binlog.String()))
	got, err := caughtUp(ctx, target, ms.Binlog, opt.Wait)
	if err != nil {
		return rep, fmt.Errorf("%s: %s: %w", op, rep.Replica, err)
	}
	rep.Applied, rep.SemiSync = got.Applied.String(), got.SemiSyncSlaveOn
	// Only now, with the replica connected and acknowledging: a master
	// with no replica would wait for ever (SemiSyncTimeout).
	if opt.SemiSync {
		if err := semiSyncMaster(ctx, master); err != nil {
			return rep, fmt.Errorf("%s: %w", op, err)
		}
	}

	// Name it in the map (and no longer as fenced).
	next := *m
	next.Hosts = maps(m.Hosts)
	h := spec
	if !slices.ContainsFunc(h.ReplicaDSNs(), func(d string) bool { return shardmap.HostAddr(d) == shardmap.HostAddr(opt.DSN) }) {
		h = h.WithReplicas(append(h.ReplicaDSNs(), opt.DSN))
	}
	h.Fenced = slices.DeleteFunc(slices.Clone(h.Fenced), func(d string) bool { return shardmap.HostAddr(d) == shardmap.HostAddr(opt.DSN) })
	if len(h.Fenced) == 0 {
		h.Fenced = nil
	}
	next.Hosts[opt.Host] = h
	if err := next.Validate(); err != nil {
		return rep, model.Wrap(op, model.EInvalid, err.Error(), err)
	}
	if next.Version() != m.Version() {
		note := fmt.Sprintf("Rewritten by pinstore replica add (%s replicates host %s) at %s.", rep.Replica, opt.Host, time.Now().UTC().Format(time.RFC3339))
		if _, err := opt.Home.WriteMap(ctx, &next, rev, note); err != nil {
			return rep, err
		}
		rep.Version = next.Version()
	}
	rep.Took = time.Since(start)
	return rep, nil
}

// readHost reads the map from home and returns it with its revision and
// host's entry; a host the map does not name is EInvalid.
func readHost(ctx context.Context, home Home, shards int, prefix, host string) (*shardmap.Map, string, shardmap.HostSpec, error) {
	m, rev, err := home.ReadMap(ctx, shards, prefix)
	if err != nil {
		return nil, "", shardmap.HostSpec{}, err
	}
	spec, ok := m.Hosts[host]
	if !ok {
		return nil, "", spec, model.Errorf(model.EInvalid, "the shard map (%s) has no host %q", home, host)
	}
	return m, rev, spec, nil
}

// maps copies a host table.
func maps(hs map[string]shardmap.HostSpec) map[string]shardmap.HostSpec {
	out := make(map[string]shardmap.HostSpec, len(hs))
	for k, v := range hs {
		out[k] = v
	}
	return out
}

// notIn lists the GTIDs of s's history (its binary log's state and what
// it applied) that master's binary log does not hold: for each (domain,
// server), the master's last GTID of that server must be at or past it.
func notIn(s, master replicas.Server) []replicas.GTID {
	last := map[[2]uint32]uint64{}
	for _, g := range master.BinlogState {
		last[[2]uint32{g.Domain, g.Server}] = g.Seq
	}
	var out []replicas.GTID
	seen := map[[2]uint32]bool{}
	for _, g := range append(slices.Clone(s.BinlogState), s.Applied...) {
		k := [2]uint32{g.Domain, g.Server}
		if seq, ok := last[k]; (!ok || seq < g.Seq) && !seen[k] {
			seen[k] = true
			out = append(out, g)
		}
	}
	return out
}

// countGTIDs is how many transactions errant GTIDs stand for: in each
// domain, from the master's position there to the GTID's sequence number.
func countGTIDs(errant []replicas.GTID, master replicas.Server) uint64 {
	var n uint64
	for _, g := range errant {
		var base uint64
		for _, m := range master.BinlogState {
			if m.Domain == g.Domain && m.Server == g.Server {
				base = m.Seq
			}
		}
		if base == 0 {
			// None of that server's: count back to the master's position.
			if p, ok := master.Binlog.Domain(g.Domain); ok && p.Seq < g.Seq {
				base = p.Seq
			}
		}
		if g.Seq > base {
			n += g.Seq - base
		}
	}
	return n
}

// pointAt makes db replicate from master (CHANGE MASTER TO …,
// MASTER_USE_GTID=use), with semi-synchronous acknowledgement when
// semiSync. It does not start it.
func pointAt(ctx context.Context, a Access, db *sqlx.DB, master, use string, semiSync bool) error {
	host, port, cred, err := a.source(master)
	if err != nil {
		return err
	}
	q := "CHANGE MASTER TO MASTER_HOST = ?, MASTER_PORT = ?, MASTER_USER = ?, MASTER_PASSWORD = ?, MASTER_CONNECT_RETRY = 1, MASTER_USE_GTID = " + use
	if _, err := db.ExecContext(ctx, q, host, port, cred.User, cred.Password); err != nil {
		return fmt.Errorf("CHANGE MASTER TO %s: %w", dsnAddr(master), err)
	}
	v := "OFF"
	if semiSync {
		v = "ON"
	}
	// A replica acknowledges; it must not wait for acknowledgements of
	// what it applies (with log_slave_updates it would, for nothing).
	for _, q := range []string{"SET GLOBAL rpl_semi_sync_slave_enabled = " + v, "SET GLOBAL rpl_semi_sync_master_enabled = OFF"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// SemiSyncTimeout is the rpl_semi_sync_master_timeout (milliseconds) a
// master is given: a year, so that in practice it never stops waiting
// for a replica's acknowledgement and never falls back to asynchronous
// replication. A master cut off from every replica then commits nothing,
// rather than acknowledge writes a failover to one of them would lose.
const SemiSyncTimeout = 365 * 24 * 3600 * 1000

// semiSyncMaster makes db wait for a replica's acknowledgement after
// syncing its binary log and before committing (AFTER_SYNC: no other
// client sees a transaction no replica has), with no timeout in practice
// (SemiSyncTimeout), also while no replica is connected.
func semiSyncMaster(ctx context.Context, db *sqlx.DB) error {
	for _, q := range []string{
		"SET GLOBAL rpl_semi_sync_master_wait_point = 'AFTER_SYNC'",
		fmt.Sprintf("SET GLOBAL rpl_semi_sync_master_timeout = %d", SemiSyncTimeout),
		"SET GLOBAL rpl_semi_sync_master_wait_no_slave = ON",
		"SET GLOBAL rpl_semi_sync_master_enabled = ON",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// caughtUp waits until db's replication runs and has applied want, and
// returns what it then says; a thread that fails, or timeout, is an error
// saying why.
func caughtUp(ctx context.Context, db *sqlx.DB, want replicas.Pos, timeout time.Duration) (replicas.Server, error) {
	deadline := time.Now().Add(timeout)
	for {
		s, err := replicas.Probe(ctx, db)
		if err != nil {
			return s, err
		}
		if s.Replica != nil {
			if why := s.Replica.Broken(); why != "" && (s.Replica.SQLErrno != 0 || s.Replica.IOErrno != 0) {
				return s, errors.New(why)
			}
			if s.Replica.Running() && s.Applied.Covers(want) {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			return s, fmt.Errorf("has not applied %s after %v (applied %s)", want, timeout, orNone(s.Applied.String()))
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// gtidLineRE finds the position a dump was taken at (--master-data=2).
var gtidLineRE = regexp.MustCompile(`^-- SET GLOBAL gtid_slave_pos='([0-9,\- ]*)';`)

// copyShards copies the shard databases of host spec's ranges that exist
// on the master onto target in one consistent snapshot (mariadb-dump
// --single-transaction --gtid, loaded by the mariadb client with binary
// logging off), resets target's binary log, sets its gtid_slave_pos to the
// snapshot's, and returns that position.
func copyShards(ctx context.Context, opt ReplicaOptions, m *shardmap.Map, masterDSN string, master, target *sqlx.DB) (replicas.Pos, error) {
	var dbs []string
	exists := map[string]bool{}
	rows, err := master.QueryxContext(ctx, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?", m.DBPrefix+"%")
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		exists[n] = true
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	for _, r := range m.Ranges {
		if r.Host != opt.Host {
			continue
		}
		for n := r.First; n <= r.Last; n++ {
			if exists[m.DBName(n)] {
				dbs = append(dbs, m.DBName(n))
			}
		}
	}
	if len(dbs) > 0 {
		// The deployments' record goes with the shards: a promoted
		// replica is known for this deployment's.
		var n int
		if err := master.QueryRowxContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", migrations.DeploymentsDB).Scan(&n); err != nil {
			return nil, err
		}
		if n > 0 {
			dbs = append(dbs, migrations.DeploymentsDB)
		}
	}
	if _, err := target.ExecContext(ctx, "RESET MASTER"); err != nil {
		return nil, fmt.Errorf("RESET MASTER on the replica: %w", err)
	}
	if len(dbs) == 0 {
		// Nothing to copy: start from the master's position now.
		var pos string
		if err := master.QueryRowxContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
			return nil, err
		}
		p, err := replicas.ParsePos(pos)
		if err != nil {
			return nil, err
		}
		return p, setSlavePos(ctx, target, p)
	}
	dump, client := opt.Dump, opt.Client
	if dump == "" {
		dump = "mariadb-dump"
	}
	if client == "" {
		client = "mariadb"
	}
	srcCnf, err := optionFile(opt.Access.Admin, masterDSN)
	if err != nil {
		return nil, err
	}
	defer os.Remove(srcCnf)
	dstCnf, err := optionFile(opt.Access.Admin, opt.DSN)
	if err != nil {
		return nil, err
	}
	defer os.Remove(dstCnf)
	dumpCmd := exec.CommandContext(ctx, dump, append([]string{"--defaults-extra-file=" + srcCnf,
		"--single-transaction", "--gtid", "--master-data=2", "--default-character-set=utf8mb4", "--databases"}, dbs...)...)
	loadCmd := exec.CommandContext(ctx, client, "--defaults-extra-file="+dstCnf, "--default-character-set=utf8mb4",
		"--init-command=SET SESSION sql_log_bin = 0")
	var dumpErr, loadErr bytes.Buffer
	dumpCmd.Stderr, loadCmd.Stderr = &dumpErr, &loadErr
	pipe, err := dumpCmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	loadIn, err := loadCmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := loadCmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", client, err)
	}
	if err := dumpCmd.Start(); err != nil {
		loadIn.Close()
		_ = loadCmd.Wait()
		return nil, fmt.Errorf("%s: %w", dump, err)
	}
	sniff := &gtidSniffer{}
	var size atomic.Int64 // the databases' size, for the time left, once the master said it
	go func() { size.Store(dataSize(ctx, master, dbs)) }()
	out := opt.Progress
	if out == nil {
		out = io.Discard
	}
	start := time.Now()
	copied, copyErr := copyDump(loadIn, io.TeeReader(bufio.NewReaderSize(pipe, 1<<20), sniff), size.Load, time.Second, func(line string) {
		fmt.Fprintf(out, "replica add: %s\n", line)
	})
	loadIn.Close()
	if copyErr == nil {
		fmt.Fprintf(out, "replica add: copied %s of the dump in %v\n", progress.Bytes(copied), time.Since(start).Round(time.Millisecond))
	}
	derr := dumpCmd.Wait()
	lerr := loadCmd.Wait()
	switch {
	case derr != nil:
		return nil, fmt.Errorf("%s: %v: %s", dump, derr, strings.TrimSpace(dumpErr.String()))
	case lerr != nil:
		return nil, fmt.Errorf("%s: %v: %s", client, lerr, strings.TrimSpace(loadErr.String()))
	case copyErr != nil:
		return nil, copyErr
	case sniff.pos == nil:
		return nil, fmt.Errorf("%s wrote no GTID position (is the master's binary log on?)", dump)
	}
	return *sniff.pos, setSlavePos(ctx, target, *sniff.pos)
}

func setSlavePos(ctx context.Context, db *sqlx.DB, p replicas.Pos) error {
	if _, err := db.ExecContext(ctx, "SET GLOBAL gtid_slave_pos = ?", p.String()); err != nil {
		return fmt.Errorf("SET GLOBAL gtid_slave_pos: %w", err)
	}
	return nil
}

// optionFile writes a client option file (mode 0600) holding dsn's
// address and the admin's credentials (or the DSN's), so no password is
// on a command line.
func optionFile(admin Credentials, dsn string) (string, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", errors.New("DSN does not parse")
	}
	user, pass := c.User, c.Passwd
	if admin.User != "" {
		user, pass = admin.User, admin.Password
	}
	var b strings.Builder
	b.WriteString("[client]\n")
	if c.Net == "unix" {
		fmt.Fprintf(&b, "socket=%s\n", c.Addr)
	} else {
		host, port, _ := strings.Cut(c.Addr, ":")
		if port == "" {
			port = "3306"
		}
		fmt.Fprintf(&b, "host=%s\nport=%s\nprotocol=tcp\n", host, port)
	}
	fmt.Fprintf(&b, "user=%s\n", user)
	if pass != "" {
		fmt.Fprintf(&b, "password=%s\n", pass)
	}
	f, err := os.CreateTemp("", "pinstore-replica-*.cnf")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := f.Chmod(0o600); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	if _, err := f.WriteString(b.String()); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// gtidSniffer watches a dump go by for the line naming its position.
// Only lines starting with "-- " are looked at, and only their first
// 512 bytes, so the long INSERT lines cost nothing.
type gtidSniffer struct {
	line  []byte
	begun bool // a byte has been written
	start bool // at the start of a line
	keep  bool // the current line may be the one
	pos   *replicas.Pos
}

func (s *gtidSniffer) Write(p []byte) (int, error) {
	if !s.begun {
		s.begun, s.start = true, true
	}
	for _, c := range p {
		if s.start {
			s.start, s.keep, s.line = false, c == '-', s.line[:0]
		}
		if c == '\n' {
			if s.keep {
				if m := gtidLineRE.FindSubmatch(s.line); m != nil {
					if pos, err := replicas.ParsePos(string(m[1])); err == nil {
						s.pos = &pos
					}
				}
			}
			s.start = true
			continue
		}
		if s.keep && len(s.line) < 512 {
			s.line = append(s.line, c)
		}
	}
	return len(p), nil
}
