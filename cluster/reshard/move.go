package reshard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pinstore/pinstore/cluster/throttle"
	"github.com/pinstore/pinstore/internal/progress"
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
	defaultQueryTimeout = topology.DefaultQueryTimeout
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
	// Finish ends the move once it has switched: the old copies (the
	// source databases) dropped, the change logs and their triggers
	// removed on both sides. Without it a move stops after the switch,
	// still in progress and reversible (Revert), until a later Move with
	// Finish.
	Finish bool
	// Revert moves a switched range back to its source hosts, with every
	// write the target took since the switch, and ends the move.
	Revert bool
	// Keep is how long, after the switch, Move keeps applying the
	// target's changes to the old copies before it returns (or finishes),
	// so that they stay current; a revert later needs only what changed
	// since. The target's change log keeps a revert exact either way.
	Keep time.Duration
	// KeepSource leaves the old copies in place when the move ends (their
	// change logs and triggers are removed): the source databases after
	// Finish, the target's after a Revert.
	KeepSource bool
	Abort      bool // roll back the move in progress (before its switch) instead of finishing it
	Parallel   int  // shards copied at once; default 4 (the pass while writes are held runs 4 times as many)
	Batch      int  // rows per copy chunk, and change log entries per catch-up batch; default 1000
	PoolSize   int  // connections per host (PINSTORE_POOL_SIZE); default 64
	// Throttle are the limits the work done while writes flow (the copy,
	// catch-up passes, the check, keeping the old copies) waits under
	// before each chunk or batch: Threads_running on the source and
	// target hosts, the lag of the replicas the map names for them. The
	// pass while writes are held is never throttled. Zero fields take
	// package throttle's defaults.
	Throttle throttle.Limits
	Progress io.Writer // receives progress lines; nil for none

	hook  func(step string) error // tests: fail at a step as a kill would
	every time.Duration           // tests: how often progress is printed; default a second
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

	mu       sync.Mutex
	tables   map[int][]tableInfo // by shard: its tables, the same on both sides
	counts   map[int]*rowCounts  // by shard: row counts read at the check before the hold, carried forward since
	checked  bool                // the check ran in this run
	verified atomic.Int64

	throttle *throttle.Throttler // holds the work done while writes flow back while the hosts are busy
	// catchUpThrottle is throttle without the redo log signal, for the
	// catch-up passes.
	catchUpThrottle *throttle.Throttler
}

