// Package objcache caches objects (a user, board, pin or comment: its
// document, version, timestamps and counts) in Redis in front of the
// shards, so that a read by id costs a Redis round trip instead of a
// MySQL statement, and never serves a version older than one a write has
// acknowledged.
//
// # Protocol: leases
//
// An entry is either an object (written only by Fill) or a lease: a
// marker a reader that missed sets before it reads MySQL, as in Facebook's
// memcache (Nishtala et al., NSDI 2013):
//
//   - Get reads the entries (one pipeline per Redis node). A miss takes a
//     lease on the key (SET NX with a short expiry) and reads it back: the
//     caller holds the lease when the marker it reads is its own.
//   - The caller reads the object from MySQL, then Fill writes it only if
//     its lease is still there (a Lua compare-and-set); otherwise the fill
//     is refused and counted.
//   - A write invalidates after its transaction commits and before it is
//     acknowledged: Invalidate deletes the entry, and with it any lease.
//
// So a reader that read MySQL before a write committed cannot fill: its
// lease went with the write's invalidation. A reader whose lease was taken
// after the invalidation read MySQL after the commit. Hence no reader gets
// an older version than the last acknowledged write while Redis takes
// every invalidation. When it does not (down, paused, timed out), the
// caller keeps the invalidation durable and retries it (package store);
// Guard keeps this process's reads of such objects off the cache
// meanwhile. Entries expire after Options.TTL, which bounds memory along
// with Redis's maxmemory and LRU policy.
//
// An object's entry has a sibling: the cached state of its lists' rows
// (does this user like this pin), invalidated with it (edges.go).
package objcache

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/metrics"
	"github.com/pinstore/pinstore/internal/tracing"
	"github.com/pinstore/pinstore/model"
)

// Defaults for Options.
const (
	DefaultPrefix   = "pinstore:c:"
	DefaultTTL      = 10 * time.Minute
	DefaultLeaseTTL = 2 * time.Second
	DefaultTimeout  = 200 * time.Millisecond
	DefaultHashSize = 64 << 10
)

// Options configure a Cache. The zero value is usable.
type Options struct {
	Prefix     string        // starts every key; default DefaultPrefix
	TTL        time.Duration // how long an entry lives; default DefaultTTL
	LeaseTTL   time.Duration // how long a reader's lease lives; default DefaultLeaseTTL
	Timeout    time.Duration // bounds each round trip; default DefaultTimeout
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// EdgeOwners reports whether an object may have an edge hash (edges.go)
	// that its invalidation must drop too; nil: every object may.
	EdgeOwners func(id uint64) bool
	// HashSize bounds the bytes that fills write into one object's hash
	// of edges and pages (edges.go; lists' first pages may take a quarter
	// more); default DefaultHashSize.
	HashSize int
	// Near is how many entries this server keeps in its near copy
	// (near.go); 0: none. It needs one Redis: on a Redis Cluster it is off.
	Near int
	// NearFresh is how long a member serves from its near copy after
	// sending a beat it received back; default DefaultNearFresh. A write
	// waits up to about this long for a member that stopped.
	NearFresh time.Duration
}

// Cache is the object cache. It is safe for concurrent use.
type Cache struct {
	client              redis.UniversalClient
	prefix              string
	ttl, leaseTTL, wait time.Duration
	hashSize            int
	log                 *slog.Logger

	hits, misses, refused, errs, full prometheus.Counter
	stats                             Stats
	reads                             *reader
	edges                             edgeCounters // edges.go
	pages                             pageCounters // pages.go
	edgeOwners                        func(id uint64) bool
	near                              *near // nil: no near copy
}

// Stats are a Cache's counters, for tests and reports (the same figures
// go to Prometheus).
type Stats struct {
	Hits, Misses, Refused atomic.Int64
	NearHits              atomic.Int64 // of Hits: answered by the near copy
	Full                  atomic.Int64 // fills left out of a hash at its size (edges and pages)
}

// Stats returns the cache's counters.
func (c *Cache) Stats() *Stats { return &c.stats }

