package failover

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/replicas"
	"github.com/pinstore/pinstore/store/shardmap"
)

// Defaults of a failover.
const (
	// DefaultCatchUp bounds how long the chosen replica may take to apply
	// what it has received (and, with the master answering, the master's
	// last transaction).
	DefaultCatchUp = 30 * time.Second
	// probeWait bounds how long a server may take to answer a probe.
	probeWait = time.Second
)

// Options says which host to fail over, and how.
type Options struct {
	Host string // as the map names it
	// To is the replica to promote: its address (host:port) or DSN; ""
	// picks the replica that has received the most.
	To string

	Home     Home
	Shards   int
	DBPrefix string
	Access   Access

	// Lock, when set, is taken for the whole failover (the lock of moves:
	// no shard move and no other failover runs meanwhile); it returns the
	// function that releases it.
	Lock func(ctx context.Context) (unlock func(), err error)
	// Confirm, when set, returns once every server routes by the map of
	// the version given and no write routed by an older map is running
	// (etcd registrations); otherwise Failover waits Settle after each
	// map change. A Confirm that fails is reported and the failover goes
	// on: the old master is fenced by read_only, or is not answering.
	Confirm func(ctx context.Context, version string) error
	Settle  time.Duration

	CatchUp time.Duration // default DefaultCatchUp
	// LastSeen is the last position the caller saw the old master at
	// (a server's tracker): with the master not answering, transactions
	// it had beyond the promoted replica are counted from it.
	LastSeen replicas.Pos

	Progress io.Writer

	// Record, when set, keeps the record of the failover where the map
	// lives (fleet.FailoverStatus, on the fleet page): written when it
	// starts and when it ends, best-effort (see journal). By says who runs
	// it there; default "pinstore failover".
	Record Recorder
	By     string
}

// Report is what a failover did.
type Report struct {
	Host      string
	OldMaster string // address
	NewMaster string // address
	Answered  bool   // the old master answered: it was fenced, and the new one applied all it had
	Promoted  string // the new master's GTID position when promoted
	Lost      int64  // acknowledged transactions of the old master the new one lacks; -1: unknown (the old master did not answer)
	// Unacknowledged counts the old master's transactions no replica
	// received, with semi-synchronous replication: never acknowledged.
	Unacknowledged int64
	LostNote       string // how Lost is known
	SemiSync       bool   // the promoted replica acknowledged semi-synchronously (so no acknowledged commit can be missing)
	// NewSemiSync: the new master waits for its replicas' acknowledgements.
	NewSemiSync bool
	Repointed   []string
	Failed      []string // replicas that could not be re-pointed, with why
	Held        time.Duration
	Took        time.Duration
	MapVersion  string
	// RecordError says why the failover's record could not be written
	// (Options.Record); the failover went on regardless.
	RecordError string
}

// server is a replica of the host as Failover sees it.
type server struct {
	dsn  string
	addr string
	db   *sqlx.DB
	st   replicas.Server
	err  error
	has  replicas.Pos // what it holds: applied and received
	why  string       // why it may not be promoted ("" when it may)
}

// Failover promotes a replica of opt.Host to master: it fences the old
// master (read_only) when it answers and holds writes to the host's
// shards in the servers (its ranges read-only in the map), makes sure the
// chosen replica has everything (the master's last transaction when it
// answers; otherwise everything any replica received) and has applied it,
// promotes it (replication reset, writable, semi-synchronous master when
// the replicas acknowledged), points the other replicas at it, and
// switches the map: the new master, the others as its replicas, the old
// master fenced, the ranges writable. It refuses, changing nothing, to
// promote a replica that does not answer, has a broken SQL thread, holds
// errant transactions, or lacks what another replica received (EConflict,
// saying which and why).
//
// Once it holds the lock, the failover is recorded (opt.Record): a
// failover refused for want of the lock is not, so that it never
// overwrites the record of the one that holds it.
func Failover(ctx context.Context, opt Options) (Report, error) {
	start := time.Now()
	if opt.CatchUp <= 0 {
		opt.CatchUp = DefaultCatchUp
	}
	out := opt.Progress
	if out == nil {
		out = io.Discard
	}
	say := func(format string, args ...any) { fmt.Fprintf(out, "failover: "+format+"\n", args...) }
	j := newJournal(ctx, opt, start, say)
	if opt.Lock != nil {
		j.begin("lock")
		unlock, err := opt.Lock(ctx)
		if err != nil {
			return Report{Host: opt.Host, Lost: -1}, err
		}
		defer unlock()
	}
	rep, err := failover(ctx, opt, j, say)
	rep.Took = time.Since(start)
	rep.RecordError = j.finish(ctx, rep, err)
	return rep, err
}