// Move moves shards opt.First … opt.Last to host opt.To, or resumes the
// move in progress, or with opt.Abort rolls it back (before its switch),
// with opt.Revert moves it back (after its switch), with opt.Finish ends
// it; see the package comment for the protocol. It reads and rewrites the
// map at opt.Home (or the map file opt.MapFile); servers pick up each
// rewrite by following it.
//
// Refused, changing nothing (EInvalid or EConflict): no map; a range
// outside the map; an unknown target; shards already on the target, or
// whose database the target already has; a target that is the same MySQL
// server as a source; a range that is read-only with no move recorded; a
// move that would leave no writable open range while writes are held;
// source shards not migrated to the newest schema; another move in
// progress (switched but not finished counts) or running; Abort after the
// switch, Revert before it. A verification mismatch rolls back (the range
// is writable where it was before the hold, nothing dropped) and returns
// EConflict, as does a write that reached an old copy after the switch
// (Finish then drops nothing). Any other error once the move has started
// (a host down, the context cancelled) leaves it in progress, to be
// carried on by calling Move again with the same range and target (and
// the same Revert), or rolled back with Abort. Errors that are not a
// *model.Error are wrapped with the operation ("reshard.Move: …").
func Move(ctx context.Context, opt Options) (Report, error) {
	const op = "reshard.Move"
	mv := &mover{opt: opt, home: opt.Home, out: opt.Progress, start: time.Now(), tables: map[int][]tableInfo{}, counts: map[int]*rowCounts{}}
	if mv.home == nil && opt.MapFile != "" {
		mv.home = FileHome(opt.MapFile)
	}
	if mv.home == nil {
		return mv.rep, model.Wrap(op, model.EInvalid, "moving shards needs a shard map file (PINSTORE_SHARD_MAP) or a topology in etcd (PINSTORE_TOPOLOGY)", nil)
	}
	if n := btoi(opt.Abort) + btoi(opt.Revert) + btoi(opt.Finish); n > 1 || opt.Abort && opt.Keep > 0 {
		return mv.rep, model.Wrap(op, model.EInvalid, "choose one of abort, revert and finish (keep goes with a move or finish)", nil)
	}
	mv.defaults()
	mv.hosts = newHosts(mv.opt.PoolSize)
	mv.throttle = throttle.New(mv.opt.Throttle, mv.logf)
	// The catch-up keeps pace with the clients' writes: holding it back
	// while the redo log is full would only make it fall behind (a move
	// measured at the hosts' highest write rate never converged), and
	// the changes it applies are the clients' own, bounded by their rate.
	// The copy, the unbounded bulk of a move's writes, waits for the redo
	// log.
	lim := mv.throttle.Limits()
	lim.RedoLogPercent = -1
	mv.catchUpThrottle = throttle.New(lim, mv.logf)
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

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// defaults fills the options the caller left zero and warns about a settle
// time too short to be safe.
func (mv *mover) defaults() {
	o := &mv.opt
	if mv.out == nil {
		mv.out = io.Discard
	}
	// The copy's goroutines, its meter and the throttle all print.
	mv.out = progress.Locked(mv.out)
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
		o.Settle = topology.MoveSettle(o.MapPoll, o.QueryTimeout)
	} else if floor := o.MapPoll + o.QueryTimeout; o.Confirm == nil && o.Settle < floor {
		mv.logf("WARNING: settle %v is shorter than the map poll interval plus the query timeout (%v): a write routed on an old map may reach an old copy after the final pass (the check before the drop would then keep it)", o.Settle, floor)
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
// progress, and carries it from the step the map shows as far as asked.
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
		if mv.opt.Abort || mv.opt.Revert {
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
				"a move of shards %s to %q is in progress (%s, step %s): carry it on with move-shards --range %s --to %s (add --finish to end it, --revert to move it back once switched, --abort to roll it back before)",
				st.Range, st.To, lock.where(), st.Step, st.Range, st.To)
		}
	}
	st := lock.state
	mv.rep.Shards = st.last - st.first + 1
	mv.rep.To = st.To
	for _, f := range st.From {
		mv.rep.From = append(mv.rep.From, f.Shards+"@"+f.Host)
	}
	pos, err := where(m, st)
	if err != nil {
		return mv.rep, err
	}
	if !fresh {
		mv.rep.Resumed = pos
		mv.logf("carrying on the move of shards %s to %s (state in %s: step %s; the map says %s)", st.Range, st.To, lock.where(), st.Step, pos)
	} else {
		wait := fmt.Sprintf("settle %v", mv.opt.Settle)
		if mv.opt.Confirm != nil {
			wait = "servers confirm each map"
		}
		mv.logf("moving shards %s (%d) from %s to %s; %s", st.Range, mv.rep.Shards, strings.Join(mv.rep.From, ", "), st.To, wait)
	}
	switch {
	case mv.opt.Abort:
		err = mv.abort(ctx, m, pos)
	case mv.opt.Revert:
		err = mv.revert(ctx, m, pos)
	case st.Step == stepReverting:
		err = model.Errorf(model.EConflict, "a revert of shards %s from %q is in progress: run move-shards --range %s --to %s --revert to finish it", st.Range, st.To, st.Range, st.To)
	default:
		err = mv.forward(ctx, m, pos)
	}
	mv.rep.Total = time.Since(mv.start)
	mv.rep.MapVersion = mv.cur.Version()
	mv.rep.Verified = mv.verified.Load()
	return mv.rep, err
}

