package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"time"

	"github.com/pinstore/pinstore/cluster/backup"
	"github.com/pinstore/pinstore/store/shardmap"
)

// runBackups runs the backup commands: backup, backup verify, binlogs,
// restore (docs/backups.md).
func runBackups(ctx context.Context, cmd string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	switch cmd {
	case "binlogs":
		return runBinlogs(ctx, args, getenv, stdout, stderr)
	case "restore":
		return runRestore(ctx, args, getenv, stdout, stderr)
	}
	return runBackup(ctx, args, getenv, stdout, stderr)
}

const backupUsage = "usage: pinstore backup --host HOST --to DIR | backup verify DIR"

// runBackup is `pinstore backup --host HOST --to DIR` (a hot backup of a
// host, package backup) and `pinstore backup verify DIR` (a backup
// restored into a scratch mariadbd and checked against its manifest).
func runBackup(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if helpAsked(args) {
		fmt.Fprintln(stdout, backupUsage)
		return nil
	}
	if len(args) > 0 && args[0] == "verify" {
		return runBackupVerify(ctx, args[1:], stdout, stderr)
	}
	fs := newFlags("backup", "backup --host HOST --to DIR [flags]\n\ntakes a hot physical backup (mariadb-backup) of HOST from a caught-up replica, else its master,\nwrites going on; DIR (new or empty) gets the copy, the source's binary logs to its checksums'\nposition and manifest.json. Run it on the machine of the server copied (mariadb-backup reads\nits data directory).", stderr)
	host := fs.String("host", "", "the host, as the shard map names it (required)")
	to := fs.String("to", "", "the backup directory, new or empty (required)")
	catchUp := fs.Duration("catch-up", 5*time.Second, "how long a replica may take to reach its master's position to be the source")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("backup: unexpected arguments %q", fs.Args())
	}
	if *host == "" || *to == "" {
		fs.Usage()
		return errors.New("backup: --host and --to are required")
	}
	admin, err := adminCredentials(getenv)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	shards, prefix, err := mapDefaults(getenv)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	home, closeHome, _, err := mapHome(ctx, getenv, "backup")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer closeHome()
	_, err = backup.Backup(ctx, backup.Options{
		Host: *host, To: *to, Map: home, Shards: shards, DBPrefix: prefix, Admin: admin,
		CatchUp: *catchUp, Version: pinstoreVersion(), Progress: stdout,
	})
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}

func runBackupVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("backup verify", "backup verify DIR [flags]\n\nrestores the backup in DIR into a scratch mariadbd, replays its binary logs to its checksums'\nposition, compares every shard table with the manifest and records the result in it", stderr)
	scratch := fs.String("scratch", "", "where the scratch data directory goes (default the system's temporary directory); it needs the backup's size")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("backup verify: name one backup directory")
	}
	if _, err := backup.Verify(ctx, fs.Arg(0), *scratch, backup.Tools{}, stdout); err != nil {
		return fmt.Errorf("backup verify: %w", err)
	}
	return nil
}

// runBinlogs is `pinstore binlogs --host HOST --to DIR`: the host's
// master's binary logs copied as they are written, for point-in-time
// restores.
func runBinlogs(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("binlogs", "binlogs --host HOST --to DIR [--once]\n\ncopies the binary logs of HOST's master into DIR/<master's address>/ (mariadb-binlog\n--read-from-remote-server --raw), following it until stopped (and a failover to a new master);\nwith --once, copies what the master has now and exits", stderr)
	host := fs.String("host", "", "the host, as the shard map names it (required)")
	to := fs.String("to", "", "the directory of the copies (required)")
	once := fs.Bool("once", false, "copy up to the master's current position and exit")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("binlogs: unexpected arguments %q", fs.Args())
	}
	if *host == "" || *to == "" {
		fs.Usage()
		return errors.New("binlogs: --host and --to are required")
	}
	admin, err := adminCredentials(getenv)
	if err != nil {
		return fmt.Errorf("binlogs: %w", err)
	}
	shards, prefix, err := mapDefaults(getenv)
	if err != nil {
		return fmt.Errorf("binlogs: %w", err)
	}
	home, closeHome, _, err := mapHome(ctx, getenv, "binlogs")
	if err != nil {
		return fmt.Errorf("binlogs: %w", err)
	}
	defer closeHome()
	err = backup.CopyBinlogs(ctx, backup.BinlogOptions{Host: *host, To: *to, Map: home, Shards: shards, DBPrefix: prefix, Admin: admin, Once: *once, Progress: stdout})
	if err != nil {
		return fmt.Errorf("binlogs: %w", err)
	}
	return nil
}