// failover is Failover under the lock, its steps recorded in j.
func failover(ctx context.Context, opt Options, j *journal, say func(string, ...any)) (Report, error) {
	rep := Report{Host: opt.Host, Lost: -1}
	j.begin("read map")
	m, rev, spec, err := readHost(ctx, opt.Home, opt.Shards, opt.DBPrefix, opt.Host)
	if err != nil {
		return rep, err
	}
	if len(spec.ReplicaDSNs()) == 0 {
		return rep, model.Errorf(model.EInvalid, "host %q has no replica to promote", opt.Host)
	}
	rep.OldMaster = dsnAddr(spec.Master)
	j.started(ctx, rep.OldMaster)

	// The old master: does it answer?
	j.begin("probe old master")
	var master *sqlx.DB
	var ms replicas.Server
	{
		c, cancel := context.WithTimeout(ctx, probeWait)
		master, err = opt.Access.open(c, spec.Master)
		if err == nil {
			ms, err = replicas.Probe(c, master)
			if err != nil {
				master.Close()
				master = nil
			}
		}
		cancel()
	}
	if master != nil {
		defer master.Close()
		rep.Answered = true
		say("host %s's master %s answers at %s: it will be fenced", opt.Host, rep.OldMaster, orNone(ms.Binlog.String()))
	} else {
		say("host %s's master %s does not answer (%v)", opt.Host, rep.OldMaster, err)
	}

	// The replicas, and the one to promote.
	j.begin("probe replicas")
	servers := probeReplicas(ctx, opt.Access, spec.ReplicaDSNs(), master != nil)
	defer func() { closeAll(servers) }()
	thaw := func() {}
	if master == nil {
		// The master may be alive on the other side of a partition,
		// still committing with a replica's acknowledgement. Stop every
		// replica's I/O thread first: it then commits nothing more, and
		// what each replica received is final. A replica that does not
		// answer may hold (and go on acknowledging) writes the others
		// lack: refuse.
		j.begin("freeze")
		if err := freeze(ctx, servers); err != nil {
			return rep, model.Errorf(model.EConflict, "refused to fail host %q over: %v", opt.Host, err)
		}
		say("stopped every replica's I/O thread: the old master can commit nothing more")
		thaw = func() { thawAll(context.WithoutCancel(ctx), servers) }
		closeAll(servers)
		servers = probeReplicas(ctx, opt.Access, spec.ReplicaDSNs(), false)
	}
	j.begin("choose")
	cand, err := choose(opt.Host, opt.To, servers, master != nil)
	if err != nil {
		thaw()
		return rep, err
	}
	rep.NewMaster = cand.addr
	say("promoting %s (holds %s)", cand.addr, orNone(cand.has.String()))

	// Hold writes: the host's ranges read-only, the servers confirming.
	j.begin("hold writes")
	held := time.Now()
	fenced, err := rewriteMap(ctx, opt, m, rev, func(next *shardmap.Map) {
		for i := range next.Ranges {
			if next.Ranges[i].Host == opt.Host {
				next.Ranges[i].ReadOnly = true
			}
		}
	}, "hold writes to host "+opt.Host+" while it fails over")
	if err != nil {
		thaw()
		return rep, err
	}
	undo := func(why error) (Report, error) {
		// Give the host back to its master, writable, as it was.
		j.end(time.Now(), why)
		j.begin("give back")
		thaw()
		if master != nil {
			_, _ = master.ExecContext(context.WithoutCancel(ctx), "SET GLOBAL read_only = OFF")
		}
		if _, err := rewriteMap(context.WithoutCancel(ctx), opt, fenced.m, fenced.rev, func(next *shardmap.Map) {
			for i := range next.Ranges {
				if next.Ranges[i].Host == opt.Host {
					next.Ranges[i].ReadOnly = false
				}
			}
		}, "failover of host "+opt.Host+" refused: writes go to its master again"); err != nil {
			j.end(time.Now(), err)
			return rep, fmt.Errorf("%w; and giving the host back to its master failed: %v (its ranges are read-only in the map: edit them back)", why, err)
		}
		j.end(time.Now(), nil)
		return rep, why
	}
	want := cand.has
	if master != nil {
		j.begin("fence old master")
		if _, err := master.ExecContext(ctx, "SET GLOBAL read_only = ON"); err != nil {
			return undo(fmt.Errorf("fencing the old master: %w", err))
		}
		if ms, err = replicas.Probe(ctx, master); err != nil {
			return undo(fmt.Errorf("reading the fenced master's position: %w", err))
		}
		want = ms.Binlog
		say("old master fenced (read_only) at %s", orNone(want.String()))
	}
	j.begin("wait applied")
	got, err := applied(ctx, cand, want, opt.CatchUp)
	if err != nil {
		return undo(model.Errorf(model.EConflict, "refused to promote %s: %v", cand.addr, err))
	}
	rep.Promoted = got.String()
	switch {
	case master != nil:
		rep.Lost, rep.LostNote = 0, "the new master applied the old master's last transaction "+orNone(want.String())
	case len(opt.LastSeen) > 0 && cand.st.SemiSyncSlave:
		// A semi-synchronous master acknowledges a commit only once a
		// replica has it, and the candidate holds all any replica has:
		// what it lacks was never acknowledged.
		rep.Lost = 0
		rep.Unacknowledged = int64(got.Behind(opt.LastSeen))
		rep.LostNote = fmt.Sprintf("semi-synchronous: every acknowledged commit reached a replica; the old master wrote at least %d transactions (counted from its position last seen, %s) that no replica received, none of them acknowledged; pinstore replica add counts them when it comes back",
			rep.Unacknowledged, opt.LastSeen)
	case len(opt.LastSeen) > 0:
		rep.Lost = int64(got.Behind(opt.LastSeen))
		rep.LostNote = "counted from the old master's position last seen, " + opt.LastSeen.String() + ": at least these; transactions it made after are counted when it is re-attached (pinstore replica add)"
	default:
		rep.LostNote = "unknown until the old master answers again: pinstore replica add then counts (and refuses to attach it with) what it holds beyond " + orNone(got.String())
	}
	rep.SemiSync = cand.st.SemiSyncSlave

	// Promote: no replication, writable; then the others follow it, and
	// it waits for their acknowledgements when they give them (not
	// before: with none connected every commit would wait
	// rpl_semi_sync_master_timeout).
	j.begin("promote")
	for _, q := range []string{"STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = OFF"} {
		if _, err := cand.db.ExecContext(ctx, q); err != nil {
			return undo(fmt.Errorf("promoting %s: %s: %w", cand.addr, q, err))
		}
	}
	say("%s is the master, at %s", cand.addr, rep.Promoted)
	j.begin("repoint")
	var others []string
	for _, s := range servers {
		if s == cand {
			continue
		}
		others = append(others, s.dsn)
		if s.db == nil {
			rep.Failed = append(rep.Failed, fmt.Sprintf("%s: %v", s.addr, s.err))
			continue
		}
		if err := repoint(ctx, opt.Access, s.db, cand.dsn, rep.SemiSync); err != nil {
			rep.Failed = append(rep.Failed, fmt.Sprintf("%s: %v", s.addr, err))
			continue
		}
		rep.Repointed = append(rep.Repointed, s.addr)
	}
	if rep.SemiSync && len(rep.Repointed) > 0 {
		if err := semiSyncMaster(ctx, cand.db); err != nil {
			rep.Failed = append(rep.Failed, fmt.Sprintf("%s: semi-synchronous master: %v", cand.addr, err))
		} else {
			rep.NewSemiSync = true
		}
	} else {
		_, _ = cand.db.ExecContext(ctx, "SET GLOBAL rpl_semi_sync_master_enabled = OFF")
	}

	// The map: the new master, its replicas, the old one fenced, writable.
	j.begin("map rewrite")
	final, err := rewriteMap(ctx, opt, fenced.m, fenced.rev, func(next *shardmap.Map) {
		h := next.Hosts[opt.Host].WithReplicas(others)
		h.Master = cand.dsn
		h.Fenced = append(slices.DeleteFunc(slices.Clone(h.Fenced), func(d string) bool { return dsnAddr(d) == cand.addr }), spec.Master)
		next.Hosts[opt.Host] = h
		for i := range next.Ranges {
			if next.Ranges[i].Host == opt.Host {
				next.Ranges[i].ReadOnly = false
			}
		}
	}, fmt.Sprintf("host %s failed over from %s to %s", opt.Host, rep.OldMaster, cand.addr))
	if err != nil {
		return rep, fmt.Errorf("the new master %s is promoted but the map could not name it: %w (write the map by hand: master %s, ranges writable)", cand.addr, err, cand.addr)
	}
	rep.Held, rep.MapVersion = time.Since(held), final.m.Version()
	return rep, nil
}