// New returns a Cache on client. It does not contact Redis, except that
// with Options.Near its near copy subscribes and renews its membership in
// the background until Close.
func New(client redis.UniversalClient, opts Options) *Cache {
	c := &Cache{client: client, prefix: opts.Prefix, ttl: opts.TTL, leaseTTL: opts.LeaseTTL, wait: opts.Timeout, hashSize: opts.HashSize,
		log: opts.Logger, edgeOwners: opts.EdgeOwners}
	if c.prefix == "" {
		c.prefix = DefaultPrefix
	}
	if c.ttl <= 0 {
		c.ttl = DefaultTTL
	}
	if c.leaseTTL <= 0 {
		c.leaseTTL = DefaultLeaseTTL
	}
	if c.wait <= 0 {
		c.wait = DefaultTimeout
	}
	if c.hashSize <= 0 {
		c.hashSize = DefaultHashSize
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.reads = newReader(client)
	counter := func(name, help string) prometheus.Counter {
		return metrics.Register(opts.Registerer, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
	}
	c.hits = counter("pinstore_object_cache_hits_total", "Objects read from the object cache (Redis, or this server's near copy).")
	c.misses = counter("pinstore_object_cache_misses_total", "Objects not in the object cache (read from MySQL).")
	c.refused = counter("pinstore_object_cache_fills_refused_total", "Fills refused because a write invalidated the entry after the reader missed: the reader's copy may have been stale.")
	c.errs = counter("pinstore_object_cache_errors_total", "Object cache round trips that failed or timed out.")
	c.full = counter("pinstore_object_cache_hash_full_total", "Edge and page fills left out because the owner's hash already holds its limit of fills (Options.HashSize; half of it for pages after a cursor, a quarter more for first pages).")
	c.edges = newEdgeCounters(c, counter)
	c.pages = pageCounters{
		hits:    counter("pinstore_page_cache_hits_total", "Pages of lists (first pages, and pages after a cursor) read from the Redis cache."),
		misses:  counter("pinstore_page_cache_misses_total", "Pages of lists not in the cache (read from MySQL)."),
		refused: counter("pinstore_page_cache_fills_refused_total", "Page fills refused because a write invalidated the list's owner after the reader took the generation."),
	}
	if _, cluster := client.(*redis.ClusterClient); opts.Near > 0 && !cluster {
		c.near = newNear(c, opts.Near, opts.NearFresh)
		c.near.hits = counter("pinstore_object_cache_near_hits_total", "Objects read from this server's near copy of the object cache (counted in pinstore_object_cache_hits_total too).")
		c.near.lapsed = counter("pinstore_object_cache_near_lapsed_total", "Invalidations that stopped waiting for a member's acknowledgement, or waited for a membership Redis had just begun, instead of hearing from every member.")
		c.near.run()
	}
	return c
}

// Close stops the near copy's loops and leaves its membership; a Cache
// without one has nothing to close. It does not close the client.
func (c *Cache) Close() {
	if c.near != nil {
		c.near.close()
	}
}

// key is the Redis key of an object, built with one allocation.
func (c *Cache) key(id uint64) string {
	var buf [64]byte
	return string(strconv.AppendUint(append(buf[:0], c.prefix...), id, 10))
}

// roundTrip is the context of one round trip to Redis: its deadline (now
// plus Options.Timeout) bounds the client's socket reads and writes
// (go-redis with ContextTimeoutEnabled), it carries its parent's values,
// and nothing cancels it. A timer per read and a child of every request's
// context (what context.WithTimeout costs) would be a tenth of a cached
// read's CPU; the socket deadline bounds the round trip as well.
type roundTrip struct {
	parent   context.Context
	deadline time.Time
}

func (c *Cache) roundTrip(parent context.Context) *roundTrip {
	return &roundTrip{parent: parent, deadline: time.Now().Add(c.wait)}
}

func (r *roundTrip) Deadline() (time.Time, bool) { return r.deadline, true }
func (r *roundTrip) Done() <-chan struct{}       { return nil }
func (r *roundTrip) Err() error                  { return nil }
func (r *roundTrip) Value(key any) any           { return r.parent.Value(key) }

// Lease is a reader's right to fill one missed entry.
type Lease string

// Get returns the cached objects among ids (hits) and, for each miss this
// caller may fill, its lease; a miss another reader holds the lease for is
// in neither. It makes one round trip per Redis node, shared with the
// reads of concurrent callers (batch.go), and a second for the leases when
// anything missed. On a Redis failure it returns the error
// (counted) and no hits: the caller reads MySQL and does not fill.
func (c *Cache) Get(ctx context.Context, ids []uint64) (map[uint64]model.Object, map[uint64]Lease, error) {
	hits := make(map[uint64]model.Object, len(ids))
	var gen uint64
	if c.near != nil {
		rest := make([]uint64, 0, len(ids))
		for _, id := range ids {
			if b, ok := c.near.get(id); ok {
				hits[id], _ = decode(id, b)
				continue
			}
			rest = append(rest, id)
		}
		if len(hits) > 0 {
			c.nearHit(ctx, len(hits))
			if len(rest) == 0 {
				return hits, nil, nil
			}
		}
		ids, gen = rest, c.near.snapshot()
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = c.key(id)
	}
	vals, err := c.reads.read(ctx, c, keys)
	if err != nil {
		c.errs.Inc()
		return nil, nil, err
	}
	fromNear := len(hits)
	var missed []uint64
	for i, v := range vals {
		if o, ok := decode(ids[i], v); ok {
			hits[ids[i]] = o
			if c.near != nil {
				c.near.put(ids[i], v, gen)
			}
			continue
		}
		missed = append(missed, ids[i])
	}
	c.hits.Add(float64(len(hits) - fromNear))
	c.misses.Add(float64(len(missed)))
	c.stats.Hits.Add(int64(len(hits) - fromNear))
	c.stats.Misses.Add(int64(len(missed)))
	if len(missed) == 0 {
		return hits, nil, nil
	}
	leases, err := c.lease(c.roundTrip(ctx), missed)
	if err != nil {
		c.errs.Inc()
		return hits, nil, nil // the hits stand; the misses are read without a fill
	}
	return hits, leases, nil
}

// GetOne is Get of one id, without Get's maps: the object and true on a
// hit; on a miss, the lease when this caller may fill (else "").
func (c *Cache) GetOne(ctx context.Context, id uint64) (model.Object, bool, Lease, error) {
	var gen uint64
	if c.near != nil {
		if b, ok := c.near.get(id); ok {
			o, _ := decode(id, b)
			c.nearHit(ctx, 1)
			return o, true, "", nil
		}
		gen = c.near.snapshot()
	}
	vals, err := c.reads.read(ctx, c, []string{c.key(id)})
	if err != nil {
		c.errs.Inc()
		return model.Object{}, false, "", err
	}
	if o, ok := decode(id, vals[0]); ok {
		if c.near != nil {
			c.near.put(id, vals[0], gen)
		}
		c.hits.Inc()
		c.stats.Hits.Add(1)
		return o, true, "", nil
	}
	c.misses.Inc()
	c.stats.Misses.Add(1)
	leases, err := c.lease(c.roundTrip(ctx), []uint64{id})
	if err != nil {
		c.errs.Inc()
		return model.Object{}, false, "", nil // read without a fill
	}
	return model.Object{}, false, leases[id], nil
}

// nearHit counts n objects answered by the near copy, and notes them on
// the request's span when it is traced (internal/tracing).
func (c *Cache) nearHit(ctx context.Context, n int) {
	if tracing.On() {
		if sp := trace.SpanFromContext(ctx); sp.IsRecording() {
			sp.AddEvent("near copy hit", trace.WithAttributes(attribute.Int("pinstore.cache.near_hits", n)))
		}
	}
	c.hits.Add(float64(n))
	c.near.hits.Add(float64(n))
	c.stats.Hits.Add(int64(n))
	c.stats.NearHits.Add(int64(n))
}

// lease takes a lease on each missed key that holds none (SET NX, then GET
// in the same pipeline) and returns those this caller got.
func (c *Cache) lease(ctx context.Context, ids []uint64) (map[uint64]Lease, error) {
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	token := "L" + hex.EncodeToString(raw[:])
	pipe := c.client.Pipeline()
	gets := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		k := c.key(id)
		pipe.SetNX(ctx, k, token, c.leaseTTL)
		gets[i] = pipe.Get(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	leases := make(map[uint64]Lease, len(ids))
	for i, g := range gets {
		if v, err := g.Result(); err == nil && v == token {
			leases[ids[i]] = Lease(token)
		}
	}
	return leases, nil
}

// fill writes ARGV[2] with expiry ARGV[3] ms if the key still holds the
// lease ARGV[1].
var fill = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0`)

// Fill caches the objects read from MySQL for which leases holds the
// caller's lease, one round trip per Redis node. A lease a write took away
// (or that expired) refuses its fill, which is counted. Failures only cost
// later misses.
func (c *Cache) Fill(ctx context.Context, objs []model.Object, leases map[uint64]Lease) {
	if len(leases) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.wait)
	defer cancel()
	pipe := c.client.Pipeline()
	var cmds []*redis.Cmd
	ttl := strconv.FormatInt(c.ttl.Milliseconds(), 10)
	for _, o := range objs {
		l, ok := leases[o.ID]
		if !ok {
			continue
		}
		cmds = append(cmds, fill.Eval(ctx, pipe, []string{c.key(o.ID)}, string(l), encode(o), ttl))
	}
	if len(cmds) == 0 {
		return
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		c.errs.Inc()
		return
	}
	for _, cmd := range cmds {
		if n, err := cmd.Int(); err == nil && n == 0 {
			c.refused.Inc()
			c.stats.Refused.Add(1)
		}
	}
}

// Invalidate deletes the entries of ids, any lease on them, and their
// edges (edges.go), in one round trip per Redis node. It returns the error
// when Redis did not take every delete. Every invalidation (after a
// commit, resent, swept) goes through it, so none leaves edges behind.
func (c *Cache) Invalidate(ctx context.Context, ids ...uint64) error {
	return c.InvalidateWith(ctx, nil, ids...)
}

// InvalidateWith is Invalidate that also sends, in the same round trip,
// the commands also queues on its pipeline (another cache's writes after
// the same commit, such as ownercache.Cache.QueueSet); also's func runs
// once the pipeline is sent, to read their results, and its error is its
// own to report. The error returned is the invalidation's alone.
func (c *Cache) InvalidateWith(ctx context.Context, also func(ctx context.Context, pipe redis.Pipeliner) (sent func() error), ids ...uint64) error {
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.wait)
	defer cancel()
	pipe := c.client.Pipeline()
	dels := make([]*redis.IntCmd, 0, 2*len(ids))
	for _, id := range ids {
		dels = append(dels, pipe.Del(ctx, c.key(id)))
		if c.edgeOwners == nil || c.edgeOwners(id) {
			dels = append(dels, pipe.Del(ctx, c.edgeKey(id))) // another key: on a Redis Cluster, perhaps another node
		}
	}
	var sent func() error
	if also != nil {
		sent = also(ctx, pipe)
	}
	var heard func() error
	if c.near != nil {
		heard = c.near.announce(ctx, pipe, ids) // after the deletes, on the same connection
	}
	_, _ = pipe.Exec(ctx) // every command carries its own error
	if sent != nil {
		_ = sent()
	}
	var err error
	if heard != nil {
		err = heard()
	}
	for _, del := range dels {
		if e := del.Err(); e != nil {
			err = e
			break
		}
	}
	if err != nil {
		c.errs.Inc()
	}
	return err
}

// An entry: 'F', the flags (model.Flags), version, created and updated
// (Unix microseconds), the counts (a byte saying how many, 8 bytes each),
// then the document. An entry of an earlier layout ('V', without flags)
// reads as a miss that no reader fills until it expires.
const entryHead = 1 + 1 + 8 + 8 + 8 + 1

func encode(o model.Object) []byte {
	b := make([]byte, entryHead, entryHead+8*len(o.Counts)+len(o.Doc))
	b[0] = 'F'
	b[1] = byte(o.Flags)
	binary.BigEndian.PutUint64(b[2:], uint64(o.Version))
	binary.BigEndian.PutUint64(b[10:], uint64(o.CreatedAt.UnixMicro()))
	binary.BigEndian.PutUint64(b[18:], uint64(o.UpdatedAt.UnixMicro()))
	b[26] = byte(len(o.Counts))
	for _, n := range o.Counts {
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return append(b, o.Doc...)
}

// decode reads an entry of object id; ok is false for a lease or anything
// malformed (a miss), and for an entry with another number of counts than
// its type carries (model.CountKeys; written by a version that counted
// less).
func decode(id uint64, b []byte) (model.Object, bool) {
	if len(b) < entryHead || b[0] != 'F' {
		return model.Object{}, false
	}
	n := int(b[26])
	if len(b) < entryHead+8*n || n != 0 && n != len(model.CountKeys(idcodec.TypeOf(id))) {
		return model.Object{}, false
	}
	o := model.Object{
		ID:        id,
		Type:      idcodec.TypeOf(id),
		Flags:     model.Flags(b[1]),
		Version:   int64(binary.BigEndian.Uint64(b[2:])),
		CreatedAt: time.UnixMicro(int64(binary.BigEndian.Uint64(b[10:]))).UTC(),
		UpdatedAt: time.UnixMicro(int64(binary.BigEndian.Uint64(b[18:]))).UTC(),
	}
	if n > 0 {
		o.Counts = make([]int64, n)
		for i := range o.Counts {
			o.Counts[i] = int64(binary.BigEndian.Uint64(b[entryHead+8*i:]))
		}
	}
	o.Doc = b[entryHead+8*n : len(b) : len(b)] // an append copies: a near copy's entry is shared
	return o, true
}
