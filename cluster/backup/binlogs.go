package backup

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/pinstore/pinstore/store/shardmap"
)

// binlogSet is the binary log files of one server in a directory, in
// order.
type binlogSet struct {
	dir   string
	files []string // full paths
}

var binlogNameRE = regexp.MustCompile(`\.[0-9]{6}$`)

// binlogSets lists the sets under dir: dir's own binary log files, and
// each subdirectory's (pinstore binlogs keeps one per server).
func binlogSets(dir string) ([]binlogSet, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("binary logs: %w", err)
	}
	var sets []binlogSet
	own := binlogSet{dir: dir}
	for _, e := range ents {
		switch {
		case e.IsDir():
			sub, err := binlogSets(filepath.Join(dir, e.Name()))
			if err == nil {
				for _, s := range sub {
					if s.dir == filepath.Join(dir, e.Name()) {
						sets = append(sets, s)
					}
				}
			}
		case binlogNameRE.MatchString(e.Name()):
			own.files = append(own.files, filepath.Join(dir, e.Name()))
		}
	}
	if len(own.files) > 0 {
		sort.Strings(own.files)
		sets = append([]binlogSet{own}, sets...)
	}
	return sets, nil
}

// coverage is what a set of binary logs holds, read in one pass.
type coverage struct {
	start    GTIDPos   // the state before the first file (its Gtid list)
	last     GTIDPos   // the last transaction of each domain
	lastTime time.Time // the last transaction's time stamp
	// baseTime is the time stamp of the base position's last transaction,
	// zero when the logs do not hold it.
	baseTime time.Time
	// atTime is the position reached by replaying from base up to the
	// first transaction stamped at or after the time asked (see scan).
	atTime GTIDPos
	txns   int
}

var (
	eventRE   = regexp.MustCompile(`^#(\d{6})\s+(\d{1,2}:\d{2}:\d{2})\s+server id \d+\s.*\s(GTID|Gtid list) \[?([0-9,\- ]*)`)
	gtidOneRE = regexp.MustCompile(`^(\d+)-(\d+)-(\d+)$`)
)

// scan reads the set's events (mariadb-binlog's text, time stamps in
// UTC): where it starts and ends, when base's last transaction was, and
// the position a replay from base stopping at the first transaction
// stamped at or after stop (if not zero) reaches.
func (s binlogSet) scan(ctx context.Context, binlogProg string, base GTIDPos, stop time.Time) (coverage, error) {
	cv := coverage{last: GTIDPos{}, atTime: base.clone()}
	cmd := exec.CommandContext(ctx, binlogProg, append([]string{"--no-defaults"}, s.files...)...)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return cv, err
	}
	if err := cmd.Start(); err != nil {
		return cv, fmt.Errorf("mariadb-binlog: %w", err)
	}
	r := bufio.NewReaderSize(out, 1<<16)
	stopped := stop.IsZero()
	lineStart := true
	for {
		line, isPrefix, err := r.ReadLine()
		if err != nil {
			break
		}
		first := lineStart
		lineStart = !isPrefix
		if !first || len(line) == 0 || line[0] != '#' {
			continue
		}
		m := eventRE.FindSubmatch(line)
		if m == nil {
			continue
		}
		ts, err := time.Parse("060102 15:04:05", string(m[1])+" "+fmt.Sprintf("%08s", string(m[2])))
		if err != nil {
			continue
		}
		if string(m[3]) == "Gtid list" {
			if cv.start == nil {
				list := strings.TrimSpace(string(m[4]))
				if cv.start, err = ParseGTID(list); err != nil {
					cv.start = GTIDPos{}
				}
			}
			continue
		}
		f := gtidOneRE.FindStringSubmatch(strings.TrimSpace(string(m[4])))
		if f == nil {
			continue
		}
		p, _ := ParseGTID(f[0])
		var d uint32
		var g GTID
		for d, g = range p {
		}
		cv.txns++
		if g.Seq > cv.last[d].Seq {
			cv.last[d] = g
		}
		cv.lastTime = ts
		if b, ok := base[d]; ok && b.Seq == g.Seq && ts.After(cv.baseTime) {
			cv.baseTime = ts
		}
		after := base[d].Seq < g.Seq
		if after && !stopped {
			if !ts.Before(stop) {
				stopped = true
			} else if g.Seq > cv.atTime[d].Seq {
				cv.atTime[d] = g
			}
		}
	}
	_, _ = io.Copy(io.Discard, r)
	if err := cmd.Wait(); err != nil {
		return cv, fmt.Errorf("mariadb-binlog %s: %v: %s", s.dir, err, strings.TrimSpace(stderr.String()))
	}
	if cv.start == nil {
		cv.start = GTIDPos{}
	}
	return cv, nil
}

// BinlogOptions says whose binary logs to copy, and where.
type BinlogOptions struct {
	Host     string
	To       string // kept in To/<master host_port>/, one directory per server
	Map      MapReader
	Shards   int
	DBPrefix string
	Admin    Credentials
	Tools    Tools
	// Once copies what the master has now and returns; otherwise the copy
	// follows the master until ctx is done, reconnecting (and following a
	// failover to the new master) after Retry.
	Once     bool
	Retry    time.Duration // default 2 s
	Progress io.Writer
}