// freeze stops the replication I/O thread of every replica, or fails
// naming those that do not answer (then it stops none).
func freeze(ctx context.Context, servers []*server) error {
	var silent []string
	for _, s := range servers {
		if s.db == nil {
			silent = append(silent, fmt.Sprintf("%s (%v)", s.addr, s.err))
		}
	}
	if len(silent) > 0 {
		return fmt.Errorf("its master does not answer and neither do replicas %s: they may hold writes the old master acknowledged that the other replicas lack, and may still be acknowledging its commits; "+
			"bring them back, or, if they are gone for good, remove them from the map's replicas and fail over again", strings.Join(silent, ", "))
	}
	for _, s := range servers {
		if _, err := s.db.ExecContext(ctx, "STOP SLAVE IO_THREAD"); err != nil {
			thawAll(context.WithoutCancel(ctx), servers)
			return fmt.Errorf("stopping %s's replication I/O thread: %w", s.addr, err)
		}
	}
	return nil
}

// thawAll starts again the I/O threads freeze stopped.
func thawAll(ctx context.Context, servers []*server) {
	for _, s := range servers {
		if s.db != nil {
			_, _ = s.db.ExecContext(ctx, "START SLAVE IO_THREAD")
		}
	}
}

func closeAll(servers []*server) {
	for _, s := range servers {
		if s.db != nil {
			s.db.Close()
		}
	}
}

