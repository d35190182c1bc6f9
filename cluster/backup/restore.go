package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/pinstore/pinstore/internal/tracing"
	"github.com/pinstore/pinstore/store/shardmap"
)

// RestoreOptions says which backup to restore where, and to which point.
type RestoreOptions struct {
	Backup  string // the backup directory
	DataDir string // the new data directory: new or empty
	// Binlogs is a directory of copied binary logs (pinstore binlogs);
	// needed to go past the backup's position.
	Binlogs string
	// ToGTID or ToTime, at most one: replay the binary logs up to and
	// including the transaction ToGTID, or up to the first transaction
	// stamped at or after ToTime (a second's resolution). Neither: the
	// backup's own position.
	ToGTID string
	ToTime time.Time

	// Map is the map in force: a backup of another deployment is refused,
	// and ranges the host no longer holds are named. nil skips both.
	Map      MapReader
	Shards   int
	DBPrefix string
	// Only names the shards to keep (the others' databases are dropped from
	// the restored copy); required when some of the backup's shards have
	// moved to another host since.
	Only []ShardSpan
	// Load copies the kept shard databases from the restored copy into the
	// masters the map names for them, over what they hold (which is kept
	// aside, renamed).
	Load  bool
	Admin Credentials
	Tools Tools
	// Keep leaves the scratch mariadbd running (Report.Socket) for the
	// caller, who must call Report.Stop.
	Keep     bool
	Progress io.Writer
}

// Report is what a restore did.
type Report struct {
	Host      string
	GTID      string // the position restored to
	Replayed  int    // transactions replayed from the binary logs
	Databases []string
	Dropped   []string // databases dropped from the copy (not named in Only)
	Moved     []string // the backup's ranges that now live on another host
	Loaded    []string // "db → host (kept aside as …)"
	Took      time.Duration
	Socket    string       // with Keep: the running scratch server
	Stop      func() error // with Keep
}

// plan is a checked restore: everything validated before anything is
// written.
type plan struct {
	name    string // the command, naming its steps' spans: restore, verify
	man     *Manifest
	tools   Tools
	set     *binlogSet
	stopG   GTIDPos // inclusive stop, nil: none
	stopT   time.Time
	reach   GTIDPos // the position the restore reaches
	keep    map[string]bool
	moved   []string
	current *shardmap.Map
}

// Restore restores opt.Backup into opt.DataDir: prepares a copy of it,
// starts a scratch mariadbd on it, replays binary logs to the point asked,
// checks it against the manifest, keeps only the shards named (when some
// moved), loads them into the live masters when asked, and stops the
// server cleanly, leaving a data directory any mariadbd of the manifest's
// version opens.
func Restore(ctx context.Context, opt RestoreOptions) (Report, error) {
	start := time.Now()
	p := orDiscard(opt.Progress)
	pl, err := checkStep(ctx, "restore", opt)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Host: pl.man.Host, Moved: pl.moved, GTID: pl.reach.String()}
	srv, err := restoreInto(ctx, pl, opt.Backup, opt.DataDir, p)
	if err != nil {
		return rep, err
	}
	stopped := false
	defer func() {
		if !stopped {
			srv.stop()
		}
	}()
	n, err := replay(ctx, pl, srv, p)
	if err != nil {
		return rep, err
	}
	rep.Replayed = n
	if err := tracing.Phase(ctx, "restore shards", func(ctx context.Context) error { return keepShards(ctx, pl, srv, &rep, p) }); err != nil {
		return rep, err
	}
	if opt.Load {
		err := tracing.Phase(ctx, "restore load", func(ctx context.Context) (err error) {
			rep.Loaded, err = loadShards(ctx, pl, srv, rep.Databases, opt.Admin, p)
			return err
		})
		if err != nil {
			return rep, err
		}
	}
	rep.Took = time.Since(start)
	if opt.Keep {
		stopped = true
		rep.Socket, rep.Stop = srv.sock, srv.stop
		return rep, nil
	}
	stopped = true
	if err := srv.stop(); err != nil {
		return rep, err
	}
	fmt.Fprintf(p, "restore: %s holds host %s's %d shard databases at GTID %s (%d transactions replayed) in %v\n",
		opt.DataDir, rep.Host, len(rep.Databases), orNone(rep.GTID), rep.Replayed, rep.Took.Round(time.Millisecond))
	return rep, nil
}

