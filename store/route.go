package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/tracing"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/ownercache"
	"github.com/pinstore/pinstore/store/pointread"
	"github.com/pinstore/pinstore/store/replicas"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// shards runs the store's statements on the shards: it routes an id,
// bounds a call, pins a route through a shard's move, runs transactions
// whose changes leave the object cache before they return (route.go), and
// picks the pool each read uses (replicas.go). core embeds it.
type shards struct {
	cfg        Config
	router     *topology.Router
	objects    *objectCache      // off when Redis or the object cache is disabled
	ownerCache *ownercache.Cache // learns the pins a transaction created (cache.go); nil when Redis is disabled
	replicas   *replicas.Tracker // replica lag and the pool each read uses (replicas.go)
}

// route checks id (model.CheckID) and returns its shard's route in the
// topology in force and its local id: a malformed id, an unknown type or a
// shard outside the map is EInvalid; an id of a known type other than want
// is ENotFound (the caller asked for a pin and there is no such pin).
func (s *shards) route(op string, id uint64, want idcodec.Type) (topology.Shard, uint64, error) {
	sh, local, err := s.router.Current().Route(id, want)
	if err != nil {
		return sh, 0, shardsql.Classify(op, "", err)
	}
	return sh, local, nil
}

// classify is shardsql.Classify for a statement sent to sh's host.
func classify(op string, sh topology.Shard, err error) error {
	name := ""
	if sh.Host != nil {
		name = sh.Host.Name
	}
	return shardsql.Classify(op, name, err)
}

func notFound(op string, typ idcodec.Type) error {
	return model.Wrap(op, model.ENotFound, typ.String()+" not found", nil)
}

// deadline bounds ctx by the query timeout unless the caller set a deadline.
func (s *shards) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.cfg.QueryTimeout)
}

// ended is err, naming ctx's end when ctx has ended: a statement its end
// interrupted (shardsql.Tx.Bound) fails as its connection does, which
// would otherwise read as the host being down.
func ended(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w", cerr, err)
	}
	return err
}

// inTx runs fn in a transaction on the shard's host and commits; any error
// rolls back and is classified. The write is pinned to the topology in
// force (topology.Router.EnterShard), on the host that topology names
// for sh's shard: while a move switches the shard it waits for the new
// map (the write buffer) and then runs on the new host, or fails with
// EMoving after the buffer window. fn must use sh for its database name
// only. The objects fn's statements changed lose their cached copies,
// and the owner cache learns the pins it created, before inTx returns
// (cache.go). A write that committed while the server's topology lease
// lapsed returns EUnavailable: it is in doubt (topology/lease.go).
func (s *shards) inTx(ctx context.Context, op string, sh topology.Shard, fn func(tx *shardsql.Tx) error) error {
	var hold *failoverHold
	defer func() { hold.end() }()
	for {
		sh, release, err := s.enterShard(ctx, op, sh.N)
		if err != nil {
			return err
		}
		err = s.txOn(ctx, op, sh, fn)
		release()
		if !unsent(err) || len(sh.Host.Replicas) == 0 {
			return err // no failover can come to a host without replicas
		}
		// The host failed the write before any of it could commit (its
		// master down, or fenced by a failover): wait in the write buffer
		// for the map that names its new master, and write there.
		if hold == nil {
			hold = s.holdForFailover(ctx)
		}
		if !hold.wait(ctx) {
			return err
		}
	}
}

// failoverHold is a write waiting in the write buffer for a failover
// (inTx): it retries as each new map comes, or every failoverRetry (the
// master may answer again), until the buffer window ends.
type failoverHold struct {
	r        *topology.Router
	deadline time.Time
	release  func()
	ok       bool
}

// failoverRetry is how often a write held for a failover tries its host
// again when no new map comes.
const failoverRetry = 200 * time.Millisecond

func (s *shards) holdForFailover(ctx context.Context) *failoverHold {
	window := s.cfg.FailoverHold
	if s.bufferWindow(ctx) <= 0 {
		window = 0 // background work: retried by its sweep
	}
	h := &failoverHold{r: s.router, deadline: time.Now().Add(window)}
	h.release, h.ok = s.router.Buffer().Hold(s.cfg.WriteBufferMax)
	return h
}

func (h *failoverHold) wait(ctx context.Context) bool {
	if !h.ok {
		return false
	}
	if !time.Now().Before(h.deadline) {
		h.r.Buffer().Expired.Add(1)
		return false
	}
	h.r.AwaitChange(ctx, min(failoverRetry, time.Until(h.deadline)))
	return ctx.Err() == nil
}

