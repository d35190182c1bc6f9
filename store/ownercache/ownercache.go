// Package ownercache caches which user owns a pin in Redis, in the bucketed
// hash layout Instagram used for its media → user map.
//
// # Layout
//
// Pins are grouped into buckets of BucketSize (1000) consecutive IDs:
// bucket = pin / 1000. Each bucket is one Redis hash; the field is the pin's
// position in the bucket (pin % 1000, in decimal) and the value is the
// owner's user ID. A small hash is stored by Redis as a listpack, a flat
// byte array of field/value entries with no per-entry pointers, which is
// what makes the layout ~6x smaller than one string key per pin. That holds
// only while a hash has at most hash-max-listpack-entries fields, so Redis
// must run with that setting ≥ 1000 (CheckConfig tells).
//
// # Encoding
//
// pinstore IDs are 64-bit (shard<<46 | type<<36 | local, see idcodec), so
// writing them in decimal, as the Instagram layout did, costs 10 bytes per
// value in a listpack (a 64-bit integer entry). The cache encodes instead:
//
//   - Key: Options.Prefix followed by the bucket as 9 digits of a 64-symbol,
//     ASCII-ordered alphabet ("-0-9A-Z_a-z").
//     Nine 6-bit digits hold the bucket of any
//     pin ID (below 2^62/1000); fixed width makes keys sort like
//     buckets; the alphabet has no '{' or '}', so keys carry no accidental
//     Redis Cluster hash tag and one bucket is always exactly one key (in one
//     slot).
//   - Field: the position 0–999 in decimal. Redis stores it as a listpack
//     integer: 2 bytes below 128, 3 bytes otherwise.
//   - Value: the owner is a user ID, and its type bits (always 3) carry no
//     information, so the cache stores u = local<<16 | shard as a binary
//     string of 1–7 big-endian bytes without leading zero bytes. Realistic
//     owners (local below 2^24, any shard) take 5 bytes, i.e. a 7-byte
//     listpack entry instead of 10. An owner that is not a user ID (never
//     expected) is stored as its 8 raw bytes, so decoding is exact for every
//     value and the length alone says which form was written. A binary value
//     that happens to read as a canonical decimal integer is stored by Redis
//     as that integer and returned as the same bytes, so that case is exact
//     too. A value that decodes to nothing valid is treated as a miss.
//
// Example: pin 241294492511762325 (shard 3429, local 7075733) owned by user
// 241294629943640797 (shard 3429, local 733) is field "325" of key
// "pinstore:o:-qrI-VmsH" (bucket 241294492511762), value "\x02\xdd\x0de"
// (733<<16 | 3429 in 4 bytes).
//
// Measured with bench/ownermem (Redis 7.0, 1,000,000 realistic pairs: pins
// on random shards among 4096 with auto-increment locals, owners anywhere):
// 11.3 bytes of used_memory per pair; 14.5 with decimal keys and values;
// 104 with one plain string key per pin; 10.3 when buckets are full, and 56
// for full buckets when hash-max-listpack-entries is 512.
//
// # Invariants
//
// Owners never change, so the cache is never stale: it only ever holds pairs
// that came from the source of truth (Set's contract, and Lookup only fills
// what its load function returned). Redis is only a cache: Lookup answers
// from the source of truth when Redis fails or times out, counts the failure
// and logs a rate-limited warning. Get, Set and Delete make one round trip
// (one pipeline, one command per bucket) bounded by Options.Timeout; Lookup
// makes at most two (read, then fill). With a ClusterClient, go-redis splits
// a pipeline per node and sends the parts in parallel.
//
// The client's creator sets go-redis dial/read timeouts and should set
// ContextTimeoutEnabled, without which go-redis ignores the per-call context
// deadline on socket reads (New logs a warning).
package ownercache

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/pinstore/pinstore/internal/metrics"
	"github.com/pinstore/pinstore/model"
)

// Defaults for Options.
const (
	DefaultPrefix  = "pinstore:o:"
	DefaultTimeout = 50 * time.Millisecond

	// warnEvery bounds how often Lookup logs that Redis failed.
	warnEvery = 10 * time.Second
)