// runRestore is `pinstore restore`: a backup into a new data directory,
// to its own position or, with the binary logs, to a GTID or a time.
func runRestore(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("restore", "restore --backup DIR --datadir NEW [--binlogs DIR] [--to-gtid G | --to-time T] [--shards LIST] [--load]\n\nprepares a copy of the backup in NEW (new or empty), starts a scratch mariadbd on it, replays the\nbinary logs to the point asked, checks it, and stops it cleanly: NEW is a data directory for a\nmariadbd of the backup's version. With --load the restored shard databases replace the ones on\nthe masters the map names for them (what they held is kept aside).", stderr)
	dir := fs.String("backup", "", "the backup directory (required)")
	datadir := fs.String("datadir", "", "the new data directory, new or empty (required)")
	binlogs := fs.String("binlogs", "", "the binary logs copied since the backup (pinstore binlogs' --to)")
	toGTID := fs.String("to-gtid", "", "replay up to and including this transaction (a GTID position, e.g. 0-1-4242)")
	toTime := fs.String("to-time", "", "replay the transactions stamped before this time (RFC 3339, or 2006-01-02 15:04:05 in UTC; a second's resolution)")
	only := fs.String("shards", "", "the shards to restore (e.g. 0-7,12); the others' databases are dropped from the copy. Required when some of the backup's ranges have moved since")
	load := fs.Bool("load", false, "load the restored shard databases into their masters in the map, over what they hold")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("restore: unexpected arguments %q", fs.Args())
	}
	if *dir == "" || *datadir == "" {
		fs.Usage()
		return errors.New("restore: --backup and --datadir are required")
	}
	opt := backup.RestoreOptions{Backup: *dir, DataDir: *datadir, Binlogs: *binlogs, ToGTID: *toGTID, Load: *load, Progress: stdout}
	if *toTime != "" {
		t, err := parseTime(*toTime)
		if err != nil {
			return fmt.Errorf("restore: --to-time: %w", err)
		}
		opt.ToTime = t
	}
	if *only != "" {
		for _, part := range strings.Split(*only, ",") {
			first, last, err := shardmap.ParseRange(strings.TrimSpace(part))
			if err != nil {
				return fmt.Errorf("restore: --shards: %w", err)
			}
			opt.Only = append(opt.Only, backup.ShardSpan{First: first, Last: last})
		}
	}
	var err error
	if opt.Admin, err = adminCredentials(getenv); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if opt.Shards, opt.DBPrefix, err = mapDefaults(getenv); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	home, closeHome, _, err := mapHome(ctx, getenv, "restore")
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer closeHome()
	opt.Map = home
	rep, err := backup.Restore(ctx, opt)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	for _, m := range rep.Moved {
		fmt.Fprintf(stdout, "restore: moved since the backup, not restored: %s\n", m)
	}
	fmt.Fprintf(stdout, "restore: to run it: mariadbd --datadir=%s (with the host's configuration: log-bin, a new server-id, the backup's innodb_page_size); gtid_slave_pos is %s, so `pinstore replica add --host %s --dsn DSN` continues it from there\n", *datadir, orNone(rep.GTID), rep.Host)
	return nil
}

// parseTime reads RFC 3339 or "2006-01-02 15:04:05" (UTC).
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	t, err := time.ParseInLocation("2006-01-02 15:04:05", s, time.UTC)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a time (RFC 3339, or 2006-01-02 15:04:05 in UTC)", s)
	}
	return t, nil
}

// adminCredentials is PINSTORE_MYSQL_ADMIN: who backups and restores
// connect to MariaDB as (mariadb-backup needs RELOAD, PROCESS, LOCK TABLES,
// BINLOG MONITOR, REPLICATION SLAVE for the binary logs, and SELECT).
func adminCredentials(getenv func(string) string) (backup.Credentials, error) {
	c, err := backup.ParseCredentials(getenv("PINSTORE_MYSQL_ADMIN"))
	if err != nil {
		return c, fmt.Errorf("PINSTORE_MYSQL_ADMIN: %w", err)
	}
	return c, nil
}

// pinstoreVersion is the module's version and VCS revision the binary
// was built from, as far as the build recorded them.
func pinstoreVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" {
			v += " " + s.Value
		}
		if s.Key == "vcs.modified" && s.Value == "true" {
			v += " (modified)"
		}
	}
	return v
}
