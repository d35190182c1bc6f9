package objcache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/pinstore/pinstore/model"
)

// # Edges
//
// Whether an object's list holds given entries (does this user like
// these pins) is cached beside the object's entry, in one Redis hash per
// object (edgeKey): the field "<mapping>:<to id>" holds "1" or "0", the
// field "<mapping>:*" says whether the hash holds the whole list ("1":
// every entry missing from the hash is absent from the list; "0": the list
// is too long to hold whole), the field "_g" holds the hash's
// generation, a random token, and "_n" the bytes fills wrote into it,
// which Options.HashSize bounds (fillHash).
//
// The hash is the object's: Invalidate deletes it with the object's entry.
// That is what keeps it exact, by construction rather than by each write
// remembering it: a transaction that adds or removes a row of an object's
// list changes the list's count in the same transaction, which records the
// object as changed (package shardsql, Tx), so the object is invalidated
// after the commit and before the write is acknowledged, and its edges go
// with it.
//
// Fills follow the leases of objects, with the generation as the lease:
//
//   - ReadEdges reads "_g" and the wanted fields in one pipeline (with
//     the object's entry). When the hash has no "_g" (so no fields
//     either), it sets one to a fresh token, creating the hash with the
//     entries' TTL (newGen, one more round trip, taken only by a read
//     that goes to MySQL anyway).
//   - The caller reads the fields that missed from MySQL (masters only),
//     then FillEdges writes them only if "_g" still holds the token it
//     read (a Lua compare-and-set); otherwise the fill is refused.
//
// A write that committed after the reader's generation was made deletes
// the hash when it invalidates, so the fill of a read that may predate the
// commit is refused; a generation made after the invalidation was read by
// a reader whose MySQL read follows the commit. So an edge read from the
// cache is never older than the last write acknowledged before the read
// began, under the same conditions as objects (Redis takes every
// invalidation; when it does not, the caller keeps the object off the
// cache, package store).

// edgeGen is the generation field of an edge hash.
const edgeGen = "_g"

// Edge states in EdgeRead.Found.
const (
	EdgeUnknown byte = 0   // not cached: read MySQL
	EdgeAbsent  byte = '0' // the list does not hold it
	EdgePresent byte = '1' // the list holds it
)

// edgeKey is the Redis key of object id's edges.
func (c *Cache) edgeKey(id uint64) string {
	var buf [64]byte
	b := strconv.AppendUint(append(buf[:0], c.prefix...), id, 10)
	return string(append(b, ":e"...))
}

// edgeField is the field of to in list m.
func edgeField(b []byte, m model.Mapping, to uint64) []byte {
	b = strconv.AppendUint(b, uint64(m), 10)
	b = append(b, ':')
	return strconv.AppendUint(b, to, 10)
}

// EdgeRead is what ReadEdges found.
type EdgeRead struct {
	Object    model.Object // the list's owner, when ObjectHit
	ObjectHit bool
	// Objects holds, when ReadEdges was asked for them, the entry of each
	// of tos, in order: ID 0 where the cache has none.
	Objects []model.Object
	Found   []byte // per to, in order: EdgePresent, EdgeAbsent or EdgeUnknown
	// Whole says whether the hash holds the whole list: EdgePresent when
	// it does (so Found has no EdgeUnknown), EdgeAbsent when the list is
	// too long to, EdgeUnknown when nobody has read it whole since the
	// last invalidation.
	Whole byte
	Gen   Lease  // the hash's generation: the caller's right to fill
	Page  []byte // ReadPage's: the page cached, nil for none
}

// edgeHead is how many fields ReadEdges reads before those of tos.
const edgeHead = 2

// wholeField is the field that says whether the hash holds m whole.
func wholeField(m model.Mapping) string { return strconv.Itoa(int(m)) + ":*" }

// state is an edge state read from a field (EdgeUnknown for none).
func state(v any) byte {
	if s, ok := v.(string); ok && len(s) == 1 && (s[0] == EdgePresent || s[0] == EdgeAbsent) {
		return s[0]
	}
	return EdgeUnknown
}

// edgeTokens makes generations: a random prefix per process and a
// counter, unique without a random read per call.
type edgeTokens struct {
	prefix string
	n      atomic.Uint64
}

