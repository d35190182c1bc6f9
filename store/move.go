package store

// Moving a range of shards to another host (MoveShards).
//
// A move copies each shard database of the range, table by table in
// primary-key chunks, from the host(s) the map places it on to the target
// host, while clients keep reading and writing the source, then runs a
// catch-up pass (only chunks whose sums differ are copied). It then holds
// writes by rewriting the map file with the range read_only (servers
// reloading the map answer writes to it with EMoving), waits the settle
// time so that every write routed on the old map has finished, copies
// what changed meanwhile and verifies every table in the same final pass
// (row count and a 64-bit XOR of per-row MD5s, chunk by chunk, equal on
// both hosts; any difference rolls the map back), and rewrites the
// map with the range on the target, writable. After another settle time,
// when no server can still route to the source, it checks that no source
// changed since the final pass (a late write keeps that source database and
// fails the move loudly) and drops the source databases. IDs never change:
// a shard keeps its number and database name, AUTO_INCREMENT counters are
// raised to the source's.
//
// State. The move in progress is recorded in a lock file next to the map,
// <map file>.move (YAML, see moveState), created when a move starts and
// deleted when it ends. While a move-shards process runs it holds an
// exclusive flock(2) on that file, so a second process is refused; a killed
// process releases the lock and the file stays, so running the same
// command again resumes. Where a move stands is read from the map file
// itself (the range on its source hosts writable: copy; read-only: hold;
// on the target: switched), the lock file naming the range, the target and
// the source hosts. Every step is idempotent: copying makes the target an
// exact copy chunk by chunk (deleting what the source lacks), map writes
// are whole-file replacements (temp file, fsync, rename), drops are DROP
// DATABASE IF EXISTS.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"
	"gopkg.in/yaml.v3"

	"github.com/pinstore/pinstore/migrations"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

// MoveOptions says what MoveShards moves and how.
type MoveOptions struct {
	First, Last int    // the range of shards, inclusive
	To          string // target host, as the map names it

	// Settle is how long to wait after each map change before relying on
	// every server having it: at least the servers' map poll interval
	// plus the query timeout (a write routed on the old map finishes or
	// is rolled back within its deadline). Default MapPoll + the store's
	// QueryTimeout + 2s.
	Settle  time.Duration
	MapPoll time.Duration // the servers' WatchMap interval; default DefaultMapPoll
	// Confirm, when set, replaces the Settle wait: after each map change
	// MoveShards calls it with the new map's version, and it returns once
	// every server reports routing by that version (or an error naming
	// the one that does not); then MoveShards waits only the query timeout,
	// for writes routed on the old map to finish or roll back.
	Confirm    func(ctx context.Context, version string) error
	KeepSource bool      // leave the source databases in place after the switch
	Abort      bool      // roll back the move in progress instead of finishing it
	Parallel   int       // shards copied at once; default 4
	Batch      int       // rows per copy chunk; default 1000
	Progress   io.Writer // receives progress lines; nil for none

	hook func(step string) error // tests: fail at a step as a kill would
}

// MoveReport is what a move did and how long it took.
type MoveReport struct {
	Shards     int           // shards in the range
	From       []string      // "first-last@host" of the range before the move
	To         string        // target host
	Resumed    string        // the step a resumed move started at; "" for a new move
	Rows       int64         // rows written to the target (first pass + final pass)
	FinalRows  int64         // of which, rows re-copied while writes were held
	Copy       time.Duration // copy and catch-up passes, writes still flowing to the source
	Final      time.Duration // final pass and verification, writes held
	Held       time.Duration // from the read-only map to the switched map
	Total      time.Duration
	Dropped    int    // source databases dropped
	MapVersion string // version of the map left in force
	Aborted    bool   // the move was rolled back (Abort)
}

// Lock-file steps. The map decides where a move stands; the step in the
// file is informational, except that "aborted" records why a verification
// failed.
const (
	stepCopy     = "copy"
	stepHold     = "hold"
	stepSwitched = "switched"
	stepAborted  = "aborted"
)

// moveState is the lock file, <map file>.move:
//
//	range: 0-255            # the shards being moved
//	to: mysql-b             # target host
//	from:                   # where the range was when the move began
//	  - {shards: 0-127, host: mysql-a}
//	  - {shards: 128-255, host: mysql-c}
//	step: hold              # copy | hold | switched | aborted
//	pid: 4242               # last process that ran it
//	started: 2025-01-02T03:04:05Z
//	note: ""                # why it was aborted
//	digests: {0: 9f…}       # per shard: source content at the final verify
type moveState struct {
	Range   string         `yaml:"range"`
	To      string         `yaml:"to"`
	From    []moveFrom     `yaml:"from"`
	Step    string         `yaml:"step"`
	PID     int            `yaml:"pid"`
	Started time.Time      `yaml:"started"`
	Note    string         `yaml:"note,omitempty"`
	Digests map[int]string `yaml:"digests,omitempty"`

	first, last int
	src         []string // index shard-first: source host
}

type moveFrom struct {
	Shards string `yaml:"shards"`
	Host   string `yaml:"host"`
}

// MoveLockPath is the lock file of the moves of the map at mapFile.
func MoveLockPath(mapFile string) string { return mapFile + ".move" }

// moveLock is the open, flocked lock file.
type moveLock struct {
	f     *os.File
	path  string
	state *moveState // nil: no move in progress
}

func openMoveLock(path string) (*moveLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, model.Errorf(model.EConflict, "another pinstore move-shards is running (it holds %s)", path)
		}
		return nil, err
	}
	l := &moveLock{f: f, path: path}
	data, err := io.ReadAll(f)
	if err != nil {
		l.close()
		return nil, err
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return l, nil
	}
	var st moveState
	if err := yaml.Unmarshal(data, &st); err != nil {
		l.close()
		return nil, fmt.Errorf("move lock %s does not parse (fix or delete it by hand): %w", path, err)
	}
	if err := st.index(); err != nil {
		l.close()
		return nil, fmt.Errorf("move lock %s: %w", path, err)
	}
	l.state = &st
	return l, nil
}

// index fills first, last and src from Range and From.
func (st *moveState) index() error {
	var err error
	if st.first, st.last, err = shardmap.ParseRange(st.Range); err != nil {
		return err
	}
	st.src = make([]string, st.last-st.first+1)
	for _, f := range st.From {
		a, b, err := shardmap.ParseRange(f.Shards)
		if err != nil {
			return err
		}
		for sh := a; sh <= b; sh++ {
			if sh < st.first || sh > st.last {
				return fmt.Errorf("from %q is outside the range %s", f.Shards, st.Range)
			}
			st.src[sh-st.first] = f.Host
		}
	}
	for i, h := range st.src {
		if h == "" {
			return fmt.Errorf("no source host for shard %d", st.first+i)
		}
	}
	return nil
}