// keepShards checks that the restored copy holds the shard databases of
// the plan, drops the ones not kept, and records the position restored
// to as gtid_slave_pos.
func keepShards(ctx context.Context, pl *plan, srv *scratch, rep *Report, p io.Writer) error {
	got, err := tableColumns(ctx, srv.db, pl.man.DBPrefix, pl.man.Databases())
	if err != nil {
		return err
	}
	for _, db := range pl.man.Databases() {
		if _, ok := got[db]; !ok {
			if pl.keep[db] {
				return fmt.Errorf("the restored copy lacks shard database %s (was it dropped before %s?)", db, pl.reach)
			}
			continue
		}
		if !pl.keep[db] {
			if _, err := srv.db.ExecContext(ctx, "DROP DATABASE "+ident(db)); err != nil {
				return fmt.Errorf("drop %s from the copy: %w", db, err)
			}
			rep.Dropped = append(rep.Dropped, db)
			continue
		}
		if w, g := len(pl.man.Check.Databases[db]), len(got[db]); w != g && pl.reach.Equal(mustGTID(pl.man.Check.GTID)) {
			return fmt.Errorf("shard database %s has %d tables; the manifest %d", db, g, w)
		}
		rep.Databases = append(rep.Databases, db)
	}
	if len(rep.Dropped) > 0 {
		fmt.Fprintf(p, "restore: dropped %d shard databases not named (%s … %s)\n", len(rep.Dropped), rep.Dropped[0], rep.Dropped[len(rep.Dropped)-1])
	}
	if len(pl.reach) > 0 {
		if _, err := srv.db.ExecContext(ctx, "SET GLOBAL gtid_slave_pos = ?", pl.reach.String()); err != nil {
			return fmt.Errorf("record the position: %w", err)
		}
	}
	return nil
}

// checkStep is check as the first step of the command name (restore,
// verify), whose later steps the plan's spans are named by.
func checkStep(ctx context.Context, name string, opt RestoreOptions) (pl *plan, err error) {
	err = tracing.Phase(ctx, name+" check", func(ctx context.Context) error {
		pl, err = check(ctx, opt)
		return err
	})
	if pl != nil {
		pl.name = name
	}
	return pl, err
}

func mustGTID(s string) GTIDPos {
	p, _ := ParseGTID(s)
	return p
}

// check validates a restore without writing anything.
func check(ctx context.Context, opt RestoreOptions) (*plan, error) {
	man, err := ReadManifest(opt.Backup)
	if err != nil {
		return nil, err
	}
	pl := &plan{man: man}
	if pl.tools, err = opt.Tools.resolve(); err != nil {
		return nil, err
	}
	if opt.DataDir == "" {
		return nil, errors.New("no data directory to restore into")
	}
	if err := checkEmpty(opt.DataDir, "data directory"); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(filepath.Join(opt.Backup, DataDir)); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("backup %s has no %s directory: not a backup, or an incomplete one", opt.Backup, DataDir)
	}
	v, err := toolVersion(ctx, pl.tools.Backup)
	if err != nil {
		return nil, err
	}
	if v != man.MariaDBBackupVersion {
		return nil, fmt.Errorf("the backup was taken with mariadb-backup %s; %s is %s: prepare it with the same version", man.MariaDBBackupVersion, pl.tools.Backup, v)
	}
	// The deployment, and the ranges that moved.
	wantShards, wantPrefix := opt.Shards, opt.DBPrefix
	if opt.Map != nil {
		m, _, err := opt.Map.ReadMap(ctx, opt.Shards, opt.DBPrefix)
		if err != nil {
			return nil, fmt.Errorf("read the map: %w", err)
		}
		pl.current = m
		wantShards, wantPrefix = m.Shards, m.DBPrefix
	}
	if (wantShards != 0 && wantShards != man.Shards) || (wantPrefix != "" && wantPrefix != man.DBPrefix) {
		return nil, fmt.Errorf("backup %s is of another deployment: %d shards named %s…; this one has %d named %s…", opt.Backup, man.Shards, man.DBPrefix, wantShards, wantPrefix)
	}
	movedSet := map[int]string{}
	if pl.current != nil {
		pl.moved, movedSet = movedRanges(man, pl.current)
	}
	pl.keep = map[string]bool{}
	if len(opt.Only) > 0 {
		for _, r := range opt.Only {
			for s := r.First; s <= r.Last; s++ {
				if !holds(man.Ranges, s) {
					return nil, fmt.Errorf("shard %d is not in the backup (host %s held %s)", s, man.Host, spanList(man.Ranges))
				}
				if h, ok := movedSet[s]; ok {
					return nil, fmt.Errorf("shard %d has moved to host %s since the backup: its writes since the move are on %s, not in this host's backup or binary logs; restore it from a backup of %s", s, h, h, h)
				}
				pl.keep[dbName(man.DBPrefix, s)] = true
			}
		}
	} else {
		if len(pl.moved) > 0 {
			return nil, fmt.Errorf("some of the backup's ranges have moved since it was taken (%s): name the shards to restore with --shards (those still on host %s: %s)",
				strings.Join(pl.moved, "; "), man.Host, orNone(spanList(stillHere(man, movedSet))))
		}
		for _, db := range man.Databases() {
			pl.keep[db] = true
		}
	}
	if opt.Load && pl.current == nil {
		return nil, errors.New("loading shards into their masters needs the map")
	}
	return pl, pl.target(ctx, opt)
}