// forward carries a move from where the map shows it to its switch, then
// keeps the old copies current for Keep, and with Finish ends it.
func (mv *mover) forward(ctx context.Context, m *shardmap.Map, pos string) error {
	st := mv.lock.state
	switch pos {
	case stepCopy:
		if err := phase(ctx, "copy and catch-up", func(ctx context.Context) error { return mv.copyStep(ctx, m) }); err != nil {
			return err
		}
		var err error
		if m, _, err = mv.loadMap(ctx); err != nil {
			return err
		}
		fallthrough
	case stepHold:
		if err := phase(ctx, "hold and switch", func(ctx context.Context) error { return mv.cutover(ctx, m, false, pos == stepHold) }); err != nil {
			return err
		}
		mv.logf("switched: copy %v (%d rows, then %d catch-up passes applying %d changes); writes held off %v (final pass %v: %d changes applied, %d keys verified)",
			round(mv.rep.Copy), mv.rep.Rows, mv.rep.Passes, mv.rep.CatchUp, round(mv.rep.Held), round(mv.rep.Final), mv.rep.FinalRows, mv.verified.Load())
	case stepSwitched:
	default:
		return model.Errorf(model.EConflict, "the map holds shards %s read-only on the target %q, as only a revert does, but no revert is recorded (%s); fix the map by hand", st.Range, st.To, mv.lock.where())
	}
	mv.rep.Switched = true
	if st.Step != stepFinishing {
		if err := phase(ctx, "keep", mv.keep); err != nil {
			return err
		}
		if !mv.opt.Finish {
			mv.logf("the move stays open and reversible: the target's change log records every write. End it with move-shards --range %s --to %s --finish (drops the old copies), or move the range back with --revert", st.Range, st.To)
			return nil
		}
	}
	return phase(ctx, "finish", mv.finishStep)
}

// copyStep is the first pass, every shard copied while writes flow (once:
// a move that is carried on after it needs only the logs), then the
// catch-up passes.
func (mv *mover) copyStep(ctx context.Context, m *shardmap.Map) error {
	st := mv.lock.state
	if err := mv.hook("copy"); err != nil {
		return err
	}
	begin := time.Now()
	if !st.Copied {
		rows, err := mv.eachShard(ctx, m, "copy", false, mv.opt.Parallel, mv.copyShard)
		mv.rep.Rows += rows
		mv.rep.Copy = time.Since(begin)
		if err != nil {
			return err
		}
		mv.logf("copy: %d shards, %d rows in %v; every change since is in the source's change log", mv.rep.Shards, rows, round(mv.rep.Copy))
		st.Copied = true
		if err := mv.lock.save(ctx); err != nil {
			return err
		}
	}
	if err := mv.hook("copied"); err != nil {
		return err
	}
	begin = time.Now()
	err := mv.catchUp(ctx, m, false)
	mv.rep.Copy += time.Since(begin)
	return err
}

// check counts every table on both sides, shard by shard, just before the
// hold, while writes still flow (readCounts), and raises the AUTO_INCREMENT
// counters of the side that is to take over to the other's plus
// autoIncMargin. The counts are carried forward by every change applied
// from then on (rowCounts), so the pass while writes are held compares
// them without counting a table again.
func (mv *mover) check(ctx context.Context, m *shardmap.Map, back bool) error {
	begin := time.Now()
	var differ atomic.Int64
	_, err := mv.eachShard(ctx, m, "check", back, mv.opt.Parallel, func(ctx context.Context, w shardWork) (int64, error) {
		tables, _, err := mv.tablesOf(ctx, w)
		if err != nil {
			return 0, err
		}
		c, n, err := readCounts(ctx, w, tables)
		if err != nil {
			return 0, err
		}
		differ.Add(int64(n))
		mv.mu.Lock()
		mv.counts[w.n] = c
		mv.mu.Unlock()
		return 0, raiseAutoInc(ctx, w, mv.hosts.ddlLock(w.dst), tables, autoIncMargin)
	})
	if err != nil {
		return err
	}
	mv.checked = true
	mv.logf("checked every table's row count on both sides in %v (%d tables with changes still to apply)", round(time.Since(begin)), differ.Load())
	return nil
}