func (st *moveState) source(sh int) string { return st.src[sh-st.first] }

// save rewrites the lock file in place (it must keep its inode: the flock
// is on it) and syncs it.
func (l *moveLock) save() error {
	l.state.PID = os.Getpid()
	b, err := yaml.Marshal(l.state)
	if err != nil {
		return err
	}
	b = append([]byte("# pinstore move-shards in progress: run the same command again to finish it,\n# or with --abort to roll it back. Do not delete this file while the map\n# shows the range read-only or on the target.\n"), b...)
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	if _, err := l.f.WriteAt(b, 0); err != nil {
		return err
	}
	return l.f.Sync()
}

// remove deletes the lock file (the move is over) while still holding it.
func (l *moveLock) remove() error {
	err := os.Remove(l.path)
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	if err == nil {
		err = syncDir(filepath.Dir(l.path))
	}
	return err
}

func (l *moveLock) close() {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
}

// mover is one MoveShards run.
type mover struct {
	s     *Store
	opt   MoveOptions
	path  string // map file
	lock  *moveLock
	rep   MoveReport
	ms    []migrations.Migration
	out   io.Writer
	start time.Time
}

// MoveShards moves shards opt.First … opt.Last to host opt.To, or resumes
// (or with opt.Abort, rolls back) the move in progress; see the comment at
// the top of move.go for the protocol. The store must have been opened from
// a map file (Config.MapFile), which MoveShards reads and rewrites; servers
// pick up each rewrite with WatchMap or ReloadFile.
//
// Refused, changing nothing (EInvalid or EConflict): no map file; a range
// outside the map; an unknown target; shards already on the target, or
// whose database the target already has; a target that is the same MySQL
// server as a source; a range that is read-only with no move recorded; a
// move that would leave no writable open range while writes are held;
// source shards not migrated to the newest schema; another move in
// progress or running. A verification mismatch rolls back (the range is
// writable on its source again, nothing dropped) and returns EConflict.
func (s *Store) MoveShards(ctx context.Context, opt MoveOptions) (MoveReport, error) {
	const op = "store.MoveShards"
	mv := &mover{s: s, opt: opt, path: s.cfg.MapFile, out: opt.Progress, start: time.Now()}
	if mv.path == "" {
		return mv.rep, model.Wrap(op, model.EInvalid, "moving shards needs a shard map file (PINSTORE_SHARD_MAP)", nil)
	}
	if mv.out == nil {
		mv.out = io.Discard
	}
	if mv.opt.MapPoll <= 0 {
		mv.opt.MapPoll = DefaultMapPoll
	}
	if mv.opt.Settle <= 0 {
		mv.opt.Settle = mv.opt.MapPoll + s.cfg.QueryTimeout + 2*time.Second
	} else if floor := mv.opt.MapPoll + s.cfg.QueryTimeout; mv.opt.Confirm == nil && mv.opt.Settle < floor {
		mv.logf("WARNING: settle %v is shorter than the map poll interval plus the query timeout (%v): a write routed on an old map may reach a source after its final copy (the check before the drop would then keep that source)", mv.opt.Settle, floor)
	}
	if mv.opt.Parallel <= 0 {
		mv.opt.Parallel = 4
	}
	if mv.opt.Batch <= 0 {
		mv.opt.Batch = 1000
	}
	var err error
	if mv.ms, err = migrations.All(); err != nil {
		return mv.rep, err
	}
	rep, err := mv.run(ctx)
	if err != nil {
		var me *model.Error
		if !errors.As(err, &me) {
			err = fmt.Errorf("%s: %w", op, err)
		} else if me.Op == "" {
			me.Op = op
		}
	}
	return rep, err
}

func (mv *mover) logf(format string, args ...any) {
	fmt.Fprintf(mv.out, "move-shards: "+format+"\n", args...)
}

func (mv *mover) hook(step string) error {
	if mv.opt.hook != nil {
		return mv.opt.hook(step)
	}
	return nil
}