// probeReplicas connects to each replica and reads its state, and says
// why each may not be promoted.
func probeReplicas(ctx context.Context, a Access, dsns []string, masterUp bool) []*server {
	out := make([]*server, len(dsns))
	for i, dsn := range dsns {
		s := &server{dsn: dsn, addr: dsnAddr(dsn)}
		out[i] = s
		c, cancel := context.WithTimeout(ctx, probeWait)
		s.db, s.err = a.open(c, dsn)
		if s.err == nil {
			s.st, s.err = replicas.Probe(c, s.db)
		}
		cancel()
		if s.err != nil {
			s.why = "it does not answer"
			continue
		}
		s.has = s.st.Applied
		r := s.st.Replica
		switch {
		case r == nil:
			s.why = "it replicates from nobody (no CHANGE MASTER TO)"
		case r.SQLErrno != 0:
			s.why = fmt.Sprintf("its replication SQL thread failed (error %d: %s)", r.SQLErrno, r.SQLError)
		case r.SQLRunning != "Yes":
			s.why = "its replication SQL thread is stopped: what it received is not applied"
		case masterUp && r.IORunning != "Yes":
			s.why = "its replication I/O thread is not running while the master answers: " + strings.TrimSpace(r.IOError)
		}
		if r != nil {
			s.has = s.has.Merge(r.Received)
		}
		if e := s.st.Errant(); len(e) > 0 {
			s.why = join(s.why, "it holds transactions its master does not have (errant): "+e.String())
		}
		if !s.st.LogBin || !s.st.LogSlaveUpdates {
			s.why = join(s.why, "it keeps no binary log of what it replicates (log_bin, log_slave_updates): its replicas could not follow it")
		}
	}
	return out
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// choose picks the replica to promote: to, or the one that holds the
// most. It refuses one that may not be promoted, or, when the master is
// gone (masterUp false), one that lacks what another holds. While the
// master answers, a candidate a few transactions behind another replica
// loses nothing: its I/O thread is running (probeReplicas), and the
// promotion waits until it has applied all the fenced master had.
func choose(host, to string, servers []*server, masterUp bool) (*server, error) {
	var cand *server
	if to != "" {
		for _, s := range servers {
			if s.addr == to || s.dsn == to || dsnAddr(to) == s.addr {
				cand = s
			}
		}
		if cand == nil {
			return nil, model.Errorf(model.EInvalid, "%s is not a replica of host %q in the map", to, host)
		}
	} else {
		for _, s := range servers {
			if s.why == "" && (cand == nil || !cand.has.Covers(s.has)) {
				cand = s
			}
		}
		if cand == nil {
			var whys []string
			for _, s := range servers {
				whys = append(whys, s.addr+": "+s.why)
			}
			return nil, model.Errorf(model.EConflict, "no replica of host %q can be promoted: %s", host, strings.Join(whys, "; "))
		}
	}
	if cand.why != "" {
		return nil, model.Errorf(model.EConflict, "refused to promote %s: %s", cand.addr, cand.why)
	}
	for _, s := range servers {
		if !masterUp && s != cand && s.err == nil && !cand.has.Covers(s.has) {
			return nil, model.Errorf(model.EConflict, "refused to promote %s: it is behind: it holds %s, but %s holds %s (%d transactions more); promoting it would lose them",
				cand.addr, orNone(cand.has.String()), s.addr, s.has.String(), cand.has.Behind(s.has))
		}
	}
	return cand, nil
}

// applied waits until s has applied want (MASTER_GTID_WAIT) and returns
// its position then; an error says what it has not applied.
func applied(ctx context.Context, s *server, want replicas.Pos, timeout time.Duration) (replicas.Pos, error) {
	if len(want) > 0 {
		c, cancel := context.WithTimeout(ctx, timeout+probeWait)
		var res *int64
		err := s.db.QueryRowxContext(c, "SELECT MASTER_GTID_WAIT(?, ?)", want.String(), timeout.Seconds()).Scan(&res)
		cancel()
		if err != nil {
			return nil, err
		}
		if res == nil || *res != 0 {
			st, _ := replicas.Probe(ctx, s.db)
			return nil, fmt.Errorf("it is behind: after %v it has applied %s of %s (%d transactions short)", timeout, orNone(st.Applied.String()), want, st.Applied.Behind(want))
		}
	}
	st, err := replicas.Probe(ctx, s.db)
	if err != nil {
		return nil, err
	}
	return st.Applied, nil
}

// repoint makes db a replica of master, from what it has applied.
func repoint(ctx context.Context, a Access, db *sqlx.DB, master string, semiSync bool) error {
	if _, err := db.ExecContext(ctx, "STOP SLAVE"); err != nil {
		return err
	}
	if err := pointAt(ctx, a, db, master, "slave_pos", semiSync); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, "START SLAVE")
	return err
}