// movedRanges lists the backup's shards that another host holds in m.
func movedRanges(man *Manifest, m *shardmap.Map) ([]string, map[int]string) {
	set := map[int]string{}
	var out []string
	for _, r := range man.Ranges {
		run := -1
		flush := func(end int) {
			if run >= 0 {
				out = append(out, fmt.Sprintf("%s now on host %s", ShardSpan{First: run, Last: end}, set[run]))
				run = -1
			}
		}
		for s := r.First; s <= r.Last; s++ {
			cur, ok := m.RangeOf(s)
			if ok && cur.Host != man.Host {
				set[s] = cur.Host
				if run >= 0 && set[run] != cur.Host {
					flush(s - 1)
				}
				if run < 0 {
					run = s
				}
			} else {
				flush(s - 1)
			}
		}
		flush(r.Last)
	}
	return out, set
}

func stillHere(man *Manifest, moved map[int]string) []ShardSpan {
	var out []ShardSpan
	for _, r := range man.Ranges {
		for s := r.First; s <= r.Last; s++ {
			if _, gone := moved[s]; gone {
				continue
			}
			if n := len(out); n > 0 && out[n-1].Last == s-1 {
				out[n-1].Last = s
			} else {
				out = append(out, ShardSpan{First: s, Last: s})
			}
		}
	}
	return out
}

// target checks the point asked against what the binary logs hold and
// fills the plan's stop and reach.
func (pl *plan) target(ctx context.Context, opt RestoreOptions) error {
	base := mustGTID(pl.man.GTID)
	pl.reach = base
	if opt.ToGTID == "" && opt.ToTime.IsZero() {
		return nil
	}
	if opt.ToGTID != "" && !opt.ToTime.IsZero() {
		return errors.New("give a GTID or a time to restore to, not both")
	}
	if opt.Binlogs == "" {
		return errors.New("restoring past the backup's position needs the binary logs copied since (--binlogs DIR)")
	}
	var want GTIDPos
	if opt.ToGTID != "" {
		var err error
		if want, err = ParseGTID(opt.ToGTID); err != nil {
			return fmt.Errorf("--to-gtid: %w", err)
		}
		if !want.Covers(base) {
			return fmt.Errorf("--to-gtid %s is before the backup's position %s: use an older backup", want, base)
		}
	}
	sets, err := binlogSets(opt.Binlogs)
	if err != nil {
		return err
	}
	if len(sets) == 0 {
		return fmt.Errorf("%s holds no binary log files", opt.Binlogs)
	}
	var why []string
	var bestTime time.Time
	for i := range sets {
		cv, err := sets[i].scan(ctx, pl.tools.Binlog, base, opt.ToTime)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		desc := fmt.Sprintf("%s holds %s … %s", sets[i].dir, orNone(cv.start.String()), orNone(cv.last.String()))
		if !cv.lastTime.IsZero() {
			desc += " (last at " + cv.lastTime.Format(time.RFC3339) + ")"
		}
		switch {
		case !base.Covers(cv.start):
			why = append(why, desc+": it starts after the backup's position "+base.String())
			continue
		case want != nil && !cv.last.Covers(want):
			why = append(why, desc+": it does not reach "+want.String())
			continue
		case !opt.ToTime.IsZero() && !cv.baseTime.IsZero() && !cv.baseTime.Before(opt.ToTime):
			return fmt.Errorf("--to-time %s is not after the backup's position %s (stamped %s): use an older backup", opt.ToTime.UTC().Format(time.RFC3339), base, cv.baseTime.Format(time.RFC3339))
		case !opt.ToTime.IsZero() && opt.ToTime.After(cv.lastTime.Add(time.Second)):
			why = append(why, fmt.Sprintf("%s: --to-time %s is after its last transaction: copy newer binary logs, or restore to its last GTID with --to-gtid %s", desc, opt.ToTime.UTC().Format(time.RFC3339), cv.last))
			continue
		}
		if want != nil {
			pl.set, pl.stopG, pl.reach = &sets[i], want, want
			return nil
		}
		// Across a failover the old master's logs end where the new
		// one's go on (holding the old one's too): the newest reaches T.
		if pl.set == nil || cv.lastTime.After(bestTime) {
			pl.set, pl.stopT, pl.reach, bestTime = &sets[i], opt.ToTime, cv.atTime, cv.lastTime
		}
	}
	if pl.set != nil {
		return nil
	}
	return fmt.Errorf("no binary logs in %s cover the restore asked: %s", opt.Binlogs, strings.Join(why, "; "))
}

