package replicas

import (
	"context"
	"database/sql"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/internal/metrics"
	"github.com/pinstore/pinstore/store/topology"
)

// Defaults of a Tracker.
const (
	// DefaultLagBound is how far behind its master a replica may be and
	// still serve a read that carries no token (Instagram's 100 ms).
	DefaultLagBound = 100 * time.Millisecond
	// DefaultWait bounds how long a read with a token waits for a
	// replica to apply it (MASTER_GTID_WAIT) before it goes to the master.
	DefaultWait = 50 * time.Millisecond
	// DefaultPoll is how often each master's position and each replica's
	// are read: the resolution of the lag measure.
	DefaultPoll = 20 * time.Millisecond
	// defaultStatusEvery is how often SHOW SLAVE STATUS is read.
	defaultStatusEvery = time.Second
	// history is how long master samples are kept: a replica further
	// behind than this is "behind by more than history".
	history = 10 * time.Second
	// probeTimeout bounds one poll's statements on one server.
	probeTimeout = time.Second
)

// Config tunes a Tracker. The zero value is usable.
type Config struct {
	LagBound   time.Duration // default DefaultLagBound
	Wait       time.Duration // default DefaultWait; negative: never wait, a replica must have applied the token already
	Poll       time.Duration // default DefaultPoll
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Tracker measures how far each replica of the map in force is behind
// its master and picks the pool each read uses (Pick).
//
// The lag measure needs no writes and no clock agreement between servers:
// every Poll it reads the master's @@gtid_binlog_pos (a sample, taken at
// the time the statement was sent) and then each replica's
// @@gtid_slave_pos. A replica whose position covers a sample taken at t
// had, when read, every transaction the master had committed before t;
// so at any later time now it lacks nothing committed before now − t. Its
// lag is now − t for the newest sample it covers: an upper bound that
// grows between polls and is never optimistic. A replica that stopped
// replicating while no write happened still covers every sample, and
// rightly serves: it lacks nothing.
type Tracker struct {
	router *topology.Router
	cfg    Config

	mu    sync.Mutex
	hosts map[*sqlx.DB]*hostState // by master pool

	toReplica, toMaster prometheus.Counter
	waitedOK, waitedOut prometheus.Counter
}

// hostState is what the Tracker knows of one master and its replicas.
type hostState struct {
	name string
	busy atomic.Bool // a poll of this host is running

	mu        sync.Mutex
	samples   []sample // the master's positions, oldest first, within history
	last      sample   // the newest, kept even when history trims it
	downSince time.Time
	downErr   string
	replicas  map[*sqlx.DB]*replicaState
	statusAt  time.Time
	next      atomic.Uint32 // round robin among replicas
}

type sample struct {
	at  time.Time
	pos Pos
}

type replicaState struct {
	applied Pos
	covered time.Time // when the newest sample it covers was taken; zero: none
	err     string
	status  *Server // the last SHOW SLAVE STATUS and variables; nil before the first
}

// NewTracker returns a tracker of router's hosts; Run polls them.
func NewTracker(router *topology.Router, cfg Config) *Tracker {
	if cfg.LagBound <= 0 {
		cfg.LagBound = DefaultLagBound
	}
	if cfg.Wait == 0 {
		cfg.Wait = DefaultWait
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	reads := metrics.Register(cfg.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pinstore_replica_reads_total",
		Help: "Reads of hosts whose replicas serve reads, by where they went: a replica, or the master (no replica within the lag bound, or none had applied the request's token in time).",
	}, []string{"to"}))
	waits := metrics.Register(cfg.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pinstore_replica_token_waits_total",
		Help: "Reads with a consistency token that waited for a replica to apply it (MASTER_GTID_WAIT), by outcome.",
	}, []string{"outcome"}))
	t := &Tracker{router: router, cfg: cfg, hosts: map[*sqlx.DB]*hostState{},
		toReplica: reads.WithLabelValues("replica"), toMaster: reads.WithLabelValues("master"),
		waitedOK: waits.WithLabelValues("applied"), waitedOut: waits.WithLabelValues("timed_out")}
	metrics.Register(cfg.Registerer, newLagCollector(t))
	return t
}

