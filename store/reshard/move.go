package reshard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pinstore/pinstore/migrations"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
	"github.com/pinstore/pinstore/store/topology"
)

// Defaults of the servers' configuration that a move relies on when its
// caller does not say otherwise (how often servers re-read the map file is
// topology.DefaultMapPoll): their per-statement deadline, and their pool
// size per host.
const (
	defaultQueryTimeout = 5 * time.Second
	defaultPoolSize     = 64
)

// Options says what Move moves and how.
type Options struct {
	First, Last int    // the range of shards, inclusive
	To          string // target host, as the map names it

	// Home is where the shard map the servers follow lives (the map file,
	// or etcd); Move reads and rewrites the map there, and keeps the
	// move's state with Home's lock of moves. When nil, MapFile.
	Home Home
	// MapFile is the shard map file the servers follow
	// (PINSTORE_SHARD_MAP), used when Home is nil.
	MapFile string
	// Shards and DBPrefix are what the servers assume when the map file
	// sets no shards or db_prefix (PINSTORE_SHARDS, PINSTORE_DB_PREFIX);
	// default shardmap.DefaultShards and shardmap.DefaultDBPrefix.
	Shards   int
	DBPrefix string

	// Settle is how long to wait after each map change before relying on
	// every server having it: at least the servers' map poll interval
	// plus the query timeout (a write routed on the old map finishes or
	// is rolled back within its deadline). Default MapPoll + QueryTimeout
	// + 2s.
	Settle time.Duration
	// MapPoll is the servers' map poll interval (PINSTORE_MAP_POLL);
	// default 2s, the servers' default.
	MapPoll time.Duration
	// QueryTimeout is the servers' per-statement deadline, within which a
	// write routed on an old map ends; default 5s, the servers' default.
	QueryTimeout time.Duration
	// Confirm, when set, replaces the Settle wait: after each map change
	// Move calls it with the new map's version, and it returns once every
	// server reports routing by that version (or an error naming the one
	// that does not); then Move waits only the query timeout, for writes
	// routed on the old map to finish or roll back.
	Confirm func(ctx context.Context, version string) error
	// ConfirmDrains says that Confirm returns only once no write routed
	// by an older map is still running on any server (servers following
	// etcd report that): then Move does not wait the query timeout after
	// it.
	ConfirmDrains bool
	KeepSource    bool      // leave the source databases in place after the switch
	Abort         bool      // roll back the move in progress instead of finishing it
	Parallel      int       // shards copied at once; default 4
	Batch         int       // rows per copy chunk; default 1000
	PoolSize      int       // connections per host (PINSTORE_POOL_SIZE); default 64
	Progress      io.Writer // receives progress lines; nil for none

	hook func(step string) error // tests: fail at a step as a kill would
}