func (h *failoverHold) end() {
	if h != nil {
		h.release()
	}
}

// txOn is inTx on a route the caller pinned (enterShard, enterShards) and
// keeps pinned until txOn returns: it never waits in the write buffer.
func (s *shards) txOn(ctx context.Context, op string, sh topology.Shard, fn func(tx *shardsql.Tx) error) error {
	since := time.Now()
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	// Asked before the transaction takes its connection, so that a first
	// write to a shard never waits for a second connection holding one.
	perWrite := s.objects.on() && s.objects.perWrite(ctx, sh)
	c, err := replicas.Begin(ctx, sh.Host) // replica hook: the commit's GTID goes into the request's token
	if err != nil {
		return classify(op, sh, fmt.Errorf("%w: %w", errUnsent, err))
	}
	defer c.Close()
	t, err := shardsql.Begin(c.Conn(), sql.LevelDefault) // sent with the first statement
	if err != nil {
		return classify(op, sh, err)
	}
	defer t.Rollback() // before c.Close: the connection goes back with no transaction open
	if tracing.On() {
		t.Trace(sh.N, sh.Host.Name, "master")
	}
	// ctx's deadline holds every statement fn sends, whatever its context.
	t.Bound(ctx)
	var token uint64
	if s.objects.on() {
		// Durable with the change: the cache_outbox rows of the objects
		// it changes go with the statements that change them, and the
		// invalidation is resent until Redis takes it, whatever happens
		// to this process (cache.go).
		token = newToken()
		t.MarkCached(sh.DB, token, perWrite)
	}
	if err := fn(t); err != nil {
		return classify(op, sh, ended(ctx, err))
	}
	if err := c.Commit(ctx, t); err != nil { // with the statements queued, and the GTID when the token wants it
		return classify(op, sh, ended(ctx, err))
	}
	model.WritesOf(ctx).Commit()
	s.committed(ctx, sh.DB, t, token) // before the write is acknowledged
	// Not acknowledged if the server lost the topology meanwhile: a move
	// or failover may have left the host it committed on.
	return s.router.Acknowledge(op, since)
}

// errUnsent marks a write that failed before any of it reached its host
// (no connection): it cannot have committed.
var errUnsent = errors.New("no connection")

// unsent reports whether err failed a write that cannot have committed
// for a reason a failover ends: no connection to the host's master (none
// could be taken, or dialling it failed), or
// the master refusing writes as read-only (a fenced former master, error
// 1290: no statement of the transaction ran, and its commit cannot).
func unsent(err error) bool {
	if err == nil || !model.IsCode(err, model.EUnavailable) {
		return false
	}
	var dial *net.OpError
	if errors.Is(err, errUnsent) || errors.As(err, &dial) && dial.Op == "dial" {
		return true
	}
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1290
}

// HostFailure reports whether err is a failure of a shard's master that a
// failover can end (failed: no connection, a connection lost, or the
// master fenced read-only), which host's (as the map names it), and
// whether nothing of the failed write can have committed (unsent): the
// API holds such requests in the write buffer and runs them again on the
// new map, when that is safe.
func HostFailure(err error) (host string, failed, nothingSent bool) {
	var hd *shardsql.HostDown
	if err == nil || !model.IsCode(err, model.EUnavailable) || !errors.As(err, &hd) {
		return "", false, false
	}
	return hd.Host, true, unsent(err)
}

// enterShard pins the write route of shard n (topology.Router.EnterShard)
// with the store's write buffer; background work (noBuffer) does not wait.
func (s *shards) enterShard(ctx context.Context, op string, n int) (topology.Shard, func(), error) {
	sh, release, err := s.router.EnterShard(ctx, op, n, s.bufferWindow(ctx), s.cfg.WriteBufferMax)
	if err != nil {
		return sh, nil, shardsql.Classify(op, "", err)
	}
	return sh, release, nil
}

// enterShards is enterShard for a write to shards a and b, one transaction
// nested in the other (topology.Router.EnterShards): both routes are pinned
// in one topology before either transaction opens, so neither waits in the
// write buffer holding the other's locks.
func (s *shards) enterShards(ctx context.Context, op string, a, b int) (topology.Shard, topology.Shard, func(), error) {
	sa, sb, release, err := s.router.EnterShards(ctx, op, a, b, s.bufferWindow(ctx), s.cfg.WriteBufferMax)
	if err != nil {
		return sa, sb, nil, shardsql.Classify(op, "", err)
	}
	return sa, sb, release, nil
}