// LagBound is the bound of a read without a token.
func (t *Tracker) LagBound() time.Duration { return t.cfg.LagBound }

// Run polls every host with replicas until ctx is done.
func (t *Tracker) Run(ctx context.Context) {
	tk := time.NewTicker(t.cfg.Poll)
	defer tk.Stop()
	for {
		t.tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// tick starts a poll of every host with replicas that is not still being
// polled, and forgets hosts that left the map.
func (t *Tracker) tick(ctx context.Context) {
	hosts := t.router.Current().Hosts()
	keep := make(map[*sqlx.DB]bool, len(hosts))
	for _, h := range hosts {
		if len(h.Replicas) == 0 {
			continue
		}
		keep[h.DB] = true
		hs := t.state(h, true)
		if hs.busy.CompareAndSwap(false, true) {
			go func() {
				defer hs.busy.Store(false)
				t.poll(ctx, h, hs)
			}()
		}
	}
	t.mu.Lock()
	for db := range t.hosts {
		if !keep[db] {
			delete(t.hosts, db)
		}
	}
	t.mu.Unlock()
}

// state returns h's state, creating it when create is set (nil otherwise).
func (t *Tracker) state(h *topology.Host, create bool) *hostState {
	t.mu.Lock()
	defer t.mu.Unlock()
	hs := t.hosts[h.DB]
	if hs == nil && create {
		hs = &hostState{name: h.Name, replicas: map[*sqlx.DB]*replicaState{}}
		t.hosts[h.DB] = hs
	}
	return hs
}

// poll samples h's master, then reads each replica's position (and, every
// defaultStatusEvery, its replication status).
func (t *Tracker) poll(ctx context.Context, h *topology.Host, hs *hostState) {
	at := time.Now()
	c, cancel := context.WithTimeout(ctx, probeTimeout)
	var raw string
	err := h.DB.QueryRowxContext(c, "SELECT @@gtid_binlog_pos").Scan(&raw)
	cancel()
	var pos Pos
	if err == nil {
		pos, err = ParsePos(raw)
	}
	hs.mu.Lock()
	if err != nil {
		if hs.downSince.IsZero() {
			hs.downSince = at
		}
		hs.downErr = err.Error()
	} else {
		hs.downSince, hs.downErr = time.Time{}, ""
		hs.last = sample{at, pos}
		hs.samples = append(hs.samples, hs.last)
		cut := 0
		for cut < len(hs.samples)-1 && at.Sub(hs.samples[cut].at) > history {
			cut++
		}
		hs.samples = hs.samples[cut:]
	}
	status := time.Since(hs.statusAt) >= defaultStatusEvery
	if status {
		hs.statusAt = time.Now()
	}
	hs.mu.Unlock()

	var wg sync.WaitGroup
	for _, r := range h.Replicas {
		wg.Go(func() { t.pollReplica(ctx, hs, r, status) })
	}
	wg.Wait()
}

func (t *Tracker) pollReplica(ctx context.Context, hs *hostState, r *topology.Replica, status bool) {
	c, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var raw string
	err := r.DB.QueryRowxContext(c, "SELECT @@gtid_slave_pos").Scan(&raw)
	var applied Pos
	if err == nil {
		applied, err = ParsePos(raw)
	}
	var srv *Server
	if err == nil && status {
		s, perr := Probe(c, r.DB)
		if perr == nil {
			srv = &s
		}
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	rs := hs.replicas[r.DB]
	if rs == nil {
		rs = &replicaState{}
		hs.replicas[r.DB] = rs
	}
	if err != nil {
		rs.err = err.Error()
		return
	}
	rs.err, rs.applied = "", applied
	if srv != nil {
		rs.status = srv
	}
	// The newest sample it covers (positions only grow, so the covered
	// samples are a prefix).
	i := sort.Search(len(hs.samples), func(i int) bool { return !applied.Covers(hs.samples[i].pos) })
	if i > 0 && hs.samples[i-1].at.After(rs.covered) {
		rs.covered = hs.samples[i-1].at
	}
}

// Reader is the pool a read uses, with its queues (reads by id, edge
// checks): a host's master or one of its replicas.
type Reader struct {
	topology.Pool
	Replica string // the replica's address; "" for the master
}

// Master is h's master as a Reader.
func Master(h *topology.Host) Reader { return Reader{Pool: h.Pool} }

// Pick returns where a read of h for ctx goes. The master, unless h's
// replicas serve reads and one of them is within the lag bound; with a
// token for h (WithRequest), the replica must also have applied the
// token's position, or apply it within Config.Wait (MASTER_GTID_WAIT),
// else the read goes to the master. Only a read request's reads may go to
// a replica (WithRequest); under OnMaster, and outside a request, always
// the master. Replicas take turns.
func (t *Tracker) Pick(ctx context.Context, h *topology.Host) Reader {
	if t == nil || !h.ReplicaReads || !readsReplicas(ctx) {
		return Master(h)
	}
	hs := t.state(h, false)
	if hs == nil {
		t.toMaster.Inc()
		return Master(h)
	}
	want, hasToken := sentFor(ctx, h.Name)
	now := time.Now()
	n := len(h.Replicas)
	first := int(hs.next.Add(1))
	var waitOn *topology.Replica
	hs.mu.Lock()
	for i := range n {
		r := h.Replicas[(first+i)%n]
		rs := hs.replicas[r.DB]
		if rs == nil || rs.covered.IsZero() || now.Sub(rs.covered) > t.cfg.LagBound {
			continue
		}
		if hasToken && !rs.applied.Covers(want) {
			if waitOn == nil {
				waitOn = r
			}
			continue
		}
		hs.mu.Unlock()
		t.toReplica.Inc()
		return Reader{Pool: r.Pool, Replica: r.Addr}
	}
	hs.mu.Unlock()
	if waitOn != nil && t.cfg.Wait > 0 && t.waitFor(ctx, waitOn, want) {
		t.toReplica.Inc()
		return Reader{Pool: waitOn.Pool, Replica: waitOn.Addr}
	}
	t.toMaster.Inc()
	return Master(h)
}

// waitFor waits up to Config.Wait for r to apply want.
func (t *Tracker) waitFor(ctx context.Context, r *topology.Replica, want Pos) bool {
	c, cancel := context.WithTimeout(ctx, t.cfg.Wait+probeTimeout)
	defer cancel()
	var res sql.NullInt64
	err := r.DB.QueryRowxContext(c, "SELECT MASTER_GTID_WAIT(?, ?)", want.String(), t.cfg.Wait.Seconds()).Scan(&res)
	if err == nil && res.Valid && res.Int64 == 0 {
		t.waitedOK.Inc()
		return true
	}
	t.waitedOut.Inc()
	return false
}

// MasterDown reports whether h's master failed the tracker's last poll,
// and since when it has failed every poll. Only hosts with replicas are
// polled; others are never down here.
func (t *Tracker) MasterDown(h *topology.Host) (since time.Time, why string, down bool) {
	hs := t.state(h, false)
	if hs == nil {
		return time.Time{}, "", false
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.downSince, hs.downErr, !hs.downSince.IsZero()
}

// MasterSeen is the last position the tracker read from h's master, and
// when (zero when none).
func (t *Tracker) MasterSeen(h *topology.Host) (Pos, time.Time) {
	hs := t.state(h, false)
	if hs == nil {
		return nil, time.Time{}
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	return hs.last.pos, hs.last.at
}

// Lag is the tracker's measure of replica r of h: how long ago the newest
// master sample r covers was taken (see Tracker). ok is false when there
// is none (not polled yet, or behind by more than the history kept).
func (t *Tracker) Lag(h *topology.Host, r *topology.Replica) (lag time.Duration, ok bool) {
	hs := t.state(h, false)
	if hs == nil {
		return 0, false
	}
	hs.mu.Lock()
	defer hs.mu.Unlock()
	rs := hs.replicas[r.DB]
	if rs == nil || rs.covered.IsZero() {
		return 0, false
	}
	return time.Since(rs.covered), true
}

// ReadsToReplicas counts the reads Pick sent to a replica.
func (t *Tracker) ReadsToReplicas() prometheus.Counter { return t.toReplica }