// Options configure a Cache. The zero value is usable.
type Options struct {
	// Prefix starts every key, so pinstore can share a Redis. Default
	// DefaultPrefix.
	Prefix string
	// Timeout bounds each Redis call (one pipeline). Default DefaultTimeout.
	// go-redis applies it to socket I/O only when the client was created with
	// ContextTimeoutEnabled; otherwise its ReadTimeout applies (New warns).
	Timeout time.Duration
	// Logger receives Lookup's rate-limited warnings. Default: discard.
	Logger *slog.Logger
	// Registerer receives the cache's counters. Nil: not registered.
	Registerer prometheus.Registerer
}

// Cache is the pin → owner cache. It is safe for concurrent use.
type Cache struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
	log     *slog.Logger

	// fields[i] is the hash field of position i, boxed once so that building
	// HMGET arguments does not allocate per pin.
	fields [BucketSize]any

	hits, misses prometheus.Counter
	fails        *prometheus.CounterVec

	warnMu     sync.Mutex
	warnLast   time.Time
	suppressed int
}

// New returns a Cache that uses client. It does not contact Redis; call
// CheckConfig at start-up to verify the server's listpack limit. The
// counters pinstore_owner_cache_{hits,misses,errors}_total are registered on
// opts.Registerer when it is not nil; if the same registerer already holds
// them (a second Cache), the existing counters are shared.
func New(client redis.UniversalClient, opts Options) *Cache {
	c := &Cache{
		client:  client,
		prefix:  opts.Prefix,
		timeout: opts.Timeout,
		log:     opts.Logger,
	}
	if c.prefix == "" {
		c.prefix = DefaultPrefix
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	for i := range c.fields {
		c.fields[i] = fieldName(i)
	}
	c.hits = metrics.Register(opts.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pinstore_owner_cache_hits_total",
		Help: "Pins whose owner was found in the Redis owner cache.",
	}))
	c.misses = metrics.Register(opts.Registerer, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pinstore_owner_cache_misses_total",
		Help: "Pins whose owner was not in the Redis owner cache.",
	}))
	c.fails = metrics.Register(opts.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pinstore_owner_cache_errors_total",
		Help: "Redis owner cache calls that failed or timed out, by operation: get (a look-up, answered from MySQL instead), set (a fill or a create's owners, left out) or delete (removing entries, which only repair tools and tests do).",
	}, []string{"op"}))
	for _, op := range []string{"get", "set", "delete"} {
		c.fails.WithLabelValues(op) // every series from the start: a scrape sees 0, not nothing
	}
	if !contextTimeoutEnabled(client) {
		c.log.Warn("ownercache: redis client has ContextTimeoutEnabled=false; the per-call timeout does not bound socket reads, its ReadTimeout does",
			"timeout", c.timeout)
	}
	return c
}

func contextTimeoutEnabled(client redis.UniversalClient) bool {
	switch cl := client.(type) {
	case *redis.Client:
		return cl.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return cl.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return cl.Options().ContextTimeoutEnabled
	}
	return true // unknown implementation: assume it honours contexts
}

// batch is a batch of pins grouped by bucket, ready to become one pipeline
// with one command per bucket.
type batch struct {
	groups []group
	keys   string // the groups' keys, concatenated: one allocation
	keyLen int
}

// group is one bucket of a batch and where its pins are in the input.
type group struct {
	bucket uint64
	idx    []int
}

// key returns the Redis key of group g.
func (b *batch) key(g int) string { return b.keys[g*b.keyLen : (g+1)*b.keyLen] }

// newBatch groups the pins by bucket, in order of first appearance. Pins
// with reserved bits set (or 0) are not pin IDs: they are left out, so they
// read as misses and are never written.
func (c *Cache) newBatch(pins []uint64) batch {
	b := batch{groups: make([]group, 0, len(pins))}
	gi := make([]int32, len(pins)) // group of pins[i], or -1
	at := make(map[uint64]int32, len(pins))
	counts := make([]int, 0, len(pins))
	for i, pin := range pins {
		if pin == 0 || pin&reservedMask != 0 {
			gi[i] = -1
			continue
		}
		bucket, _ := bucketOf(pin)
		g, ok := at[bucket]
		if !ok {
			g = int32(len(b.groups))
			at[bucket] = g
			b.groups = append(b.groups, group{bucket: bucket})
			counts = append(counts, 0)
		}
		gi[i] = g
		counts[g]++
	}
	flat := make([]int, 0, len(pins))
	for g, n := range counts {
		b.groups[g].idx = flat[len(flat) : len(flat) : len(flat)+n]
		flat = flat[:len(flat)+n]
	}
	for i, g := range gi {
		if g >= 0 {
			b.groups[g].idx = append(b.groups[g].idx, i)
		}
	}
	b.keyLen = len(c.prefix) + bucketKeyLen
	var keys strings.Builder
	keys.Grow(len(b.groups) * b.keyLen)
	var kb [bucketKeyLen]byte
	for _, g := range b.groups {
		keys.WriteString(c.prefix)
		keys.Write(appendKey(kb[:0], "", g.bucket))
	}
	b.keys = keys.String()
	return b
}