// bufferWindow is how long a write of ctx waits in the write buffer.
func (s *shards) bufferWindow(ctx context.Context) time.Duration {
	if ctx.Value(noBufferKey{}) != nil {
		return 0
	}
	return s.cfg.WriteBuffer
}

// noBufferKey marks the context of background work: its writes to a shard
// being moved fail at once (to be retried by the next sweep) rather than
// wait in the write buffer.
type noBufferKey struct{}

func withoutBuffer(ctx context.Context) context.Context {
	return context.WithValue(ctx, noBufferKey{}, true)
}

// inRetryTx is inTx, run again when InnoDB picks it as a deadlock victim
// (shardsql.RetryDeadlock): for idempotent transactions, such as one side
// of a pair or a feed write, which meet the fan-out's shared locks on
// follow rows and each other's count rows.
func (s *shards) inRetryTx(ctx context.Context, op string, sh topology.Shard, fn func(tx *shardsql.Tx) error) error {
	return shardsql.RetryDeadlock(func() error { return s.inTx(ctx, op, sh, fn) })
}

// retryTxOn is inRetryTx on a route the caller pinned (txOn).
func (s *shards) retryTxOn(ctx context.Context, op string, sh topology.Shard, fn func(tx *shardsql.Tx) error) error {
	return shardsql.RetryDeadlock(func() error { return s.txOn(ctx, op, sh, fn) })
}

// readLive reads a live object inside a transaction, with lock, and
// decodes its document. ENotFound when it is missing or deleted.
func readLive(ctx context.Context, q sqlx.QueryerContext, op string, sh topology.Shard, typ idcodec.Type, local uint64, lock shardsql.Lock) (shardsql.Row, model.Doc, error) {
	r, err := shardsql.ReadObject(ctx, q, sh.DB, typ, local, lock)
	d, err := liveDoc(op, typ, r, err)
	return r, d, err
}

// liveDoc turns the read of one object row into its decoded, live
// document: ENotFound when the row is missing or deleted.
func liveDoc(op string, typ idcodec.Type, r shardsql.Row, err error) (model.Doc, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound(op, typ)
	}
	if err != nil {
		return nil, err
	}
	d, err := model.DecodeDoc(typ, r.Doc)
	if err != nil {
		return nil, model.Wrap(op, model.EInternal, "", err)
	}
	if !d.IsActive() {
		return nil, notFound(op, typ)
	}
	return d, nil
}

// readPoint reads one live object by id through its host's read queue
// (pointread), with the length of its list count when count is set: the
// one way a request reads an object outside a transaction. A missing or
// deleted object is ENotFound; a driver error is classified.
func (s *shards) readPoint(ctx context.Context, op string, sh topology.Shard, typ idcodec.Type, local uint64, count model.Mapping) (*pointread.Read, error) {
	r := &pointread.Read{DB: sh.DB, Type: typ, Local: local, Count: count}
	rd := s.reader(ctx, sh) // replica hook
	var span trace.Span
	if tracing.On() {
		ctx, span = readSpan(ctx, sh, rd)
	}
	err := rd.Reads.Do(ctx, r)
	if span != nil {
		if err == nil {
			span.SetAttributes(attribute.Int("db.response.returned_rows", 1))
		} else if !errors.Is(err, sql.ErrNoRows) {
			tracing.Fail(span, err)
		}
		span.End()
	}
	if errors.Is(err, sql.ErrNoRows) || err == nil && !r.Row.Flags.Active() {
		return nil, notFound(op, typ)
	}
	if err != nil {
		return nil, classify(op, sh, err)
	}
	return r, nil
}

// readSpan starts the span of a point read of sh through rd (its master
// or a replica): a round trip of the host's read queue (pointread), which
// may carry other requests' reads of the same host with it.
func readSpan(ctx context.Context, sh topology.Shard, rd replicas.Reader) (context.Context, trace.Span) {
	host, role := sh.Host.Name, "master"
	if rd.Replica != "" {
		host, role = rd.Replica, "replica"
	}
	return tracing.Child(ctx, "shard.roundtrip", trace.SpanKindClient,
		attribute.Int("pinstore.shard", sh.N),
		attribute.String("pinstore.host", host),
		attribute.String("pinstore.shard.role", role),
		attribute.String("db.system.name", "mariadb"),
		attribute.String("db.operation.name", "SELECT"),
	)
}