func newEdgeTokens() *edgeTokens {
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	return &edgeTokens{prefix: "G" + hex.EncodeToString(raw[:]) + ":"}
}

func (t *edgeTokens) next() string {
	return t.prefix + strconv.FormatUint(t.n.Add(1), 36)
}

// ReadEdges reads, in one round trip, the entry of object from, whether
// its list m holds each of tos and the hash's generation, and with objects
// the entries of tos too (EdgeRead.Objects). When the hash has no
// generation and some of tos missed, it makes one (newGen) so that the
// caller may fill. Concurrent callers' reads share round trips (one
// pipeline of them all, as Get's reads share commands). On a Redis failure
// it returns the error (counted): the caller reads MySQL and does not
// fill.
func (c *Cache) ReadEdges(ctx context.Context, from uint64, m model.Mapping, tos []uint64, objects bool) (EdgeRead, error) {
	r, err := c.readHash(ctx, &edgeReq{from: from, m: m, tos: tos, objects: objects})
	if err != nil {
		return r, err
	}
	hits := 0
	for _, f := range r.Found {
		if f != EdgeUnknown {
			hits++
		}
	}
	c.edges.count(hits, len(tos)-hits)
	// Object hits: the owner, and the entries of tos the caller may use
	// (those not known absent); a miss is counted by the read that follows.
	objHits := 0
	if r.ObjectHit {
		objHits++
	}
	for i, o := range r.Objects {
		if o.ID != 0 && r.Found[i] != EdgeAbsent {
			objHits++
		}
	}
	c.hits.Add(float64(objHits))
	c.stats.Hits.Add(int64(objHits))
	if r.Gen == "" && hits < len(tos) {
		if r.Gen, err = c.newGen(ctx, from); err != nil {
			c.errs.Inc()
			r.Gen = "" // the caller reads MySQL and fills nothing
		}
	}
	return r, nil
}

// readHash runs req with the edge and page reads of concurrent callers
// (one pipeline) and returns its answer; a failure is counted.
func (c *Cache) readHash(ctx context.Context, req *edgeReq) (EdgeRead, error) {
	err := c.edges.reads.do(ctx, c, req)
	if err == nil {
		err = req.err
	}
	if err != nil {
		c.errs.Inc()
		return EdgeRead{}, err
	}
	return req.out, nil
}

// newGenScript gives the hash KEYS[1] the generation ARGV[1] if it has
// none, with the TTL ARGV[2] (ms) on a hash it makes, and returns the
// hash's generation.
var newGenScript = redis.NewScript(`if redis.call('HSETNX', KEYS[1], '_g', ARGV[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return redis.call('HGET', KEYS[1], '_g')`)

// newGen returns the generation of from's edge hash, making the hash with
// a fresh one if it has none.
func (c *Cache) newGen(ctx context.Context, from uint64) (Lease, error) {
	g, err := newGenScript.Run(c.roundTrip(ctx), c.client, []string{c.edgeKey(from)}, c.edges.tokens.next(), c.ttl.Milliseconds()).Text()
	return Lease(g), err
}

// edgeReq is one ReadEdges: what it asks, and once read, its answer.
type edgeReq struct {
	waiter
	from    uint64
	m       model.Mapping
	tos     []uint64
	objects bool            // read the entries of tos as well
	page    string          // instead of edges, this page field (pages.go)
	mget    *redis.SliceCmd // the batch's entries on one node: r's (from's, then tos') from at
	at      int
	gets    []*redis.StringCmd // r's entries on a Redis Cluster, one GET each
	vals    *redis.SliceCmd
	out     EdgeRead
	err     error
}

func (r *edgeReq) size() int {
	if r.page != "" {
		return edgeHead
	}
	if r.objects {
		return edgeHead + 2*len(r.tos)
	}
	return edgeHead + len(r.tos)
}

