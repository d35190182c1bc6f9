package shardsql

import (
	"context"
	"database/sql/driver"
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/internal/metrics"
)

// Round trips are measured per pool, by the connections Connector opens
// with a Meter, below database/sql: every text a connection sends (a
// Tx's queued statements go with its next one as one text, so one round
// trip) is timed from its sending to the first of its answer (for a
// read, its columns: reading its rows is the caller's time), whoever sent
// it, a request's read or write or background work, so that nothing that
// loads a host goes unseen. A dial that fails is a failed round trip too:
// with its host down, that is all a pool's statements get to do.
//
// A Meter records under the host and role that its pool serves in the map
// in force (RoundTrips.Name): pools are shared across versions of the
// map, so a promoted replica's pool records as its host's master from the
// map that names it so, and a pool the map no longer names (a former
// master) records nothing (Meter.Forget). The series are resolved when a map is put in
// force, not per statement: a round trip costs two clock reads, an
// atomic load and the histogram's own atomic adds, and allocates nothing.

// Roles of a pool (RoundTrips.Name).
const (
	RoleMaster  = "master"
	RoleReplica = "replica"
)

// RoundTrips is the round-trip metrics of the pools of one server, by host
// and role: pinstore_shard_query_seconds and
// pinstore_shard_query_errors_total.
type RoundTrips struct {
	seconds *prometheus.HistogramVec
	errors  *prometheus.CounterVec
}

// QueryBuckets are the bounds of pinstore_shard_query_seconds.
var QueryBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// NewRoundTrips makes the round-trip metrics, registered on reg (nil:
// nowhere; a second server on one registry shares the first's).
func NewRoundTrips(reg prometheus.Registerer) *RoundTrips {
	return &RoundTrips{
		seconds: metrics.Register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pinstore_shard_query_seconds",
			Help:    "Round trips to a MySQL host (its master or a replica): from sending a statement text to the first of its answer; failed dials included.",
			Buckets: QueryBuckets,
		}, []string{"host", "role"})),
		errors: metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pinstore_shard_query_errors_total",
			Help: "Round trips to a MySQL host that failed: the connection (dial, lost, timed out) or the statement (an error from the server other than a duplicate key); a cancelled caller is not counted.",
		}, []string{"host", "role"})),
	}
}

// Meter is where the connections of one pool record their round trips:
// under the host and role it was last named (RoundTrips.Name); nowhere
// before. A nil *Meter records nothing.
type Meter struct {
	cur atomic.Pointer[meterSeries]
}

// meterSeries is a Meter's series: one host and role.
type meterSeries struct {
	host, role string
	seconds    prometheus.Observer
	errors     prometheus.Counter
}

// Name makes m record as host's role (RoleMaster or RoleReplica) from now
// on; its series exist from then, with zero counts. Nil rt or m: nothing.
func (rt *RoundTrips) Name(m *Meter, host, role string) {
	if rt == nil || m == nil {
		return
	}
	if cur := m.cur.Load(); cur != nil && cur.host == host && cur.role == role {
		return
	}
	m.cur.Store(&meterSeries{host: host, role: role,
		seconds: rt.seconds.WithLabelValues(host, role), errors: rt.errors.WithLabelValues(host, role)})
}

// Forget makes m record nothing from now on: its pool serves no host of
// the map in force (a former master after a failover, a host removed).
func (m *Meter) Forget() {
	if m != nil {
		m.cur.Store(nil)
	}
}

// done records a round trip that began at start and ended with err.
func (m *Meter) done(start time.Time, err error) {
	if m == nil || err == driver.ErrSkip { // ErrSkip: nothing was sent
		return
	}
	s := m.cur.Load()
	if s == nil {
		return
	}
	s.seconds.Observe(time.Since(start).Seconds())
	if err != nil && !errors.Is(err, context.Canceled) && !IsDuplicate(err) {
		s.errors.Inc()
	}
}

// meteredConn is a connection of Connector's that records its round trips
// on its pool's Meter. It offers what the driver's connection offers to
// database/sql, so database/sql uses it as it would the driver's.
type meteredConn struct {
	driver.Conn
	m *Meter
}

// The driver's connection offers these; Connector wraps a connection only
// when it does (meter).
type fullConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
	driver.NamedValueChecker
}

var _ fullConn = (*meteredConn)(nil)

// meter wraps c to record on m, when m is not nil and c offers what
// meteredConn passes on.
func meter(c driver.Conn, m *Meter) driver.Conn {
	if _, ok := c.(fullConn); !ok || m == nil {
		return c
	}
	return &meteredConn{Conn: c, m: m}
}

func (c *meteredConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	start := time.Now()
	res, err := c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	c.m.done(start, err)
	return res, err
}

func (c *meteredConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	start := time.Now()
	rows, err := c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
	c.m.done(start, err)
	return rows, err
}

func (c *meteredConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	start := time.Now()
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	c.m.done(start, err)
	return tx, err
}

func (c *meteredConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (c *meteredConn) Ping(ctx context.Context) error { return c.Conn.(driver.Pinger).Ping(ctx) }

func (c *meteredConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *meteredConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }

func (c *meteredConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}