// restoreInto copies the backup's data into datadir, prepares it and
// starts a scratch server on it.
func restoreInto(ctx context.Context, pl *plan, backup, datadir string, p io.Writer) (*scratch, error) {
	if err := emptyTarget(datadir, "data directory"); err != nil {
		return nil, err
	}
	t := time.Now()
	err := tracing.Phase(ctx, pl.name+" copy", func(ctx context.Context) error {
		return copyTree(ctx, filepath.Join(backup, DataDir), datadir)
	})
	if err != nil {
		return nil, fmt.Errorf("copy the backup into %s: %w", datadir, err)
	}
	fmt.Fprintf(p, "restore: copied %d MB into %s in %v; preparing\n", dirSize(datadir)>>20, datadir, time.Since(t).Round(time.Millisecond))
	t = time.Now()
	err = tracing.Phase(ctx, pl.name+" prepare", func(ctx context.Context) error {
		logf, err := os.Create(filepath.Join(datadir, "pinstore-prepare.log"))
		if err != nil {
			return err
		}
		defer logf.Close()
		err = run(ctx, logf, nil, pl.tools.Backup, "--no-defaults", "--prepare", "--target-dir="+datadir,
			"--innodb-page-size="+fmt.Sprint(pl.man.Server.PageSize), "--innodb-data-file-path="+pl.man.Server.DataFilePath)
		if err != nil {
			return fmt.Errorf("mariadb-backup --prepare: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(p, "restore: prepared in %v; starting mariadbd on it\n", time.Since(t).Round(time.Millisecond))
	var srv *scratch
	err = tracing.Phase(ctx, pl.name+" start", func(ctx context.Context) (err error) {
		srv, err = startScratch(ctx, pl.tools, datadir, pl.man.Server)
		return err
	})
	return srv, err
}

// replay applies the binary logs from the backup's position to the
// plan's stop, through the mariadb client; it returns how many
// transactions the position moved by.
func replay(ctx context.Context, pl *plan, srv *scratch, p io.Writer) (n int, err error) {
	err = tracing.Phase(ctx, pl.name+" replay", func(ctx context.Context) (err error) {
		n, err = replayBinlogs(ctx, pl, srv, p)
		return err
	})
	return n, err
}

func replayBinlogs(ctx context.Context, pl *plan, srv *scratch, p io.Writer) (int, error) {
	if pl.set == nil {
		return 0, nil
	}
	base := mustGTID(pl.man.GTID)
	if pl.reach.Equal(base) {
		fmt.Fprintln(p, "restore: the backup is at the point asked: nothing to replay")
		return 0, nil
	}
	args := []string{"--no-defaults"}
	if len(base) > 0 {
		args = append(args, "--start-position="+base.String())
	}
	if pl.stopG != nil {
		args = append(args, "--stop-position="+pl.stopG.String())
	} else {
		args = append(args, "--stop-datetime="+pl.stopT.UTC().Format("2006-01-02 15:04:05"))
	}
	args = append(args, pl.set.files...)
	fmt.Fprintf(p, "restore: replaying %d binary log files of %s from %s to %s\n", len(pl.set.files), pl.set.dir, orNone(base.String()), pl.reach)
	t := time.Now()
	dec := exec.CommandContext(ctx, pl.tools.Binlog, args...)
	dec.Env = append(os.Environ(), "TZ=UTC")
	apply := exec.CommandContext(ctx, pl.tools.Client, "--no-defaults", "--binary-mode", "--user=root", "--socket="+srv.sock)
	pipe, err := dec.StdoutPipe()
	if err != nil {
		return 0, err
	}
	apply.Stdin = pipe
	decErr, applyErr := &tailBuffer{max: 2048}, &tailBuffer{max: 2048}
	dec.Stderr, apply.Stderr, apply.Stdout = decErr, applyErr, applyErr
	if err := apply.Start(); err != nil {
		return 0, fmt.Errorf("replay: %w", err)
	}
	if err := dec.Start(); err != nil {
		_ = apply.Process.Kill()
		_ = apply.Wait()
		return 0, fmt.Errorf("replay: %w", err)
	}
	derr := dec.Wait()
	aerr := apply.Wait()
	if derr != nil {
		return 0, fmt.Errorf("replay: mariadb-binlog: %v: %s", derr, decErr)
	}
	if aerr != nil {
		return 0, fmt.Errorf("replay: applying the binary logs: %v: %s", aerr, applyErr)
	}
	n := 0
	for d, g := range pl.reach {
		n += int(g.Seq - base[d].Seq)
	}
	fmt.Fprintf(p, "restore: replayed to %s in %v\n", pl.reach, time.Since(t).Round(time.Millisecond))
	return n, nil
}