// readEdges is the run of the edge reads' coalescer: one pipeline for the
// whole batch, whose entries are read with one MGET on one node.
func (c *Cache) readEdges(ctx context.Context, batch []*edgeReq) {
	pipe := c.client.Pipeline()
	if _, cluster := c.client.(*redis.ClusterClient); cluster {
		for _, r := range batch {
			r.gets = r.get(ctx, c, pipe)
			r.queue(ctx, c, pipe)
		}
	} else {
		var keys []string
		for _, r := range batch {
			r.at = len(keys)
			keys = r.keys(c, keys)
		}
		mget := pipe.MGet(ctx, keys...)
		for _, r := range batch {
			r.mget = mget
			r.queue(ctx, c, pipe)
		}
	}
	_, err := pipe.Exec(ctx)
	if err != nil && errors.Is(err, redis.Nil) {
		err = nil
	}
	for _, r := range batch {
		r.err = err
		if err == nil {
			r.err = r.parse()
		}
	}
}

// keys appends the keys of the entries r reads: from's, then, with
// objects, those of tos.
func (r *edgeReq) keys(c *Cache, keys []string) []string {
	keys = append(keys, c.key(r.from))
	if r.objects {
		for _, to := range r.tos {
			keys = append(keys, c.key(to))
		}
	}
	return keys
}

// get queues a GET of each of r's entries: on a Redis Cluster their keys
// live on several nodes.
func (r *edgeReq) get(ctx context.Context, c *Cache, pipe redis.Pipeliner) []*redis.StringCmd {
	keys := r.keys(c, nil)
	gets := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		gets[i] = pipe.Get(ctx, k)
	}
	return gets
}

// queue adds the read of r's hash fields to pipe.
func (r *edgeReq) queue(ctx context.Context, c *Cache, pipe redis.Pipeliner) {
	if r.page != "" {
		r.vals = pipe.HMGet(ctx, c.edgeKey(r.from), edgeGen, r.page)
		return
	}
	fields := make([]string, edgeHead+len(r.tos))
	fields[0] = edgeGen
	fields[1] = wholeField(r.m)
	var buf [48]byte
	for i, to := range r.tos {
		fields[edgeHead+i] = string(edgeField(buf[:0], r.m, to))
	}
	r.vals = pipe.HMGet(ctx, c.edgeKey(r.from), fields...)
}

// entry is the i-th entry r read (nil for none).
func (r *edgeReq) entry(i int) []byte {
	if r.gets != nil {
		b, _ := r.gets[i].Bytes()
		return b
	}
	if s, ok := r.mget.Val()[r.at+i].(string); ok {
		return []byte(s)
	}
	return nil
}

// parse reads r's answer from its commands' replies.
func (r *edgeReq) parse() error {
	n := 1
	if r.objects {
		n += len(r.tos)
	}
	if r.mget != nil && len(r.mget.Val()) < r.at+n {
		return errors.New("objcache.ReadEdges: short reply")
	}
	r.out.Object, r.out.ObjectHit = decode(r.from, r.entry(0))
	if r.objects {
		r.out.Objects = make([]model.Object, len(r.tos))
		for i, to := range r.tos {
			r.out.Objects[i], _ = decode(to, r.entry(1+i))
		}
	}
	got := r.vals.Val()
	if len(got) != edgeHead+len(r.tos) {
		return errors.New("objcache.ReadEdges: short reply")
	}
	if g, ok := got[0].(string); ok {
		r.out.Gen = Lease(g)
	}
	if r.page != "" {
		if v, ok := got[1].(string); ok {
			r.out.Page = []byte(v)
		}
		return nil
	}
	r.out.Whole = state(got[1])
	r.out.Found = make([]byte, len(r.tos))
	for i := range r.tos {
		r.out.Found[i] = state(got[edgeHead+i])
		if r.out.Found[i] == EdgeUnknown && r.out.Whole == EdgePresent {
			r.out.Found[i] = EdgeAbsent // not in the whole list
		}
	}
	return nil
}

// fillEdges sets the fields ARGV[3..] (name, value pairs) of the hash
// KEYS[1] if its generation is still ARGV[1] and the bytes written into
// it (its field "_n", these included) stay within ARGV[2]: 1 when set, 0
// when the generation is another, -1 when the fill does not fit.
var fillEdges = redis.NewScript(`if redis.call('HGET', KEYS[1], '_g') ~= ARGV[1] then
  return 0
end
local n = tonumber(redis.call('HGET', KEYS[1], '_n') or '0')
for i = 3, #ARGV do
  n = n + #ARGV[i]
end
if n > tonumber(ARGV[2]) then
  return -1
end
redis.call('HSET', KEYS[1], '_n', n, unpack(ARGV, 3))
return 1`)