// CopyBinlogs copies the binary logs of opt.Host's master into opt.To,
// raw, as mariadb-binlog --read-from-remote-server --raw writes them:
// resuming at the last file it has (copied again, in case it was
// partial), or at the master's oldest.
func CopyBinlogs(ctx context.Context, opt BinlogOptions) error {
	p := orDiscard(opt.Progress)
	tools, err := opt.Tools.resolve()
	if err != nil {
		return err
	}
	retry := retryOf(opt)
	var master string // the master the last copy read
	for {
		var err error
		master, err = copyOnce(ctx, opt, tools, p, master)
		if opt.Once || ctx.Err() != nil {
			if ctx.Err() != nil && !opt.Once {
				return nil
			}
			return err
		}
		fmt.Fprintf(p, "binlogs: host %s: %v; again in %v\n", opt.Host, err, retry)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(retry):
		}
	}
}

// copyOnce copies from the host's master until the copy ends; prev is
// the master the last copy read ("" for none), and master the one this
// copy read: a different one is a failover's new master, said so
// whether the watch saw the map change or the old master died first.
func copyOnce(ctx context.Context, opt BinlogOptions, tools Tools, p io.Writer, prev string) (master string, err error) {
	master = prev
	m, _, err := opt.Map.ReadMap(ctx, opt.Shards, opt.DBPrefix)
	if err != nil {
		return master, fmt.Errorf("read the map: %w", err)
	}
	spec, ok := m.Hosts[opt.Host]
	if !ok {
		return master, fmt.Errorf("host %q is not in the map %s (hosts: %s)", opt.Host, opt.Map, hostNames(m))
	}
	master = shardmap.HostAddr(spec.Master)
	if prev != "" && prev != master {
		fmt.Fprintf(p, "binlogs: host %s: the master changed (a failover): %s → %s; following the new master\n", opt.Host, prev, master)
	}
	src, err := newEndpoint(spec.Master, opt.Admin)
	if err != nil {
		return master, fmt.Errorf("host %s master: %w", opt.Host, err)
	}
	dir := filepath.Join(opt.To, strings.NewReplacer(":", "_", "/", "_").Replace(src.String()))
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return master, fmt.Errorf("binlogs: %w", err)
	}
	db, err := src.open(ctx)
	if err != nil {
		return master, err
	}
	logs, err := binaryLogs(ctx, db)
	db.Close()
	if err != nil {
		return master, err
	}
	if len(logs) == 0 {
		return master, fmt.Errorf("%s keeps no binary log", src)
	}
	start := logs[0]
	sets, _ := binlogSets(dir)
	if len(sets) > 0 && sets[0].dir == dir {
		have := filepath.Base(sets[0].files[len(sets[0].files)-1])
		found := false
		for _, l := range logs {
			found = found || l == have
		}
		if found {
			start = have
		} else {
			fmt.Fprintf(p, "binlogs: host %s: WARNING: the master no longer has %s (purged): a gap in the copy; starting at its oldest, %s\n", opt.Host, have, start)
		}
	}
	opts, err := src.optionFile(opt.To)
	if err != nil {
		return master, err
	}
	defer os.Remove(opts)
	args := []string{"--defaults-file=" + opts, "--read-from-remote-server", "--raw", "--result-file=" + dir + "/"}
	if opt.Once {
		args = append(args, "--to-last-log")
	} else {
		args = append(args, "--stop-never")
	}
	args = append(args, start)
	fmt.Fprintf(p, "binlogs: host %s: copying %s's binary logs from %s into %s\n", opt.Host, src, start, dir)
	if err := noteMaster(opt.To, src, start, dir); err != nil {
		return master, err
	}
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	if !opt.Once {
		// A failover fences the old master without stopping it, so the
		// copy would go on reading it: the map is watched, and a new master
		// ends this copy for the next to follow it.
		go watchMaster(runCtx, stop, opt, master, retryOf(opt))
	}
	err = run(runCtx, p, nil, tools.Binlog, args...)
	if cause := context.Cause(runCtx); errors.Is(cause, errMasterChanged) && ctx.Err() == nil {
		return master, cause
	}
	if err != nil && ctx.Err() == nil {
		return master, err
	}
	if opt.Once {
		fmt.Fprintf(p, "binlogs: host %s: copied %s … %s (%d KB in %s)\n", opt.Host, start, logs[len(logs)-1], dirSize(dir)>>10, dir)
	}
	if err == nil && !opt.Once {
		return master, errors.New("mariadb-binlog stopped")
	}
	return master, err
}

func retryOf(opt BinlogOptions) time.Duration {
	if opt.Retry <= 0 {
		return 2 * time.Second
	}
	return opt.Retry
}

var errMasterChanged = errors.New("the master changed")

// watchMaster reads the map every period until ctx is done, and stops it
// when the host's master is no longer addr.
func watchMaster(ctx context.Context, stop context.CancelCauseFunc, opt BinlogOptions, addr string, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m, _, err := opt.Map.ReadMap(ctx, opt.Shards, opt.DBPrefix)
		if err != nil {
			continue
		}
		if spec, ok := m.Hosts[opt.Host]; ok && shardmap.HostAddr(spec.Master) != addr {
			stop(fmt.Errorf("%w in the map: %s → %s", errMasterChanged, addr, shardmap.HostAddr(spec.Master)))
			return
		}
	}
}

// MastersFile, in a directory of copied binary logs, lists each time the
// copy began reading a master: when, which, from which file, into which
// directory; a failover shows as a new master.
const MastersFile = "masters.log"

func noteMaster(to string, src endpoint, start, dir string) error {
	f, err := os.OpenFile(filepath.Join(to, MastersFile), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("binlogs: %w", err)
	}
	_, err = fmt.Fprintf(f, "%s\t%s\t%s\t%s\n", time.Now().UTC().Format(time.RFC3339), src, start, filepath.Base(dir))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