func (mv *mover) run(ctx context.Context) (MoveReport, error) {
	lock, err := openMoveLock(MoveLockPath(mv.path))
	if err != nil {
		return mv.rep, err
	}
	mv.lock = lock
	defer lock.close()
	m, err := mv.loadMap()
	if err != nil {
		return mv.rep, err
	}
	fresh := lock.state == nil
	if fresh {
		if mv.opt.Abort {
			_ = lock.remove()
			return mv.rep, model.Errorf(model.EInvalid, "no move is in progress (no %s)", lock.path)
		}
		st, err := mv.plan(ctx, m)
		if err != nil {
			_ = lock.remove() // it was empty: nothing changes
			return mv.rep, err
		}
		lock.state = st
		if err := lock.save(); err != nil {
			return mv.rep, err
		}
	} else {
		st := lock.state
		if st.first != mv.opt.First || st.last != mv.opt.Last || st.To != mv.opt.To {
			return mv.rep, model.Errorf(model.EConflict,
				"a move of shards %s to %q is in progress (%s): run move-shards --range %s --to %s to finish it, or add --abort to roll it back",
				st.Range, st.To, lock.path, st.Range, st.To)
		}
	}
	st := lock.state
	mv.rep.Shards = st.last - st.first + 1
	mv.rep.To = st.To
	for _, f := range st.From {
		mv.rep.From = append(mv.rep.From, f.Shards+"@"+f.Host)
	}
	step, err := where(m, st)
	if err != nil {
		return mv.rep, err
	}
	if !fresh {
		mv.rep.Resumed = step
		mv.logf("resuming the move of shards %s to %s at step %q (lock %s)", st.Range, st.To, step, lock.path)
	} else {
		mv.logf("moving shards %s (%d) from %s to %s; settle %v", st.Range, mv.rep.Shards, strings.Join(mv.rep.From, ", "), st.To, mv.opt.Settle)
	}
	if mv.opt.Abort {
		return mv.abort(ctx, m, step)
	}
	switch step {
	case stepCopy:
		if err := mv.copyStep(ctx, m); err != nil {
			return mv.rep, err
		}
		if m, err = mv.loadMap(); err != nil {
			return mv.rep, err
		}
		fallthrough
	case stepHold:
		if err := mv.holdStep(ctx, m, step == stepHold); err != nil {
			return mv.rep, err
		}
		fallthrough
	case stepSwitched:
		if err := mv.finishStep(ctx); err != nil {
			return mv.rep, err
		}
	}
	mv.rep.Total = time.Since(mv.start)
	mv.rep.MapVersion = mv.s.MapVersion()
	mv.logf("done in %v: copy %v, writes held off %v (final pass %v), %d rows copied (%d while held), %d source databases dropped",
		round(mv.rep.Total), round(mv.rep.Copy), round(mv.rep.Held), round(mv.rep.Final), mv.rep.Rows, mv.rep.FinalRows, mv.rep.Dropped)
	return mv.rep, nil
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// loadMap reads the map file with the running map's defaults.
func (mv *mover) loadMap() (*shardmap.Map, error) {
	cur := mv.s.Map()
	return shardmap.Load(mv.path, cur.Shards, cur.DBPrefix)
}

// plan checks a new move against the map and the hosts and returns its
// state. It changes nothing.
func (mv *mover) plan(ctx context.Context, m *shardmap.Map) (*moveState, error) {
	o := mv.opt
	if o.First < 0 || o.Last < o.First || o.Last >= m.Shards {
		return nil, model.Errorf(model.EInvalid, "range %d-%d is outside the map's shards 0-%d", o.First, o.Last, m.Shards-1)
	}
	target, ok := m.Hosts[o.To]
	if !ok {
		return nil, model.Errorf(model.EInvalid, "target host %q is not in the shard map (hosts: %s)", o.To, strings.Join(hostNames(m), ", "))
	}
	st := &moveState{Range: fmt.Sprintf("%d-%d", o.First, o.Last), To: o.To, Step: stepCopy, Started: time.Now().UTC().Truncate(time.Second)}
	var onTarget []int
	for sh := o.First; sh <= o.Last; sh++ {
		r, _ := m.RangeOf(sh)
		if r.Host == o.To {
			onTarget = append(onTarget, sh)
			continue
		}
		if r.ReadOnly {
			return nil, model.Errorf(model.EConflict, "shard %d is read-only in the map but no move is recorded (%s): another tool may be moving it; finish that first", sh, MoveLockPath(mv.path))
		}
		if n := len(st.From); n > 0 && st.From[n-1].Host == r.Host {
			a, _, _ := shardmap.ParseRange(st.From[n-1].Shards)
			st.From[n-1].Shards = fmt.Sprintf("%d-%d", a, sh)
		} else {
			st.From = append(st.From, moveFrom{Shards: fmt.Sprintf("%d-%d", sh, sh), Host: r.Host})
		}
	}
	if len(onTarget) > 0 {
		return nil, model.Errorf(model.EConflict, "%d of the shards (%s) are already on %q", len(onTarget), shardList(onTarget), o.To)
	}
	if err := st.index(); err != nil {
		return nil, err
	}
	// While writes are held, servers must still have somewhere to put new
	// users, or they would reject the read-only map and keep writing.
	if _, err := m.Rewrite(o.First, o.Last, func(r *shardmap.Range) { r.ReadOnly = true }); err != nil {
		return nil, model.Errorf(model.EInvalid, "holding writes on %s would leave no writable range open for new users; open another range first", st.Range)
	}
	// Hosts: the target must be another server than every source, hold
	// none of the range's databases, and the sources must be migrated.
	dst, err := mv.s.pool(target.Master)
	if err != nil {
		return nil, err
	}
	dstID, err := serverID(ctx, dst)
	if err != nil {
		return nil, fmt.Errorf("target host %q: %w", o.To, err)
	}
	newest := mv.ms[len(mv.ms)-1].Version
	for _, f := range st.From {
		src, err := hostDB(mv.s, m, f.Host)
		if err != nil {
			return nil, err
		}
		id, err := serverID(ctx, src)
		if err != nil {
			return nil, fmt.Errorf("source host %q: %w", f.Host, err)
		}
		if id == dstID {
			return nil, model.Errorf(model.EInvalid, "target host %q is the same MySQL server as source host %q", o.To, f.Host)
		}
		a, b, _ := shardmap.ParseRange(f.Shards)
		for sh := a; sh <= b; sh++ {
			var v int
			if err := src.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM "+m.DBName(sh)+".schema_migrations").Scan(&v); err != nil {
				return nil, model.Wrap("", model.EInvalid, fmt.Sprintf("shard %d on %q is not provisioned; run pinstore migrate", sh, f.Host), err)
			}
			if v != newest {
				return nil, model.Errorf(model.EInvalid, "shard %d on %q is at schema version %d, not %d; run pinstore migrate first", sh, f.Host, v, newest)
			}
		}
	}
	names := make([]any, 0, o.Last-o.First+1)
	for sh := o.First; sh <= o.Last; sh++ {
		names = append(names, m.DBName(sh))
	}
	var have []string
	if err := sqlx.SelectContext(ctx, dst, &have, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME IN (?"+strings.Repeat(",?", len(names)-1)+") ORDER BY SCHEMA_NAME", names...); err != nil {
		return nil, fmt.Errorf("target host %q: %w", o.To, err)
	}
	if len(have) > 0 {
		return nil, model.Errorf(model.EConflict, "target host %q already has %d of the range's databases (%s…) though the map does not place them there; drop them first if they are leftovers", o.To, len(have), have[0])
	}
	return st, nil
}