// queue adds one command per bucket of b to pipe: name, the bucket's key,
// then each pin's field, followed by value(i) when value is not nil. The
// arguments of all commands share one backing array.
func (c *Cache) queue(ctx context.Context, pipe redis.Pipeliner, name string, b *batch, pins []uint64, value func(i int) any) []*redis.Cmd {
	per := 1
	if value != nil {
		per = 2
	}
	n := 0
	for _, g := range b.groups {
		n += 2 + per*len(g.idx)
	}
	args := make([]any, 0, n)
	cmds := make([]*redis.Cmd, len(b.groups))
	for gi, g := range b.groups {
		start := len(args)
		args = append(args, name, b.key(gi))
		for _, i := range g.idx {
			_, pos := bucketOf(pins[i])
			args = append(args, c.fields[pos])
			if value != nil {
				args = append(args, value(i))
			}
		}
		cmds[gi] = pipe.Do(ctx, args[start:len(args):len(args)]...)
	}
	return cmds
}

func unavailable(op string, err error) error {
	return model.Wrap(op, model.EUnavailable, "owner cache unavailable", err)
}

// Get returns the cached owner of each pin: owners[i] belongs to pins[i] and
// is 0 on a miss. It makes one round trip (a pipeline of one HMGET per
// bucket) bounded by Options.Timeout. On a Redis failure it returns a
// *model.Error with code model.EUnavailable and counts the failure; callers
// that want a fallback use Lookup.
func (c *Cache) Get(ctx context.Context, pins []uint64) ([]uint64, error) {
	const op = "ownercache.Get"
	owners := make([]uint64, len(pins))
	b := c.newBatch(pins)
	if len(b.groups) == 0 {
		c.misses.Add(float64(len(pins)))
		return owners, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	pipe := c.client.Pipeline()
	cmds := c.queue(ctx, pipe, "hmget", &b, pins, nil)
	if _, err := pipe.Exec(ctx); err != nil {
		c.fails.WithLabelValues("get").Inc()
		return nil, unavailable(op, err)
	}

	hits := 0
	for gi, g := range b.groups {
		vals, err := cmds[gi].Slice()
		if err == nil && len(vals) != len(g.idx) {
			err = fmt.Errorf("HMGET returned %d values for %d fields", len(vals), len(g.idx))
		}
		if err != nil {
			c.fails.WithLabelValues("get").Inc()
			return nil, unavailable(op, err)
		}
		for j, v := range vals {
			s, ok := v.(string)
			if !ok {
				continue // nil: the field is absent
			}
			if owner, ok := decodeOwner(s); ok {
				owners[g.idx[j]] = owner
				hits++
			}
		}
	}
	c.hits.Add(float64(hits))
	c.misses.Add(float64(len(pins) - hits))
	return owners, nil
}

// Set caches pin → owner pairs in one round trip (a pipeline of one HSET per
// bucket) bounded by Options.Timeout. Every pair must come from the source
// of truth: the cache never checks and never expires a pair. Pairs with
// owner 0, and pins with reserved bits set, are skipped. On a Redis failure
// it returns a *model.Error with code model.EUnavailable; some buckets may
// have been written, which is harmless since every pair is true.
func (c *Cache) Set(ctx context.Context, pairs map[uint64]uint64) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	pipe := c.client.Pipeline()
	sent := c.QueueSet(ctx, pipe, pairs)
	_, _ = pipe.Exec(ctx) // every command carries its own error
	return sent()
}