// Report is what a move did and how long it took.
type Report struct {
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

// mover is one Move run.
type mover struct {
	opt   Options
	home  Home          // where the map lives
	cur   *shardmap.Map // the map in force: read at the start, then each one written
	hosts *hosts        // pools, by DSN
	lock  *moveLock
	rep   Report
	ms    []migrations.Migration
	out   io.Writer
	start time.Time
}

// Move moves shards opt.First … opt.Last to host opt.To, or resumes (or
// with opt.Abort, rolls back) the move in progress; see the package comment
// for the protocol. It reads and rewrites the map file opt.MapFile; servers
// pick up each rewrite by following the file (store's WatchMap or
// ReloadFile).
//
// Refused, changing nothing (EInvalid or EConflict): no map file; a range
// outside the map; an unknown target; shards already on the target, or
// whose database the target already has; a target that is the same MySQL
// server as a source; a range that is read-only with no move recorded; a
// move that would leave no writable open range while writes are held;
// source shards not migrated to the newest schema; another move in
// progress or running. A verification mismatch rolls back (the range is
// writable on its source again, nothing dropped) and returns EConflict, as
// does a source changed after the final verify (its database is kept).
// Any other error once the move has started (a host down, the context
// cancelled) leaves it in progress, to be finished by calling Move again
// with the same range and target, or rolled back with Abort. Errors that
// are not a *model.Error are wrapped with the operation ("reshard.Move: …").
func Move(ctx context.Context, opt Options) (Report, error) {
	const op = "reshard.Move"
	mv := &mover{opt: opt, home: opt.Home, out: opt.Progress, start: time.Now()}
	if mv.home == nil && opt.MapFile != "" {
		mv.home = FileHome(opt.MapFile)
	}
	if mv.home == nil {
		return mv.rep, model.Wrap(op, model.EInvalid, "moving shards needs a shard map file (PINSTORE_SHARD_MAP) or a topology in etcd (PINSTORE_TOPOLOGY)", nil)
	}
	mv.defaults()
	mv.hosts = newHosts(mv.opt.PoolSize)
	rep, err := mv.rep, mv.load(ctx)
	if err == nil {
		rep, err = mv.run(ctx)
	}
	mv.hosts.close()
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

// defaults fills the options the caller left zero and warns about a settle
// time too short to be safe.
func (mv *mover) defaults() {
	o := &mv.opt
	if mv.out == nil {
		mv.out = io.Discard
	}
	if o.Shards <= 0 {
		o.Shards = shardmap.DefaultShards
	}
	if o.DBPrefix == "" {
		o.DBPrefix = shardmap.DefaultDBPrefix
	}
	if o.MapPoll <= 0 {
		o.MapPoll = topology.DefaultMapPoll
	}
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = defaultQueryTimeout
	}
	if o.Settle <= 0 {
		o.Settle = o.MapPoll + o.QueryTimeout + 2*time.Second
	} else if floor := o.MapPoll + o.QueryTimeout; o.Confirm == nil && o.Settle < floor {
		mv.logf("WARNING: settle %v is shorter than the map poll interval plus the query timeout (%v): a write routed on an old map may reach a source after its final copy (the check before the drop would then keep that source)", o.Settle, floor)
	}
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	if o.Batch <= 0 {
		o.Batch = 1000
	}
	if o.PoolSize <= 0 {
		o.PoolSize = defaultPoolSize
	}
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

// load reads the map in force from its home (as a server starting
// would) and the migrations every shard must have applied.
func (mv *mover) load(ctx context.Context) error {
	var err error
	if mv.cur, _, err = mv.home.ReadMap(ctx, mv.opt.Shards, mv.opt.DBPrefix); err != nil {
		return err
	}
	mv.ms, err = migrations.All()
	return err
}

// run takes the lock, starts a new move (plan) or picks up the one in
// progress, and carries it from the step the map shows to its end.
func (mv *mover) run(ctx context.Context) (Report, error) {
	lock, err := openMoveLock(ctx, mv.home)
	if err != nil {
		return mv.rep, err
	}
	mv.lock = lock
	defer lock.close()
	m, _, err := mv.loadMap(ctx)
	if err != nil {
		return mv.rep, err
	}
	fresh := lock.state == nil
	if fresh {
		if mv.opt.Abort {
			_ = lock.remove(ctx)
			return mv.rep, model.Errorf(model.EInvalid, "no move is in progress (no %s)", lock.where())
		}
		st, err := mv.plan(ctx, m)
		if err != nil {
			_ = lock.remove(ctx) // it was empty: nothing changes
			return mv.rep, err
		}
		lock.state = st
		if err := lock.save(ctx); err != nil {
			return mv.rep, err
		}
	} else {
		st := lock.state
		if st.first != mv.opt.First || st.last != mv.opt.Last || st.To != mv.opt.To {
			return mv.rep, model.Errorf(model.EConflict,
				"a move of shards %s to %q is in progress (%s): run move-shards --range %s --to %s to finish it, or add --abort to roll it back",
				st.Range, st.To, lock.where(), st.Range, st.To)
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
		mv.logf("resuming the move of shards %s to %s at step %q (state in %s)", st.Range, st.To, step, lock.where())
	} else {
		wait := fmt.Sprintf("settle %v", mv.opt.Settle)
		if mv.opt.Confirm != nil {
			wait = "servers confirm each map"
		}
		mv.logf("moving shards %s (%d) from %s to %s; %s", st.Range, mv.rep.Shards, strings.Join(mv.rep.From, ", "), st.To, wait)
	}
	if mv.opt.Abort {
		return mv.abort(ctx, m, step)
	}
	switch step {
	case stepCopy:
		if err := mv.copyStep(ctx, m); err != nil {
			return mv.rep, err
		}
		if m, _, err = mv.loadMap(ctx); err != nil {
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
	mv.rep.MapVersion = mv.cur.Version()
	mv.logf("done in %v: copy %v, writes held off %v (final pass %v), %d rows copied (%d while held), %d source databases dropped",
		round(mv.rep.Total), round(mv.rep.Copy), round(mv.rep.Held), round(mv.rep.Final), mv.rep.Rows, mv.rep.FinalRows, mv.rep.Dropped)
	return mv.rep, nil
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

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
		if err := mv.lock.save(ctx); err != nil {
			return err
		}
		ro, err := mv.rewrite(ctx, stepCopy, func(r *shardmap.Range) { r.ReadOnly = true }, "holding writes")
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
		return mv.rollback(ctx, mm)
	}
	if err != nil {
		return err
	}
	mv.logf("final pass: %d rows re-copied, %d shards verified in %v", rows, len(digests), round(mv.rep.Final))
	st.Digests = digests
	st.Step = stepSwitched
	if err := mv.lock.save(ctx); err != nil {
		return err
	}
	sw, err := mv.rewrite(ctx, stepHold, func(r *shardmap.Range) { r.Host, r.ReadOnly = st.To, false }, "switched")
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
	if mv.opt.ConfirmDrains {
		mv.logf("confirmed: every server routes by map %s, and no write routed by an older map is running (%v)", version, round(time.Since(begin)))
		return nil
	}
	mv.logf("confirmed: every server routes by map %s (%v); waiting the query timeout %v for writes routed on the old map", version, round(time.Since(begin)), mv.opt.QueryTimeout)
	return sleep(ctx, mv.opt.QueryTimeout)
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
		return mv.lock.remove(ctx)
	}
	m, _, err := mv.loadMap(ctx)
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
		src, err := mv.hosts.db(m, st.source(sh))
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
	return mv.lock.remove(ctx)
}

// abort rolls back the move in progress: the range writable on its
// sources, the target's copies dropped, the lock removed. A switched move
// cannot be rolled back (the target may have taken writes): move it back.
func (mv *mover) abort(ctx context.Context, m *shardmap.Map, step string) (Report, error) {
	st := mv.lock.state
	if step == stepSwitched {
		return mv.rep, model.Errorf(model.EConflict, "the move of %s to %q has switched already and the target may have taken writes; finish it (run without --abort) and move the range back", st.Range, st.To)
	}
	if step == stepHold {
		back, err := mv.rewrite(ctx, stepHold, func(r *shardmap.Range) { r.ReadOnly = false }, "aborted")
		if err != nil {
			return mv.rep, err
		}
		mv.logf("writes resumed on the source (map version %s)", back.Version())
	}
	dst, err := mv.hosts.db(m, st.To)
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
	mv.rep.MapVersion = mv.cur.Version()
	return mv.rep, mv.lock.remove(ctx)
}

// rollback ends a hold whose verification failed: the range writable on
// the source again, copies kept for inspection, the lock marked aborted.
func (mv *mover) rollback(ctx context.Context, mm *mismatch) error {
	st := mv.lock.state
	back, err := mv.rewrite(ctx, stepHold, func(r *shardmap.Range) { r.ReadOnly = false }, "verification failed")
	if err != nil {
		return err
	}
	st.Step = stepAborted
	st.Note = mm.Error()
	if err := mv.lock.save(ctx); err != nil {
		return err
	}
	mv.logf("VERIFICATION FAILED: %v; the range is writable on its source again (map version %s), nothing was dropped", mm, back.Version())
	return model.Wrap("", model.EConflict, fmt.Sprintf("verification failed (%v): the range is back on its source, writable; the copies on %q are kept: rerun to try again or add --abort to drop them", mm, st.To), nil)
}

// sleep waits d, or returns ctx's error if it ends first.
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