// countsOf is shard n's counts carried forward from the check in this
// run, or nil.
func (mv *mover) countsOf(n int) *rowCounts {
	mv.mu.Lock()
	defer mv.mu.Unlock()
	return mv.counts[n]
}

// autoIncMargin is how far past the other side's counter the check before
// the hold raises the AUTO_INCREMENT counters of the side that takes over:
// ids that inserts take on the other side until the hold (committed ones
// are copied with their ids, which raises the counter too; rolled-back
// ones are not) are never handed out again unless more than this many are
// taken meanwhile.
const autoIncMargin = 10000

// cutover holds writes to the range where it is writable now (the source,
// or back: the target), settles, applies the last changes and verifies
// them, and switches the map (to the target, or back: to the sources).
// resumed: the map held the range already when this run started.
func (mv *mover) cutover(ctx context.Context, m *shardmap.Map, back, resumed bool) error {
	st := mv.lock.state
	from, held, what := stepCopy, stepHold, "switched"
	switchTo := mv.onRange(func(r *shardmap.Range) { r.Host, r.ReadOnly = st.To, false })
	if back {
		from, held, what = stepSwitched, stepRevertHold, "reverted"
		switchTo = mv.toSources
	}
	heldAt := time.Now()
	if !resumed {
		if !back {
			st.Step = stepHold
			if err := mv.lock.save(ctx); err != nil {
				return err
			}
		}
		holdBegin := time.Now()
		ro, err := mv.rewrite(ctx, from, mv.onRange(func(r *shardmap.Range) { r.ReadOnly = true }), "holding writes")
		if err != nil {
			return err
		}
		heldAt = time.Now()
		mv.rep.Phases.Hold = heldAt.Sub(holdBegin)
		m = ro
		if err := mv.hook("held"); err != nil {
			return err
		}
	}
	mv.logf("writes held: shards %s read-only in the map (version %s)", st.Range, m.Version())
	settleBegin := time.Now()
	if err := mv.settle(ctx, m.Version()); err != nil {
		return err
	}
	mv.rep.Phases.Settle = time.Since(settleBegin)
	if err := mv.hook("final"); err != nil {
		return err
	}
	begin := time.Now()
	n, err := mv.eachShard(ctx, m, "final pass", back, 4*mv.opt.Parallel, mv.finalShard)
	mv.rep.FinalRows += n
	mv.rep.Final = time.Since(begin)
	mv.rep.Phases.Final = mv.rep.Final
	mv.mu.Lock()
	mv.counts = map[int]*rowCounts{} // they count this direction; the old copies are kept the other way
	mv.mu.Unlock()
	var mm *mismatch
	if errors.As(err, &mm) {
		return mv.rollback(ctx, mm, back)
	}
	if err != nil {
		return err
	}
	mv.logf("final pass: %d changes applied, %d keys and every table's row count verified, %d shards, in %v", n, mv.verified.Load(), mv.rep.Shards, round(mv.rep.Final))
	if err := mv.hook("verified"); err != nil {
		return err
	}
	begin = time.Now()
	if err := mv.markArrival(ctx, m, back); err != nil {
		return err
	}
	mv.rep.Phases.Arrival = time.Since(begin)
	if !back {
		st.Step = stepSwitched
		if err := mv.lock.save(ctx); err != nil {
			return err
		}
	}
	begin = time.Now()
	sw, err := mv.rewrite(ctx, held, switchTo, what)
	if err != nil {
		return err
	}
	mv.rep.Phases.Switch = time.Since(begin)
	mv.rep.Held = time.Since(heldAt)
	mv.logf("%s: shards %s writable on %s (map version %s); writes were held off for %v (%v)", what, st.Range, strings.Join(rangeHosts(sw, st), ", "), sw.Version(), round(mv.rep.Held), mv.rep.Phases)
	return nil
}

// rangeHosts is the hosts the map places the move's range on.
func rangeHosts(m *shardmap.Map, st *moveState) []string {
	var out []string
	for sh := st.first; sh <= st.last; sh++ {
		if r, _ := m.RangeOf(sh); !slices.Contains(out, r.Host) {
			out = append(out, r.Host)
		}
	}
	return out
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