// mapAt is a map as written, with its revision.
type mapAt struct {
	m   *shardmap.Map
	rev string
}

// rewriteMap applies fn to a copy of m (read at rev), writes it as a
// compare-and-swap, and waits for the servers to route by it.
func rewriteMap(ctx context.Context, opt Options, m *shardmap.Map, rev string, fn func(*shardmap.Map), why string) (mapAt, error) {
	next := *m
	next.Hosts = maps(m.Hosts)
	next.Ranges = slices.Clone(m.Ranges)
	fn(&next)
	if err := next.Validate(); err != nil {
		return mapAt{}, model.Wrap("failover", model.EInvalid, err.Error(), err)
	}
	if next.Version() == m.Version() {
		return mapAt{m, rev}, nil
	}
	note := fmt.Sprintf("Rewritten by pinstore failover (%s) at %s.", why, time.Now().UTC().Format(time.RFC3339))
	newRev, err := opt.Home.WriteMap(ctx, &next, rev, note)
	if err != nil {
		return mapAt{}, err
	}
	switch {
	case opt.Confirm != nil:
		if err := opt.Confirm(ctx, next.Version()); err != nil && opt.Progress != nil {
			fmt.Fprintf(opt.Progress, "failover: not every server confirmed map %s (%v); going on\n", next.Version(), err)
		}
	case opt.Settle > 0:
		select {
		case <-ctx.Done():
			return mapAt{}, ctx.Err()
		case <-time.After(opt.Settle):
		}
	}
	return mapAt{&next, newRev}, nil
}
