package backup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinstore/pinstore/internal/tracing"
	"github.com/pinstore/pinstore/store/shardmap"
)

// MapReader is where the shard map in force is read (reshard.FileHome,
// etcdtopo.Home): the map with an opaque revision.
type MapReader interface {
	ReadMap(ctx context.Context, shards int, prefix string) (*shardmap.Map, string, error)
	String() string
}

// Options says which host to back up, where, and how.
type Options struct {
	Host     string // as the map names it
	To       string // the backup directory: new or empty
	Map      MapReader
	Shards   int    // defaults a map without shards assumes
	DBPrefix string // and its prefix
	Admin    Credentials
	Tools    Tools
	// CatchUp is how long a replica may take to reach its master's
	// position to be the source; default 5 s.
	CatchUp time.Duration
	// Version is pinstore's version, recorded in the manifest.
	Version  string
	Progress io.Writer
}

// Backup takes a hot physical backup of opt.Host into opt.To: from a
// replica that has caught up with its master when the host has one, else
// from the master, writes going on. It then sums every shard table in one
// snapshot of the source, copies the source's binary logs from the backup's
// position to the snapshot's, and writes the manifest. A map that changed
// the host's ranges or servers meanwhile fails the backup.
func Backup(ctx context.Context, opt Options) (_ *Manifest, err error) {
	p := orDiscard(opt.Progress)
	tools, err := opt.Tools.resolve()
	if err != nil {
		return nil, err
	}
	if opt.To == "" {
		return nil, errors.New("no backup directory")
	}
	if err := checkEmpty(opt.To, "backup directory"); err != nil {
		return nil, err
	}
	m, rev, err := opt.Map.ReadMap(ctx, opt.Shards, opt.DBPrefix)
	if err != nil {
		return nil, fmt.Errorf("read the map: %w", err)
	}
	spec, ok := m.Hosts[opt.Host]
	if !ok {
		return nil, fmt.Errorf("host %q is not in the map %s (hosts: %s)", opt.Host, opt.Map, hostNames(m))
	}
	ranges := hostRanges(m, opt.Host)
	if len(ranges) == 0 {
		return nil, fmt.Errorf("host %q holds no range in the map %s: nothing to back up", opt.Host, opt.Map)
	}
	// A backup that fails because the host changed under it (its source
	// promoted, fenced or killed by a failover) says so.
	defer func() {
		if err == nil || errors.Is(err, errMapChanged) {
			return
		}
		m2, rev2, rerr := opt.Map.ReadMap(context.WithoutCancel(ctx), opt.Shards, opt.DBPrefix)
		if rerr != nil {
			return
		}
		if why := sameHost(m, m2, opt.Host); why != nil {
			err = fmt.Errorf("%w (revision %s → %s: %v), which is why it failed: %v; nothing was recorded as a backup in %s: delete it and back up again", errMapChanged, rev, rev2, why, err, opt.To)
		}
	}()
	var src endpoint
	var role, why string
	err = tracing.Phase(ctx, "backup choose source", func(ctx context.Context) error {
		src, role, why, err = chooseSource(ctx, opt, spec)
		trace.SpanFromContext(ctx).SetAttributes(attribute.String("pinstore.host", opt.Host), attribute.String("pinstore.backup.source_role", role))
		return err
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(p, "backup: host %s: copying %s %s (%s); ranges %s; map version %s\n", opt.Host, role, src, why, spanList(ranges), m.Version())
	db, err := src.open(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	srv, datadir, err := serverFacts(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	toolV, err := toolVersion(ctx, tools.Backup)
	if err != nil {
		return nil, err
	}
	if sv := serverVersion(srv.Version); sv != toolV {
		return nil, fmt.Errorf("mariadb-backup %s (%s) is not the server's version %s (%s): install the mariadb-backup of the server's version", toolV, tools.Backup, sv, src)
	}
	if err := emptyTarget(opt.To, "backup directory"); err != nil {
		return nil, err
	}
	man := &Manifest{
		Format: formatV1, Shards: m.Shards, DBPrefix: m.DBPrefix,
		Host: opt.Host, Source: src.String(), SourceRole: role, Ranges: ranges,
		MapVersion: m.Version(), MapRev: rev, Server: srv,
		Started: time.Now().UTC(), PinstoreVersion: opt.Version, MariaDBBackupVersion: toolV,
	}
	copyStart := time.Now()
	err = tracing.Phase(ctx, "backup mariadb-backup", func(ctx context.Context) error {
		if err := runBackup(ctx, p, tools, src, datadir, srv, opt.To); err != nil {
			return err
		}
		man.BinlogFile, man.BinlogPos, man.GTID, err = readBinlogInfo(filepath.Join(opt.To, DataDir))
		return err
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(p, "backup: copied %d MB in %v at GTID %s (%s:%d); summing the shard tables\n", dirSize(filepath.Join(opt.To, DataDir))>>20,
		time.Since(copyStart).Round(time.Millisecond), orNone(man.GTID), man.BinlogFile, man.BinlogPos)

	var snapFile string
	err = tracing.Phase(ctx, "backup checksums", func(ctx context.Context) (err error) {
		snapFile, err = sumSnapshot(ctx, db, man, p)
		return err
	})
	if err != nil {
		return nil, err
	}
	// The binary logs between the copy and the snapshot, for verify's
	// replay; none when nothing was written in between.
	err = tracing.Phase(ctx, "backup binlog copy", func(ctx context.Context) error {
		if man.Check.GTID == man.GTID {
			return os.MkdirAll(filepath.Join(opt.To, BinlogDir), 0o750)
		}
		return copyTail(ctx, tools, src, man.BinlogFile, snapFile, filepath.Join(opt.To, BinlogDir))
	})
	if err != nil {
		return nil, err
	}
	err = tracing.Phase(ctx, "backup manifest", func(ctx context.Context) error {
		m2, rev2, err := opt.Map.ReadMap(ctx, opt.Shards, opt.DBPrefix)
		if err != nil {
			return fmt.Errorf("read the map again: %w", err)
		}
		if err := sameHost(m, m2, opt.Host); err != nil {
			return fmt.Errorf("%w (revision %s → %s: %v): this copy may not hold what the map says the host held; nothing was recorded as a backup in %s: delete it and back up again", errMapChanged, rev, rev2, err, opt.To)
		}
		man.Ended = time.Now().UTC()
		man.DataBytes = dirSize(filepath.Join(opt.To, DataDir))
		man.BinlogBytes = dirSize(filepath.Join(opt.To, BinlogDir))
		return man.write(opt.To)
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(p, "backup: done in %v: %d MB of data, %d KB of binary log; manifest %s; not yet verified: run pinstore backup verify %s\n",
		man.Ended.Sub(man.Started).Round(time.Millisecond), man.DataBytes>>20, man.BinlogBytes>>10, filepath.Join(opt.To, ManifestFile), opt.To)
	return man, nil
}

func hostNames(m *shardmap.Map) string {
	var hs []string
	for h := range m.Hosts {
		hs = append(hs, h)
	}
	sort.Strings(hs)
	return strings.Join(hs, ", ")
}

func hostRanges(m *shardmap.Map, host string) []ShardSpan {
	var out []ShardSpan
	for _, r := range m.Ranges {
		if r.Host == host {
			out = append(out, ShardSpan{First: r.First, Last: r.Last})
		}
	}
	return out
}

func spanList(s []ShardSpan) string {
	parts := make([]string, len(s))
	for i, r := range s {
		parts[i] = r.String()
	}
	return strings.Join(parts, ",")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// chooseSource picks a replica that answers, replicates and has reached
// its master's position, else the master.
func chooseSource(ctx context.Context, opt Options, spec shardmap.HostSpec) (endpoint, string, string, error) {
	master, err := newEndpoint(spec.Master, opt.Admin)
	if err != nil {
		return endpoint{}, "", "", fmt.Errorf("host %s master: %w", opt.Host, err)
	}
	reps := spec.ReplicaDSNs()
	if len(reps) == 0 {
		return master, "master", "the host has no replica", nil
	}
	wait := opt.CatchUp
	if wait <= 0 {
		wait = 5 * time.Second
	}
	mdb, err := master.open(ctx)
	if err != nil {
		return endpoint{}, "", "", fmt.Errorf("host %s master: %w", opt.Host, err)
	}
	defer mdb.Close()
	var pos string
	if err := mdb.QueryRowContext(ctx, "SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		return endpoint{}, "", "", fmt.Errorf("host %s master %s: %w", opt.Host, master, err)
	}
	var whyNot []string
	for _, dsn := range reps {
		r, err := newEndpoint(dsn, opt.Admin)
		if err != nil {
			continue
		}
		if why := caughtUp(ctx, r, pos, wait); why != "" {
			whyNot = append(whyNot, r.String()+": "+why)
			continue
		}
		return r, "replica", "caught up with the master at " + orNone(pos), nil
	}
	return master, "master", "no replica is caught up: " + strings.Join(whyNot, "; "), nil
}

// caughtUp says why the replica at r cannot be the source ("" if it can).
func caughtUp(ctx context.Context, r endpoint, pos string, wait time.Duration) string {
	db, err := r.open(ctx)
	if err != nil {
		return "does not answer"
	}
	defer db.Close()
	rows, err := db.QueryxContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return err.Error()
	}
	st := map[string]any{}
	found := rows.Next()
	if found {
		err = rows.MapScan(st)
	}
	rows.Close()
	switch {
	case err != nil:
		return err.Error()
	case !found:
		return "not replicating"
	case fmt.Sprintf("%s", st["Slave_IO_Running"]) != "Yes" || fmt.Sprintf("%s", st["Slave_SQL_Running"]) != "Yes":
		return "replication is stopped"
	}
	var got sql.NullInt64
	if err := db.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, ?)", pos, wait.Seconds()).Scan(&got); err != nil {
		return err.Error()
	}
	if !got.Valid || got.Int64 != 0 {
		return fmt.Sprintf("has not applied the master's %s within %v", pos, wait)
	}
	return ""
}

// serverFacts reads what the manifest keeps of the source, and its data
// directory. A server without a binary log is refused.
func serverFacts(ctx context.Context, db interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (Server, string, error) {
	var s Server
	var datadir string
	var logBin int
	err := db.QueryRowContext(ctx, `SELECT VERSION(), @@innodb_page_size, @@innodb_data_file_path, @@innodb_undo_tablespaces,
		@@character_set_server, @@collation_server, @@lower_case_table_names, @@datadir, @@log_bin`).
		Scan(&s.Version, &s.PageSize, &s.DataFilePath, &s.UndoTablespaces, &s.CharacterSet, &s.Collation, &s.LowerCaseTableNm, &datadir, &logBin)
	if err != nil {
		return s, "", fmt.Errorf("read the server's settings: %w", err)
	}
	if logBin == 0 {
		return s, "", errors.New("the server keeps no binary log (log_bin is OFF): a backup's checks and a point-in-time restore need it; start mariadbd with --log-bin and a --server-id")
	}
	return s, datadir, nil
}

// runBackup runs mariadb-backup --backup into to/data, its output in
// to/backup.log, printing its progress every few seconds.
func runBackup(ctx context.Context, p io.Writer, tools Tools, src endpoint, datadir string, srv Server, to string) error {
	opts, err := src.optionFile(to)
	if err != nil {
		return err
	}
	defer os.Remove(opts)
	logf, err := os.Create(filepath.Join(to, LogFile))
	if err != nil {
		return fmt.Errorf("backup log: %w", err)
	}
	defer logf.Close()
	var files atomic.Int64
	count := &lineProgress{fn: func(l string) {
		if strings.Contains(l, "...done") {
			files.Add(1)
		}
	}}
	done := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait() // no progress line after the return
	defer close(done)
	target := filepath.Join(to, DataDir)
	wg.Go(func() {
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(p, "backup: %v: %d files, %d MB copied\n", time.Since(start).Round(time.Second), files.Load(), dirSize(target)>>20)
			}
		}
	})
	args := []string{"--defaults-file=" + opts, "--backup", "--target-dir=" + target, "--datadir=" + datadir,
		"--innodb-page-size=" + strconv.Itoa(srv.PageSize), "--innodb-data-file-path=" + srv.DataFilePath}
	if err := run(ctx, io.MultiWriter(logf, count), nil, tools.Backup, args...); err != nil {
		return fmt.Errorf("mariadb-backup (log %s): %w", filepath.Join(to, LogFile), err)
	}
	return nil
}

// readBinlogInfo reads mariadb-backup's record of the backup's position.
func readBinlogInfo(dir string) (file string, pos int64, gtid string, err error) {
	var b []byte
	for _, n := range []string{"mariadb_backup_binlog_info", "xtrabackup_binlog_info"} {
		if b, err = os.ReadFile(filepath.Join(dir, n)); err == nil {
			break
		}
	}
	if err != nil {
		return "", 0, "", fmt.Errorf("mariadb-backup wrote no binlog position (mariadb_backup_binlog_info): %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return "", 0, "", fmt.Errorf("mariadb-backup's binlog position %q does not parse", strings.TrimSpace(string(b)))
	}
	pos, err = strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return "", 0, "", fmt.Errorf("mariadb-backup's binlog position %q does not parse", strings.TrimSpace(string(b)))
	}
	if len(f) > 2 {
		gtid = f[2]
	}
	if _, err := ParseGTID(gtid); err != nil {
		return "", 0, "", fmt.Errorf("mariadb-backup's GTID: %w", err)
	}
	return f[0], pos, gtid, nil
}

// sumSnapshot sums every shard table of man's ranges in one consistent
// snapshot of the source and records it with its GTID in man.Check; it
// returns the snapshot's binary log file.
func sumSnapshot(ctx context.Context, db *sqlx.DB, man *Manifest, p io.Writer) (string, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return "", fmt.Errorf("checksums: %w", err)
	}
	defer conn.Close()
	// The snapshot and its binary log position are taken together
	// (binlog_snapshot_file/position describe the transaction's snapshot).
	for _, q := range []string{"SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ", "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return "", fmt.Errorf("checksums: %s: %w", q, err)
		}
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK") //nolint:errcheck // the connection is closed next
	tx := conn
	var file string
	var pos int64
	var name string
	if err := tx.QueryRowContext(ctx, "SHOW STATUS LIKE 'binlog_snapshot_file'").Scan(&name, &file); err != nil {
		return "", fmt.Errorf("checksums: binlog_snapshot_file: %w", err)
	}
	if err := tx.QueryRowContext(ctx, "SHOW STATUS LIKE 'binlog_snapshot_position'").Scan(&name, &pos); err != nil {
		return "", fmt.Errorf("checksums: binlog_snapshot_position: %w", err)
	}
	var gtid sql.NullString
	if err := tx.QueryRowContext(ctx, "SELECT BINLOG_GTID_POS(?, ?)", file, pos).Scan(&gtid); err != nil || !gtid.Valid {
		return "", fmt.Errorf("checksums: the GTID of %s:%d: %v", file, pos, err)
	}
	at, err := ParseGTID(gtid.String)
	if err != nil {
		return "", fmt.Errorf("checksums: %w", err)
	}
	base, _ := ParseGTID(man.GTID)
	if !at.Covers(base) {
		return "", fmt.Errorf("checksums: the snapshot's position %s is before the backup's %s", at, base)
	}
	last := time.Now()
	sums, err := checksums(ctx, tx, man.DBPrefix, man.Databases(), func(done, total int) {
		if time.Since(last) > 2*time.Second || done == total {
			last = time.Now()
			fmt.Fprintf(p, "backup: checksums: %d/%d shard databases\n", done, total)
		}
	})
	if err != nil {
		return "", err
	}
	man.Check = Check{GTID: at.String(), Databases: sums}
	return file, nil
}

// copyTail copies the source's binary logs from file first to file last
// (inclusive) into dir, raw.
func copyTail(ctx context.Context, tools Tools, src endpoint, first, last, dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("binlog copy: %w", err)
	}
	db, err := src.open(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	logs, err := binaryLogs(ctx, db)
	if err != nil {
		return err
	}
	var files []string
	in := false
	for _, l := range logs {
		if l == first {
			in = true
		}
		if in {
			files = append(files, l)
		}
		if l == last {
			break
		}
	}
	if len(files) == 0 || files[len(files)-1] != last {
		return fmt.Errorf("binlog copy: %s no longer holds %s … %s (it holds %s): its binary logs were purged during the backup", src, first, last, strings.Join(logs, ", "))
	}
	opts, err := src.optionFile(dir)
	if err != nil {
		return err
	}
	defer os.Remove(opts)
	args := append([]string{"--defaults-file=" + opts, "--read-from-remote-server", "--raw", "--result-file=" + dir + "/"}, files...)
	if err := run(ctx, nil, nil, tools.Binlog, args...); err != nil {
		return fmt.Errorf("binlog copy: %w", err)
	}
	return nil
}

// binaryLogs lists the server's binary log files, oldest first.
func binaryLogs(ctx context.Context, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SHOW BINARY LOGS")
	if err != nil {
		return nil, fmt.Errorf("SHOW BINARY LOGS: %w", err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		var name string
		vals[0] = &name
		for i := 1; i < len(cols); i++ {
			vals[i] = new(sql.RawBytes)
		}
		if err := rows.Scan(vals...); err != nil {
			return nil, fmt.Errorf("SHOW BINARY LOGS: %w", err)
		}
		out = append(out, name)
	}
	return out, rows.Err()
}

// errMapChanged is a backup refused because the host's ranges or master
// changed while it ran.
var errMapChanged = errors.New("the map changed while the backup ran")

// sameHost says how the host's ranges or servers differ between a and b
// (nil: they do not).
func sameHost(a, b *shardmap.Map, host string) error {
	ra, rb := hostRanges(a, host), hostRanges(b, host)
	if spanList(ra) != spanList(rb) {
		return fmt.Errorf("host %s held %s, now %s", host, orNone(spanList(ra)), orNone(spanList(rb)))
	}
	sa, sb := a.Hosts[host], b.Hosts[host]
	if shardmap.HostAddr(sa.Master) != shardmap.HostAddr(sb.Master) {
		return fmt.Errorf("host %s's master changed (a failover)", host)
	}
	return nil
}