func hostNames(m *shardmap.Map) []string {
	var out []string
	for n := range m.Hosts {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func shardList(shards []int) string {
	var parts []string
	for i := 0; i < len(shards); {
		j := i
		for j+1 < len(shards) && shards[j+1] == shards[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(shards[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", shards[i], shards[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// hostDB is the pool of the host the map names name. A host missing from
// the map (an operator removed it during a move) is an error, never a
// default DSN.
func hostDB(s *Store, m *shardmap.Map, name string) (*sqlx.DB, error) {
	spec, ok := m.Hosts[name]
	if !ok || spec.Master == "" {
		return nil, model.Errorf(model.EConflict, "host %q of the move is no longer in the shard map; put it back to finish or roll back the move", name)
	}
	return s.pool(spec.Master)
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

// where reads from the map where the move st stands: the whole range on
// its sources writable (copy) or read-only (hold), or on the target
// writable (switched). Anything else means the map was edited during the
// move, which only a person can sort out.
func where(m *shardmap.Map, st *moveState) (string, error) {
	var src, srcRO, dst int
	for sh := st.first; sh <= st.last; sh++ {
		r, ok := m.RangeOf(sh)
		switch {
		case !ok:
			return "", fmt.Errorf("shard %d is not in the map", sh)
		case r.Host == st.To && !r.ReadOnly:
			dst++
		case r.Host == st.source(sh) && r.ReadOnly:
			srcRO++
		case r.Host == st.source(sh):
			src++
		default:
			return "", model.Errorf(model.EConflict, "the map places shard %d on %q (read_only %v), which fits neither the source %q nor the target %q of the move in progress; fix the map by hand",
				sh, r.Host, r.ReadOnly, st.source(sh), st.To)
		}
	}
	n := st.last - st.first + 1
	switch n {
	case src:
		return stepCopy, nil
	case srcRO:
		return stepHold, nil
	case dst:
		return stepSwitched, nil
	}
	return "", model.Errorf(model.EConflict, "the map has the range %s partly moved (%d writable on the source, %d read-only, %d on the target); fix the map by hand", st.Range, src, srcRO, dst)
}

// copyStep is the first pass: every shard copied while writes flow.
func (mv *mover) copyStep(ctx context.Context, m *shardmap.Map) error {
	if err := mv.hook("copy"); err != nil {
		return err
	}
	begin := time.Now()
	rows, _, err := mv.eachShard(ctx, m, "copy", mv.copyShard)
	mv.rep.Rows += rows
	mv.rep.Copy = time.Since(begin)
	if err != nil {
		return err
	}
	mv.logf("copy: %d shards, %d rows in %v", mv.rep.Shards, rows, round(mv.rep.Copy))
	// A catch-up pass, still live, so the pass while writes are held has
	// only the last moments' changes to copy.
	begin = time.Now()
	rows, _, err = mv.eachShard(ctx, m, "catch-up", mv.copyShard)
	mv.rep.Rows += rows
	mv.rep.Copy += time.Since(begin)
	if err != nil {
		return err
	}
	mv.logf("catch-up: %d rows changed during the copy re-copied in %v", rows, round(time.Since(begin)))
	return mv.hook("copied")
}

// holdStep makes the range read-only, settles, copies what changed,
// verifies, and switches the map to the target. resumed: the map was
// already read-only when this run started.
func (mv *mover) holdStep(ctx context.Context, m *shardmap.Map, resumed bool) error {
	st := mv.lock.state
	heldAt := time.Now()
	if !resumed {
		st.Step = stepHold
		if err := mv.lock.save(); err != nil {
			return err
		}
		ro, err := mv.rewrite(stepCopy, func(r *shardmap.Range) { r.ReadOnly = true }, "holding writes")
		if err != nil {
			return err
		}
		heldAt = time.Now()
		m = ro
		if err := mv.hook("held"); err != nil {
			return err
		}
	}
	mv.logf("writes held: shards %s read-only in the map (version %s)", st.Range, m.Version())
	if err := mv.settle(ctx, m.Version()); err != nil {
		return err
	}
	if err := mv.hook("final"); err != nil {
		return err
	}
	begin := time.Now()
	rows, digests, err := mv.eachShard(ctx, m, "final pass", mv.finalShard)
	mv.rep.Rows += rows
	mv.rep.FinalRows += rows
	mv.rep.Final = time.Since(begin)
	var mm *mismatch
	if errors.As(err, &mm) {
		return mv.rollback(mm)
	}
	if err != nil {
		return err
	}
	mv.logf("final pass: %d rows re-copied, %d shards verified in %v", rows, len(digests), round(mv.rep.Final))
	st.Digests = digests
	st.Step = stepSwitched
	if err := mv.lock.save(); err != nil {
		return err
	}
	sw, err := mv.rewrite(stepHold, func(r *shardmap.Range) { r.Host, r.ReadOnly = st.To, false }, "switched")
	if err != nil {
		return err
	}
	mv.rep.Held = time.Since(heldAt)
	mv.logf("switched: shards %s on %s, writable (map version %s); writes were held off for %v", st.Range, st.To, sw.Version(), round(mv.rep.Held))
	return nil
}

// settle waits until every server can be relied on to route by the map of
// the given version, and writes routed on an older map have ended: with
// Confirm, until every server reports that version, then the query
// timeout; without it, the Settle time.
func (mv *mover) settle(ctx context.Context, version string) error {
	if mv.opt.Confirm == nil {
		mv.logf("settling %v for every server to load map %s", mv.opt.Settle, version)
		return sleep(ctx, mv.opt.Settle)
	}
	begin := time.Now()
	if err := mv.opt.Confirm(ctx, version); err != nil {
		return fmt.Errorf("confirming that every server routes by map %s: %w", version, err)
	}
	mv.logf("confirmed: every server routes by map %s (%v); waiting the query timeout %v for writes routed on the old map", version, round(time.Since(begin)), mv.s.cfg.QueryTimeout)
	return sleep(ctx, mv.s.cfg.QueryTimeout)
}

// finishStep waits until no server routes to the source any more, checks
// that no late write reached a source since the verify, drops the source
// databases (unless KeepSource) and ends the move.
func (mv *mover) finishStep(ctx context.Context) error {
	st := mv.lock.state
	if err := mv.hook("switched"); err != nil {
		return err
	}
	if mv.opt.KeepSource {
		mv.logf("keeping the source databases (--keep-source): they are stale copies now; drop them when convenient")
		return mv.lock.remove()
	}
	m, err := mv.loadMap()
	if err != nil {
		return err
	}
	mv.logf("before dropping the source databases:")
	if err := mv.settle(ctx, m.Version()); err != nil {
		return err
	}
	var late []int
	var mu sync.Mutex
	var dropped atomic.Int64
	err = mv.parallel(ctx, st.first, st.last, func(ctx context.Context, sh int) error {
		src, err := hostDB(mv.s, m, st.source(sh))
		if err != nil {
			return err
		}
		name := m.DBName(sh)
		var exists int
		if err := src.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name).Scan(&exists); err != nil {
			return err
		}
		if exists == 0 {
			return nil // dropped by an earlier run
		}
		if want, ok := st.Digests[sh]; ok {
			got, err := shardDigest(ctx, src, name, mv.opt.Batch)
			if err != nil {
				return err
			}
			if got != want {
				mu.Lock()
				late = append(late, sh)
				mu.Unlock()
				return nil
			}
		}
		if _, err := src.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			return err
		}
		dropped.Add(1)
		return nil
	})
	mv.rep.Dropped = int(dropped.Load())
	if err != nil {
		return err
	}
	if len(late) > 0 {
		sort.Ints(late)
		return model.Errorf(model.EConflict, "source shards %s changed after the final verify (a write routed on an old map outlived --settle %v, or a server did not reload the map): their databases are kept on the source; compare them with the target by hand, then rerun with --keep-source to end the move",
			shardList(late), mv.opt.Settle)
	}
	mv.logf("dropped %d source databases", mv.rep.Dropped)
	return mv.lock.remove()
}

// abort rolls back the move in progress: the range writable on its
// sources, the target's copies dropped, the lock removed. A switched move
// cannot be rolled back (the target may have taken writes): move it back.
func (mv *mover) abort(ctx context.Context, m *shardmap.Map, step string) (MoveReport, error) {
	st := mv.lock.state
	if step == stepSwitched {
		return mv.rep, model.Errorf(model.EConflict, "the move of %s to %q has switched already and the target may have taken writes; finish it (run without --abort) and move the range back", st.Range, st.To)
	}
	if step == stepHold {
		back, err := mv.rewrite(stepHold, func(r *shardmap.Range) { r.ReadOnly = false }, "aborted")
		if err != nil {
			return mv.rep, err
		}
		mv.logf("writes resumed on the source (map version %s)", back.Version())
	}
	dst, err := hostDB(mv.s, m, st.To)
	if err != nil {
		return mv.rep, err
	}
	for sh := st.first; sh <= st.last; sh++ {
		if _, err := dst.ExecContext(ctx, "DROP DATABASE IF EXISTS "+m.DBName(sh)); err != nil {
			return mv.rep, fmt.Errorf("drop the copy of shard %d on %q: %w", sh, st.To, err)
		}
	}
	mv.logf("aborted: dropped the copies on %s; the range stays on its source", st.To)
	mv.rep.Aborted = true
	mv.rep.Total = time.Since(mv.start)
	mv.rep.MapVersion = mv.s.MapVersion()
	return mv.rep, mv.lock.remove()
}

// rollback ends a hold whose verification failed: the range writable on
// the source again, copies kept for inspection, the lock marked aborted.
func (mv *mover) rollback(mm *mismatch) error {
	st := mv.lock.state
	back, err := mv.rewrite(stepHold, func(r *shardmap.Range) { r.ReadOnly = false }, "verification failed")
	if err != nil {
		return err
	}
	st.Step = stepAborted
	st.Note = mm.Error()
	if err := mv.lock.save(); err != nil {
		return err
	}
	mv.logf("VERIFICATION FAILED: %v; the range is writable on its source again (map version %s), nothing was dropped", mm, back.Version())
	return model.Wrap("", model.EConflict, fmt.Sprintf("verification failed (%v): the range is back on its source, writable; the copies on %q are kept: rerun to try again or add --abort to drop them", mm, st.To), nil)
}

// rewrite re-reads the map file (so that an operator's unrelated edit made
// during the move is kept), checks that the move still stands at step
// expect, applies fn to the range's ranges, checks that a server could put
// the result in force, and writes it. Nothing is written on error.
func (mv *mover) rewrite(expect string, fn func(*shardmap.Range), why string) (*shardmap.Map, error) {
	st := mv.lock.state
	m, err := mv.loadMap()
	if err != nil {
		return nil, err
	}
	step, err := where(m, st)
	if err != nil {
		return nil, err
	}
	if step != expect {
		return nil, model.Errorf(model.EConflict, "the map file changed under the move: the range should be at step %q, the file says %q", expect, step)
	}
	next, err := m.Rewrite(st.first, st.last, fn)
	if err != nil {
		return nil, err
	}
	if _, err := mv.s.build(next); err != nil {
		return nil, fmt.Errorf("the rewritten map would be rejected by servers (nothing written): %w", err)
	}
	if err := mv.writeMap(next, why); err != nil {
		return nil, err
	}
	return next, nil
}

// writeMap atomically replaces the map file with m and puts it in force in
// this store too.
func (mv *mover) writeMap(m *shardmap.Map, why string) error {
	st := mv.lock.state
	body, err := m.Marshal()
	if err != nil {
		return err
	}
	head := fmt.Sprintf("# Shard map. Rewritten by pinstore move-shards (shards %s to %s: %s) at %s.\n",
		st.Range, st.To, why, time.Now().UTC().Format(time.RFC3339))
	data := append([]byte(head), body...)
	cur := mv.s.Map()
	if _, err := shardmap.Parse(data, cur.Shards, cur.DBPrefix); err != nil {
		return fmt.Errorf("the rewritten map does not validate (nothing written): %w", err)
	}
	if err := writeFileAtomic(mv.path, data); err != nil {
		return err
	}
	return mv.s.ReloadFile()
}

// writeFileAtomic replaces path with data: a temp file in the same
// directory with the old file's mode, fsync, rename, fsync the directory.
func writeFileAtomic(path string, data []byte) error {
	mode := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // no-op after the rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// shardWork is one shard's databases on both sides.
type shardWork struct {
	n        int
	name     string
	src, dst *sqlx.DB
}

// eachShard runs fn on every shard of the move, opt.Parallel at a time,
// printing progress every second. It returns the rows fn reported and the
// digests fn returned, by shard.
func (mv *mover) eachShard(ctx context.Context, m *shardmap.Map, what string, fn func(context.Context, shardWork) (int64, string, error)) (int64, map[int]string, error) {
	st := mv.lock.state
	dst, err := hostDB(mv.s, m, st.To)
	if err != nil {
		return 0, nil, err
	}
	var rows, done atomic.Int64
	digests := map[int]string{}
	var mu sync.Mutex
	stopProgress := every(time.Second, func() {
		mv.logf("%s: %d/%d shards, %d rows", what, done.Load(), st.last-st.first+1, rows.Load())
	})
	err = mv.parallel(ctx, st.first, st.last, func(ctx context.Context, sh int) error {
		src, err := hostDB(mv.s, m, st.source(sh))
		if err != nil {
			return err
		}
		n, d, err := fn(ctx, shardWork{n: sh, name: m.DBName(sh), src: src, dst: dst})
		rows.Add(n)
		if err != nil {
			var mm *mismatch
			if errors.As(err, &mm) {
				return err
			}
			return fmt.Errorf("%s shard %d: %w", what, sh, err)
		}
		mu.Lock()
		digests[sh] = d
		mu.Unlock()
		done.Add(1)
		return nil
	})
	stopProgress()
	return rows.Load(), digests, err
}

// parallel runs fn for shards first … last, opt.Parallel at once, and
// stops at the first error (a mismatch is preferred over other errors).
func (mv *mover) parallel(ctx context.Context, first, last int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range min(mv.opt.Parallel, last-first+1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sh := range work {
				if err := fn(ctx, sh); err != nil {
					mu.Lock()
					var mm *mismatch
					if firstErr == nil || errors.As(err, &mm) && !errors.As(firstErr, &mm) {
						firstErr = err
					}
					mu.Unlock()
					cancel()
				}
			}
		}()
	}
	for sh := first; sh <= last; sh++ {
		select {
		case work <- sh:
			continue
		case <-ctx.Done():
		}
		break
	}
	close(work)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

// mismatch is a verification failure: a table differs between the hosts.
type mismatch struct {
	shard    int
	table    string
	src, dst tableSum
}

func (e *mismatch) Error() string {
	return fmt.Sprintf("shard %d table %s differs: %d rows (hash %016x) on the source, %d rows (hash %016x) on the target",
		e.shard, e.table, e.src.rows, e.src.hash, e.dst.rows, e.dst.hash)
}

// copyShard creates the shard on the target (the embedded migrations, the
// same as pinstore migrate) and makes every table a copy of the source's,
// chunk by chunk, while the source takes writes. It returns the rows
// written.
func (mv *mover) copyShard(ctx context.Context, w shardWork) (int64, string, error) {
	if err := migrations.Apply(ctx, w.dst, w.name, mv.ms); err != nil {
		return 0, "", fmt.Errorf("create on target: %w", err)
	}
	tables, err := sameTables(ctx, w)
	if err != nil {
		return 0, "", err
	}
	var rows int64
	for _, tb := range tables {
		n, _, err := syncTable(ctx, w, tb, mv.opt.Batch, nil)
		rows += n
		if err != nil {
			return rows, "", fmt.Errorf("table %s: %w", tb.name, err)
		}
	}
	return rows, "", nil
}

// finalShard is the pass while writes are held: every table made equal to
// the source's and verified, chunk by chunk (row count and hash equal on
// both hosts; a chunk copied is summed again on both sides), AUTO_INCREMENT
// counters raised to the source's. It returns the rows written and the
// source's digest, which the check before the drop compares against.
func (mv *mover) finalShard(ctx context.Context, w shardWork) (int64, string, error) {
	tables, err := sameTables(ctx, w)
	if err != nil {
		return 0, "", err
	}
	verify := func(table string) error { return mv.hook("chunk copied: " + table) }
	h := sha256.New()
	var rows int64
	for _, tb := range tables {
		n, sum, err := syncTable(ctx, w, tb, mv.opt.Batch, verify)
		rows += n
		if err != nil {
			var mm *mismatch
			if errors.As(err, &mm) {
				return rows, "", err
			}
			return rows, "", fmt.Errorf("table %s: %w", tb.name, err)
		}
		if tb.autoInc {
			if err := raiseAutoInc(ctx, w, tb.name); err != nil {
				return rows, "", fmt.Errorf("table %s: %w", tb.name, err)
			}
		}
		fmt.Fprintf(h, "%s:%d:%016x;", tb.name, sum.rows, sum.hash)
	}
	return rows, hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// shardDigest is finalShard's digest computed on one side alone.
func shardDigest(ctx context.Context, db *sqlx.DB, name string, batch int) (string, error) {
	tables, err := listTables(ctx, db, name)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, tb := range tables {
		var sum tableSum
		var lo []any
		for {
			hi, err := chunkEnd(ctx, db, name, tb, lo, batch)
			if err != nil {
				return "", err
			}
			s, err := tableChecksum(ctx, db, name, tb, lo, hi)
			if err != nil {
				return "", err
			}
			sum.rows, sum.hash = sum.rows+s.rows, sum.hash^s.hash
			if hi == nil {
				break
			}
			lo = hi
		}
		fmt.Fprintf(h, "%s:%d:%016x;", tb.name, sum.rows, sum.hash)
	}
	return hex.EncodeToString(h.Sum(nil)[:8]), nil
}

// tableInfo is one table's shape as information_schema describes it.
type tableInfo struct {
	name    string
	cols    []string
	ints    []intKind // per column: how to decode integers
	pk      []int     // indexes into cols
	autoInc bool
}

type intKind uint8

const (
	notInt intKind = iota
	signedInt
	unsignedInt
)

// listTables describes the base tables of database name. Table and column
// names come from the server and are checked against a strict pattern
// before they are ever put in SQL text; a table without a primary key is
// an error (it could not be copied in chunks).
func listTables(ctx context.Context, db *sqlx.DB, name string) ([]tableInfo, error) {
	// Three queries, each with the schema as a constant, so the server
	// opens only this database's tables.
	var base []string
	if err := sqlx.SelectContext(ctx, db, &base, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME", name); err != nil {
		return nil, err
	}
	var cols []struct {
		Table    string `db:"TABLE_NAME"`
		Column   string `db:"COLUMN_NAME"`
		DataType string `db:"DATA_TYPE"`
		ColType  string `db:"COLUMN_TYPE"`
		Extra    string `db:"EXTRA"`
	}
	if err := sqlx.SelectContext(ctx, db, &cols, "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, EXTRA FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME, ORDINAL_POSITION", name); err != nil {
		return nil, err
	}
	var keys []struct {
		Table  string `db:"TABLE_NAME"`
		Column string `db:"COLUMN_NAME"`
	}
	if err := sqlx.SelectContext(ctx, db, &keys, "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = ? AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY TABLE_NAME, ORDINAL_POSITION", name); err != nil {
		return nil, err
	}
	byName := map[string]*tableInfo{}
	out := make([]tableInfo, len(base))
	for i, t := range base {
		if !identRE.MatchString(t) {
			return nil, fmt.Errorf("unexpected table name %q", t)
		}
		out[i].name = t
		byName[t] = &out[i]
	}
	for _, c := range cols {
		tb := byName[c.Table]
		if tb == nil {
			continue // a view
		}
		if !identRE.MatchString(c.Column) {
			return nil, fmt.Errorf("unexpected column name %q.%q", c.Table, c.Column)
		}
		kind := notInt
		switch strings.ToLower(c.DataType) {
		case "tinyint", "smallint", "mediumint", "int", "bigint":
			kind = signedInt
			if strings.Contains(strings.ToLower(c.ColType), "unsigned") {
				kind = unsignedInt
			}
		}
		if strings.Contains(strings.ToLower(c.Extra), "auto_increment") {
			tb.autoInc = true
		}
		tb.cols = append(tb.cols, c.Column)
		tb.ints = append(tb.ints, kind)
	}
	for _, k := range keys {
		tb := byName[k.Table]
		if tb == nil {
			continue
		}
		i := slices.Index(tb.cols, k.Column)
		if i < 0 {
			return nil, fmt.Errorf("table %s: primary key column %q not found", tb.name, k.Column)
		}
		tb.pk = append(tb.pk, i)
	}
	for _, tb := range out {
		if len(tb.pk) == 0 {
			return nil, fmt.Errorf("table %s has no primary key; it cannot be copied in chunks", tb.name)
		}
	}
	return out, nil
}

// sameTables lists the source's tables and checks the target has the same
// tables with the same columns and keys.
func sameTables(ctx context.Context, w shardWork) ([]tableInfo, error) {
	src, err := listTables(ctx, w.src, w.name)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if len(src) == 0 {
		return nil, fmt.Errorf("source database %s has no tables (is it provisioned?)", w.name)
	}
	dst, err := listTables(ctx, w.dst, w.name)
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	if len(src) != len(dst) {
		return nil, fmt.Errorf("source has %d tables, target %d: schemas differ", len(src), len(dst))
	}
	for i := range src {
		a, b := src[i], dst[i]
		if a.name != b.name || strings.Join(a.cols, ",") != strings.Join(b.cols, ",") || fmt.Sprint(a.pk) != fmt.Sprint(b.pk) {
			return nil, fmt.Errorf("table %s differs between source and target (%v / %v): schemas differ", a.name, a.cols, b.cols)
		}
	}
	return src, nil
}

// identRE accepts the table and column names the migrations create.
var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,63}$`)

// tableSum is a table's (or a chunk's) row count and the XOR of a 64-bit
// hash of every row (MD5 of all its columns, each QUOTE()d so that NULL
// and the empty string differ). Rows are unique (primary key), so XOR loses nothing that
// matters.
type tableSum struct {
	rows int64
	hash uint64
}

func (tb tableInfo) rowHash() string {
	parts := make([]string, len(tb.cols))
	for i, c := range tb.cols {
		parts[i] = "QUOTE(`" + c + "`)"
	}
	return "CAST(CONV(LEFT(MD5(CONCAT_WS(0x1f, " + strings.Join(parts, ", ") + ")), 16), 16, 10) AS UNSIGNED)"
}

func (tb tableInfo) pkList() string {
	parts := make([]string, len(tb.pk))
	for i, c := range tb.pk {
		parts[i] = "`" + tb.cols[c] + "`"
	}
	return strings.Join(parts, ", ")
}

func (tb tableInfo) colList() string {
	parts := make([]string, len(tb.cols))
	for i, c := range tb.cols {
		parts[i] = "`" + c + "`"
	}
	return strings.Join(parts, ", ")
}

// keyCond is the condition "primary key > lo AND primary key <= hi" (a
// nil bound is open), written as ORs of equal prefixes so the range
// optimizer uses the primary key.
func (tb tableInfo) keyCond(lo, hi []any) (string, []any) {
	var conds []string
	var args []any
	for _, b := range []struct {
		key []any
		op  string
	}{{lo, ">"}, {hi, "<"}} {
		if b.key == nil {
			continue
		}
		var ors []string
		for i := range tb.pk {
			var ands []string
			for j := 0; j < i; j++ {
				ands = append(ands, "`"+tb.cols[tb.pk[j]]+"` = ?")
				args = append(args, b.key[j])
			}
			ands = append(ands, "`"+tb.cols[tb.pk[i]]+"` "+b.op+" ?")
			args = append(args, b.key[i])
			ors = append(ors, "("+strings.Join(ands, " AND ")+")")
		}
		if b.op == "<" { // <= hi: also the key equal to hi
			var ands []string
			for j := range tb.pk {
				ands = append(ands, "`"+tb.cols[tb.pk[j]]+"` = ?")
				args = append(args, b.key[j])
			}
			ors = append(ors, "("+strings.Join(ands, " AND ")+")")
		}
		conds = append(conds, "("+strings.Join(ors, " OR ")+")")
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

func tableChecksum(ctx context.Context, db *sqlx.DB, name string, tb tableInfo, lo, hi []any) (tableSum, error) {
	where, args := tb.keyCond(lo, hi)
	var s tableSum
	err := db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(BIT_XOR("+tb.rowHash()+"), 0) FROM "+name+".`"+tb.name+"`"+where, args...).Scan(&s.rows, &s.hash)
	return s, err
}

// chunkEnd returns the primary key of the batch-th row after lo on the
// source, or nil when fewer rows remain (the chunk runs to the end).
func chunkEnd(ctx context.Context, db *sqlx.DB, name string, tb tableInfo, lo []any, batch int) ([]any, error) {
	where, args := tb.keyCond(lo, nil)
	q := "SELECT " + tb.pkList() + " FROM " + name + ".`" + tb.name + "`" + where + " ORDER BY " + tb.pkList() + " LIMIT 1 OFFSET " + strconv.Itoa(batch-1)
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	key := make([]any, len(tb.pk))
	ptrs := make([]any, len(key))
	for i := range key {
		ptrs[i] = &key[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	for i, c := range tb.pk {
		if key[i], err = tb.ints[c].decode(key[i]); err != nil {
			return nil, err
		}
	}
	return key, rows.Err()
}

func (k intKind) decode(v any) (any, error) {
	b, ok := v.([]byte)
	if !ok || k == notInt {
		return v, nil
	}
	if k == unsignedInt {
		return strconv.ParseUint(string(b), 10, 64)
	}
	return strconv.ParseInt(string(b), 10, 64)
}

// syncTable makes the target's table equal to the source's. An empty
// target gets a straight copy (the first pass); otherwise each chunk whose
// sums differ is replaced (delete the chunk's key range on the target,
// insert the source's rows) in one target transaction.
//
// With verify (the final pass, source frozen) every chunk is compared:
// equal sums verify it, and a replaced chunk is summed again on both hosts
// and must then be equal, or the result is a *mismatch; verify is called
// after each copy (a test hook). It returns the rows written and, with
// verify, the source's whole-table sum.
func syncTable(ctx context.Context, w shardWork, tb tableInfo, batch int, verify func(table string) error) (int64, tableSum, error) {
	var written int64
	var total tableSum
	if verify == nil {
		var empty int
		err := w.dst.QueryRowContext(ctx, "SELECT COUNT(*) FROM (SELECT 1 FROM "+w.name+".`"+tb.name+"` LIMIT 1) x").Scan(&empty)
		if err != nil {
			return 0, total, err
		}
		if empty == 0 {
			n, err := copyAll(ctx, w, tb, batch)
			return n, total, err
		}
	}
	var lo []any
	for {
		hi, err := chunkEnd(ctx, w.src, w.name, tb, lo, batch)
		if err != nil {
			return written, total, err
		}
		s, err := tableChecksum(ctx, w.src, w.name, tb, lo, hi)
		if err != nil {
			return written, total, err
		}
		d, err := tableChecksum(ctx, w.dst, w.name, tb, lo, hi)
		if err != nil {
			return written, total, err
		}
		if s != d {
			n, err := copyChunk(ctx, w, tb, lo, hi)
			written += n
			if err != nil {
				return written, total, err
			}
			if verify != nil {
				if err := verify(tb.name); err != nil {
					return written, total, err
				}
				if s, err = tableChecksum(ctx, w.src, w.name, tb, lo, hi); err != nil {
					return written, total, err
				}
				if d, err = tableChecksum(ctx, w.dst, w.name, tb, lo, hi); err != nil {
					return written, total, err
				}
				if s != d {
					return written, total, &mismatch{shard: w.n, table: tb.name, src: s, dst: d}
				}
			}
		}
		total.rows, total.hash = total.rows+s.rows, total.hash^s.hash
		if hi == nil {
			return written, total, nil
		}
		lo = hi
	}
}

// copyAll copies the whole table into an empty target table in batches.
func copyAll(ctx context.Context, w shardWork, tb tableInfo, batch int) (int64, error) {
	var written int64
	var lo []any
	for {
		where, args := tb.keyCond(lo, nil)
		rows, last, err := fetchRows(ctx, w.src, "SELECT "+tb.colList()+" FROM "+w.name+".`"+tb.name+"`"+where+" ORDER BY "+tb.pkList()+" LIMIT "+strconv.Itoa(batch), tb, args)
		if err != nil || len(rows) == 0 {
			return written, err
		}
		tx, err := w.dst.BeginTxx(ctx, nil)
		if err != nil {
			return written, err
		}
		if err := insertRows(ctx, tx, w.name, tb, rows); err != nil {
			tx.Rollback()
			return written, err
		}
		if err := tx.Commit(); err != nil {
			return written, err
		}
		written += int64(len(rows))
		lo = last
	}
}

// copyChunk replaces the target's rows with keys in (lo, hi] by the
// source's, in one target transaction.
func copyChunk(ctx context.Context, w shardWork, tb tableInfo, lo, hi []any) (int64, error) {
	where, args := tb.keyCond(lo, hi)
	rows, _, err := fetchRows(ctx, w.src, "SELECT "+tb.colList()+" FROM "+w.name+".`"+tb.name+"`"+where+" ORDER BY "+tb.pkList(), tb, args)
	if err != nil {
		return 0, err
	}
	tx, err := w.dst.BeginTxx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "DELETE FROM "+w.name+".`"+tb.name+"`"+where, args...); err != nil {
		return 0, err
	}
	if err := insertRows(ctx, tx, w.name, tb, rows); err != nil {
		return 0, err
	}
	return int64(len(rows)), tx.Commit()
}

// fetchRows reads rows (integers decoded so keys compare as numbers, not
// strings) and returns them with the last row's primary key.
func fetchRows(ctx context.Context, db *sqlx.DB, q string, tb tableInfo, args []any) ([][]any, []any, error) {
	rs, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rs.Close()
	var out [][]any
	for rs.Next() {
		vals := make([]any, len(tb.cols))
		ptrs := make([]any, len(vals))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			return nil, nil, err
		}
		for i, k := range tb.ints {
			if vals[i], err = k.decode(vals[i]); err != nil {
				return nil, nil, err
			}
		}
		out = append(out, vals)
	}
	if err := rs.Err(); err != nil {
		return nil, nil, err
	}
	if len(out) == 0 {
		return nil, nil, nil
	}
	lastRow := out[len(out)-1]
	key := make([]any, len(tb.pk))
	for i, c := range tb.pk {
		key[i] = lastRow[c]
	}
	return out, key, nil
}

// maxInsertBytes bounds one multi-row INSERT well under max_allowed_packet.
const maxInsertBytes = 2 << 20

// insertRows inserts rows with their explicit keys (local_id included), in
// statements of at most maxInsertBytes.
func insertRows(ctx context.Context, tx *sqlx.Tx, name string, tb tableInfo, rows [][]any) error {
	head := "INSERT INTO " + name + ".`" + tb.name + "` (" + tb.colList() + ") VALUES "
	tuple := "(?" + strings.Repeat(",?", len(tb.cols)-1) + ")"
	var q strings.Builder
	var args []any
	size := 0
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		_, err := tx.ExecContext(ctx, q.String(), args...)
		q.Reset()
		args, size = args[:0], 0
		return err
	}
	for _, r := range rows {
		if len(args) == 0 {
			q.WriteString(head)
		} else {
			q.WriteByte(',')
		}
		q.WriteString(tuple)
		args = append(args, r...)
		for _, v := range r {
			size += 24
			if b, ok := v.([]byte); ok {
				size += 2 * len(b)
			}
		}
		if size >= maxInsertBytes {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// raiseAutoInc sets the target table's AUTO_INCREMENT to at least the
// source's, so an id handed out (even by a rolled-back insert) on the
// source is never handed out again on the target.
func raiseAutoInc(ctx context.Context, w shardWork, table string) error {
	const q = "SELECT COALESCE(AUTO_INCREMENT, 0) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?"
	var src, dst uint64
	if err := w.src.QueryRowContext(ctx, q, w.name, table).Scan(&src); err != nil {
		return err
	}
	if err := w.dst.QueryRowContext(ctx, q, w.name, table).Scan(&dst); err != nil {
		return err
	}
	if src <= dst {
		return nil
	}
	_, err := w.dst.ExecContext(ctx, "ALTER TABLE "+w.name+".`"+table+"` AUTO_INCREMENT = "+strconv.FormatUint(src, 10))
	return err
}