// QueueSet queues Set's writes on pipe, a pipeline of the cache's client
// that the caller sends (with other commands, in the same round trip) and
// bounds; sent, called once it is sent, returns what Set would have.
func (c *Cache) QueueSet(ctx context.Context, pipe redis.Pipeliner, pairs map[uint64]uint64) (sent func() error) {
	const op = "ownercache.Set"
	pins := make([]uint64, 0, len(pairs))
	vb := make([]byte, 0, len(pairs)*6)
	end := make([]int, 0, len(pairs)) // value of pins[i] is vals[end[i-1]:end[i]]
	for pin, owner := range pairs {
		if owner == 0 {
			continue
		}
		pins = append(pins, pin)
		vb = appendOwner(vb, owner)
		end = append(end, len(vb))
	}
	b := c.newBatch(pins)
	if len(b.groups) == 0 {
		return func() error { return nil }
	}
	vals := string(vb)
	value := func(i int) any {
		start := 0
		if i > 0 {
			start = end[i-1]
		}
		return vals[start:end[i]]
	}
	cmds := c.queue(ctx, pipe, "hset", &b, pins, value)
	return func() error {
		for _, cmd := range cmds {
			if err := cmd.Err(); err != nil {
				c.fails.WithLabelValues("set").Inc()
				return unavailable(op, err)
			}
		}
		return nil
	}
}

// Delete removes pins from the cache in one round trip (a pipeline of one
// HDEL per bucket) bounded by Options.Timeout. Owners never change, so
// pinstore does not need it in normal operation; it exists for repair tools
// and tests. On a Redis failure it returns a *model.Error with code
// model.EUnavailable.
func (c *Cache) Delete(ctx context.Context, pins ...uint64) error {
	const op = "ownercache.Delete"
	b := c.newBatch(pins)
	if len(b.groups) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	pipe := c.client.Pipeline()
	c.queue(ctx, pipe, "hdel", &b, pins, nil)
	if _, err := pipe.Exec(ctx); err != nil {
		c.fails.WithLabelValues("delete").Inc()
		return unavailable(op, err)
	}
	return nil
}

// LoadFunc reads owners from the source of truth. It receives distinct pins
// and returns the owner of each pin it found; pins it leaves out do not
// exist. Only pairs it returns are written to the cache.
type LoadFunc = func(ctx context.Context, misses []uint64) (map[uint64]uint64, error)

// Lookup is the read-through path: it returns the owner of every pin found
// in the cache or by load, keyed by pin; pins found nowhere are absent. It
// reads the cache (one round trip), calls load once with the distinct
// misses, and writes load's answers back (one more round trip) before
// returning. When Redis fails or times out, Lookup counts the error, logs a
// rate-limited warning, skips the fill, and answers every pin from load: it
// never fails because of Redis. It returns an error only when load does.
func (c *Cache) Lookup(ctx context.Context, pins []uint64, load LoadFunc) (map[uint64]uint64, error) {
	const op = "ownercache.Lookup"
	found := make(map[uint64]uint64, len(pins))
	owners, err := c.Get(ctx, pins)
	redisOK := err == nil
	if !redisOK {
		c.warn(op, "owner cache read failed; answering from the source of truth", err)
	}

	var misses []uint64
	seen := make(map[uint64]struct{}, len(pins))
	for i, pin := range pins {
		if redisOK && owners[i] != 0 {
			found[pin] = owners[i]
			continue
		}
		if _, dup := seen[pin]; dup {
			continue
		}
		seen[pin] = struct{}{}
		misses = append(misses, pin)
	}
	if len(misses) == 0 {
		return found, nil
	}

	loaded, err := load(ctx, misses)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	fill := make(map[uint64]uint64, len(loaded))
	for _, pin := range misses {
		if owner, ok := loaded[pin]; ok && owner != 0 {
			found[pin] = owner
			fill[pin] = owner
		}
	}
	if redisOK && len(fill) > 0 {
		if err := c.Set(ctx, fill); err != nil {
			c.warn(op, "owner cache fill failed", err)
		}
	}
	return found, nil
}

// warn logs a Redis failure at most once per warnEvery, reporting how many
// were suppressed since the last one.
func (c *Cache) warn(op, msg string, err error) {
	c.warnMu.Lock()
	now := time.Now()
	if !c.warnLast.IsZero() && now.Sub(c.warnLast) < warnEvery {
		c.suppressed++
		c.warnMu.Unlock()
		return
	}
	suppressed := c.suppressed
	c.warnLast, c.suppressed = now, 0
	c.warnMu.Unlock()
	c.log.Warn(msg, "op", op, "err", err, "suppressed", suppressed)
}