// FillEdges caches, under generation gen (from ReadEdges), whether from's
// list m holds each of tos (has, in the same order), as read from MySQL
// after ReadEdges, and with whole (unless EdgeUnknown) whether tos are
// the whole list (EdgePresent) or it is too long to cache whole
// (EdgeAbsent). A write's invalidation since (or the hash's expiry)
// refuses the fill, which is counted, and so does a hash at its size
// (Options.HashSize, fillHash). Failures only cost later misses.
func (c *Cache) FillEdges(ctx context.Context, from uint64, m model.Mapping, gen Lease, tos []uint64, has []bool, whole byte) {
	if gen == "" || len(tos) == 0 && whole == EdgeUnknown {
		return
	}
	args := make([]any, 0, 4+2*len(tos))
	args = append(args, string(gen), c.hashSize)
	if whole != EdgeUnknown {
		args = append(args, wholeField(m), string(whole))
	}
	var buf [48]byte
	for i, to := range tos {
		v := string(EdgeAbsent)
		if has[i] {
			v = string(EdgePresent)
		}
		args = append(args, string(edgeField(buf[:0], m, to)), v)
	}
	c.fillHash(ctx, from, args, c.edges.refused, &c.edges.stats)
}

// fillHash sets fields of from's hash, args being the generation, the
// limit and then (name, value) pairs, if the hash's generation is still
// the one given and the fill keeps the bytes filled into the hash within
// the limit. A refusal is counted in refused and stats, a fill left out
// for the size in the cache's full and stats, an error in the cache's.
//
// The size (Options.HashSize) bounds what one owner's readers can make
// Redis hold until the owner next changes or its hash expires: a reader
// who scrolls a long list to its end fills a page field per page, and one
// who checks a user's likes against many pins an edge field per pin. Once
// it is reached the hash answers with what it holds and the rest is read
// from MySQL. Pages after a cursor stop at half of it, so that a reader
// scrolling the owner's lists leaves room for the checks of its edges.
// First pages, the ones every reader of a list opens on, stop a quarter
// past it: that quarter is theirs alone, so neither a deep scroll nor
// many checks keep a list's first page out of the cache.
func (c *Cache) fillHash(ctx context.Context, from uint64, args []any, refused prometheus.Counter, stats *Stats) {
	n, err := fillEdges.Run(c.roundTrip(ctx), c.client, []string{c.edgeKey(from)}, args...).Int()
	switch {
	case err != nil:
		c.errs.Inc()
	case n == 0:
		refused.Inc()
		stats.Refused.Add(1)
	case n < 0:
		c.full.Inc()
		stats.Full.Add(1)
	}
}

// EdgeStats returns the edge cache's counters: Hits and Misses count
// entries (one per id checked), Refused counts fills.
func (c *Cache) EdgeStats() *Stats { return &c.edges.stats }

// edgeCounters are the edge cache's counters, its generations and its
// reads' coalescer.
type edgeCounters struct {
	hits, misses, refused prometheus.Counter
	stats                 Stats
	tokens                *edgeTokens
	reads                 *coalescer[*edgeReq]
}

func newEdgeCounters(c *Cache, counter func(name, help string) prometheus.Counter) edgeCounters {
	return edgeCounters{
		reads:   &coalescer[*edgeReq]{lanes: defaultLanes, run: c.readEdges},
		hits:    counter("pinstore_edge_cache_hits_total", "Edge checks (one per id checked) answered from the Redis edge cache."),
		misses:  counter("pinstore_edge_cache_misses_total", "Edge checks (one per id checked) not in the edge cache (read from MySQL)."),
		refused: counter("pinstore_edge_cache_fills_refused_total", "Edge fills refused because a write invalidated the list's owner after the reader took the generation."),
		tokens:  newEdgeTokens(),
	}
}

func (e *edgeCounters) count(hits, misses int) {
	e.hits.Add(float64(hits))
	e.misses.Add(float64(misses))
	e.stats.Hits.Add(int64(hits))
	e.stats.Misses.Add(int64(misses))
}
