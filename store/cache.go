package store

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/pinstore/pinstore/internal/metrics"
	"github.com/pinstore/pinstore/internal/tracing"
	"github.com/pinstore/pinstore/migrations"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/objcache"
	"github.com/pinstore/pinstore/store/replicas"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// The object cache (package objcache) sits in front of the shards for
// reads by id, multi-gets and the objects of list pages. A transaction
// that changes an object (its row, or a count of one of its lists)
// records it in its shard's cache_outbox before it commits (inTx), and
// after the commit, before the write is acknowledged, the cache drops the
// object's entry. When Redis does not take that:
//
//   - this process reads the object from MySQL until Redis does (pending),
//     and retries every cacheRetry;
//   - the cache_outbox row stays, so any server's sweep sends it if this
//     process dies first (rows older than cacheGrace, every PairSweep).
//
// So a stale entry can be read only by a server that reaches Redis while
// the writer cannot, and only until the writer's next retry after Redis
// is back (cacheRetry), or, when the writer is gone, until a sweep
// (PairSweep + cacheGrace); never after the entry's TTL.

const (
	cacheRetry = 100 * time.Millisecond // how often a process resends the invalidations Redis did not take
	cacheGrace = time.Second            // how old a cache_outbox row is before another server's sweep sends it
	cleanEvery = 50 * time.Millisecond  // how often taken invalidations' rows are deleted, in batches
)

// objectCache is the object cache as the store uses it; its methods do
// nothing when the cache is off (cache nil).
type objectCache struct {
	cache *objcache.Cache
	// keyed: shardKey → whether the shard was found keyed per write, and
	// when (a true answer is kept; a false one is asked again after
	// keyedRecheck); see perWrite.
	keyed sync.Map
	mu    sync.Mutex
	// pending: invalidations Redis has not taken, with the shard and token
	// of their cache_outbox rows; reads of these objects skip the cache.
	pending map[uint64]pendingMark
	// taken: invalidations Redis took, whose rows are still to delete;
	// links: the sampled requests that made them (the drain's links).
	taken map[shardsql.DB][]shardsql.CachedMark
	links tracing.Links
	gauge prometheus.GaugeFunc
}

// pendingMark is where an object's pending invalidation is recorded: its
// shard, and the tokens of the writes whose cache_outbox rows wait for it
// (each write has its own rows; one invalidation covers them all).
type pendingMark struct {
	db     shardsql.DB
	tokens []uint64
}

// maxPendingTokens bounds the tokens kept for one object while Redis is
// away; the rows of writes past it are left to the sweep.
const maxPendingTokens = 256

func newObjectCache(c *objcache.Cache, reg prometheus.Registerer) *objectCache {
	oc := &objectCache{cache: c, pending: map[uint64]pendingMark{}, taken: map[shardsql.DB][]shardsql.CachedMark{}}
	metrics.Register(reg, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pinstore_object_cache_invalidations_pending",
		Help: "Object cache invalidations Redis has not taken yet (retried; their objects are read from MySQL meanwhile).",
	}, func() float64 { oc.mu.Lock(); defer oc.mu.Unlock(); return float64(len(oc.pending)) }))
	return oc
}

func (oc *objectCache) on() bool { return oc != nil && oc.cache != nil }

// keyedRecheck is how long a shard not yet migrated to cache_outbox per
// write (or that did not answer) keeps the upserts before it is asked again.
const keyedRecheck = 10 * time.Second

// shardKey names a shard database on one master, without building a
// string on every write.
type shardKey struct{ addr, db string }

// keyedAnswer is what perWrite last learnt of a shard.
type keyedAnswer struct {
	perWrite bool
	at       time.Time
}

// perWrite reports whether sh's cache_outbox is keyed by object and write
// (migrations.CacheOutboxPerWrite), so that a transaction's marks can be
// plain inserts (shardsql.Tx.MarkCached). Each shard is asked once per
// process, with one read of its schema_migrations; a shard that is not
// migrated yet, or did not answer, gets the upserts and is asked again
// after keyedRecheck. The answer stays true: a shard is never migrated
// back, and a move copies a shard onto one migrated to the newest. The
// read takes a connection of sh's pool: ask before taking one.
func (oc *objectCache) perWrite(ctx context.Context, sh topology.Shard) bool {
	key := shardKey{sh.Host.Addr, sh.DB.Name}
	if v, ok := oc.keyed.Load(key); ok {
		a := v.(keyedAnswer)
		if a.perWrite || time.Since(a.at) < keyedRecheck {
			return a.perWrite
		}
	}
	v, err := migrations.Version(ctx, sh.Host.DB, sh.DB.Name)
	a := keyedAnswer{perWrite: err == nil && v >= migrations.CacheOutboxPerWrite, at: time.Now()}
	oc.keyed.Store(key, a)
	return a.perWrite
}

// newToken names one transaction's cache_outbox rows.
func newToken() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:]) | 1
}

// committed tells the caches, in one round trip to Redis, what t did once
// it committed on db: the object cache drops the objects it changed
// (whose cache_outbox rows carry token), and the owner cache learns the
// owners of the pins it created (a pair Redis does not take costs a later
// miss, never a wrong answer: owners never change).
func (s *shards) committed(ctx context.Context, db shardsql.DB, t *shardsql.Tx, token uint64) {
	ctx = context.WithoutCancel(ctx) // the caches must hear of a commit whatever became of its request
	touched, owners := t.Touched(), t.Owners()
	var setOwners func(context.Context, redis.Pipeliner) func() error
	if len(owners) > 0 && s.ownerCache != nil {
		setOwners = func(ctx context.Context, pipe redis.Pipeliner) func() error {
			return s.ownerCache.QueueSet(ctx, pipe, owners)
		}
	}
	switch {
	case token != 0 && len(touched) > 0:
		s.objects.invalidate(ctx, db, touched, token, setOwners)
	case setOwners != nil:
		_ = s.ownerCache.Set(ctx, owners)
	}
}

// invalidate drops the entries of ids, changed by a committed transaction
// on db whose cache_outbox rows carry token; also, when not nil, queues
// other writes to Redis to go in the same round trip
// (objcache.Cache.InvalidateWith).
func (oc *objectCache) invalidate(ctx context.Context, db shardsql.DB, ids []uint64, token uint64, also func(context.Context, redis.Pipeliner) func() error) {
	err := oc.cache.InvalidateWith(ctx, also, ids...)
	oc.mu.Lock()
	defer oc.mu.Unlock()
	for _, id := range ids {
		if err != nil {
			if p := oc.pending[id]; len(p.tokens) < maxPendingTokens {
				oc.pending[id] = pendingMark{db, append(p.tokens, token)}
			}
			continue
		}
		oc.taken[db] = append(oc.taken[db], shardsql.CachedMark{ID: id, Token: token})
		oc.links.Add(tracing.Origin(ctx))
		if old, ok := oc.pending[id]; ok { // earlier writes' invalidations are covered by this one
			oc.take(id, old)
			delete(oc.pending, id)
		}
	}
}

// take records that Redis took the invalidation of id that m waited for,
// so that its writes' rows are deleted. oc.mu must be held.
func (oc *objectCache) take(id uint64, m pendingMark) {
	for _, token := range m.tokens {
		oc.taken[m.db] = append(oc.taken[m.db], shardsql.CachedMark{ID: id, Token: token})
	}
}

// pendingFor reports whether id's invalidation is pending, so that the
// cache must not answer for it.
func (oc *objectCache) pendingFor(id uint64) bool {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	_, ok := oc.pending[id]
	return ok
}

// split returns the ids the cache may answer and those it must not
// (pending invalidations).
func (oc *objectCache) split(ids []uint64) (cached, direct []uint64) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if len(oc.pending) == 0 {
		return ids, nil
	}
	for _, id := range ids {
		if _, ok := oc.pending[id]; ok {
			direct = append(direct, id)
		} else {
			cached = append(cached, id)
		}
	}
	return cached, direct
}

// cacheLoop resends pending invalidations every cacheRetry and deletes the
// cache_outbox rows of taken ones every cleanEvery, until ctx is done.
func (s *core) cacheLoop(ctx context.Context) {
	retry := time.NewTicker(cacheRetry)
	clean := time.NewTicker(cleanEvery)
	defer retry.Stop()
	defer clean.Stop()
	for {
		select {
		case <-ctx.Done():
			s.cleanTaken(context.Background()) // what was taken need not be sent again
			return
		case <-retry.C:
			s.resendPending(ctx)
		case <-clean.C:
			s.cleanTaken(ctx)
		}
	}
}

// resendPending sends the invalidations Redis did not take.
func (s *core) resendPending(ctx context.Context) {
	oc := s.objects
	oc.mu.Lock()
	if len(oc.pending) == 0 {
		oc.mu.Unlock()
		return
	}
	ids := make([]uint64, 0, len(oc.pending))
	marks := make(map[uint64]pendingMark, len(oc.pending))
	for id, m := range oc.pending {
		ids = append(ids, id)
		marks[id] = m
	}
	oc.mu.Unlock()
	if err := oc.cache.Invalidate(ctx, ids...); err != nil {
		return // still away: next tick
	}
	oc.mu.Lock()
	defer oc.mu.Unlock()
	for _, id := range ids {
		m := marks[id]
		oc.take(id, m)
		// Writes recorded since the copy keep their marks until their own
		// resend: the list has grown past the copy's tokens, or (a later
		// write's invalidation took them all) been started anew.
		now, ok := oc.pending[id]
		switch {
		case !ok:
		case len(now.tokens) >= len(m.tokens) && now.tokens[0] == m.tokens[0]:
			if rest := now.tokens[len(m.tokens):]; len(rest) > 0 {
				oc.pending[id] = pendingMark{m.db, rest}
			} else {
				delete(oc.pending, id)
			}
		}
	}
}

// cleanTaken deletes the cache_outbox rows of invalidations Redis took,
// one statement per shard, one round trip per host. A failure leaves rows
// a sweep sends again, which is harmless.
func (s *core) cleanTaken(ctx context.Context) {
	oc := s.objects
	oc.mu.Lock()
	taken, links := oc.taken, oc.links
	oc.taken, oc.links = map[shardsql.DB][]shardsql.CachedMark{}, tracing.Links{}
	oc.mu.Unlock()
	ctx, span := drainSpan(ctx, taken, links)
	defer endSpan(span)
	t, release := s.router.Enter()
	defer release()
	byHost := map[*topology.Host]map[shardsql.DB][]shardsql.CachedMark{}
	for db, marks := range taken {
		sh, err := t.Shard(db.N)
		if err != nil || sh.ReadOnly {
			continue
		}
		if byHost[sh.Host] == nil {
			byHost[sh.Host] = map[shardsql.DB][]shardsql.CachedMark{}
		}
		byHost[sh.Host][db] = marks
	}
	for h, marks := range byHost { // one round trip a host
		c, cancel := context.WithTimeout(ctx, s.cfg.QueryTimeout)
		c, hs := drainHostSpan(c, h, marks)
		err := shardsql.UnmarkCached(c, h.DB, marks)
		tracing.Fail(hs, err)
		endSpan(hs)
		cancel()
	}
}

// sweepCached sends the invalidations recorded in the cache_outbox of some
// of a host's shards more than cacheGrace ago (their writer died, or
// Redis was away), and clears their rows once Redis takes them.
func (s *core) sweepCached(ctx context.Context, op string, h *topology.Host, dbs []shardsql.DB) (int, error) {
	oc := s.objects
	if !oc.on() {
		return 0, nil
	}
	c, cancel := s.deadline(ctx)
	due, err := shardsql.DueCached(c, h.DB, dbs, shardsql.Now().Add(-cacheGrace), sweepMarksPerShard)
	cancel()
	if err != nil {
		return 0, shardsql.Classify(op, h.Name, err)
	}
	n := 0
	for db, marks := range due {
		ids := make([]uint64, len(marks))
		for i, m := range marks {
			ids[i] = m.ID
		}
		if err := oc.cache.Invalidate(ctx, ids...); err != nil {
			return n, model.Wrap(op, model.EUnavailable, "redis did not take the invalidations", err)
		}
		oc.mu.Lock()
		oc.taken[db] = append(oc.taken[db], marks...)
		oc.mu.Unlock()
		n += len(marks)
	}
	return n, nil
}

// cachedObjects returns the live objects among ids (all of one type) in no
// particular order: from the cache where it has them, the rest from load
// (MySQL), which it then caches where this caller holds the lease. load
// reads under the ctx it is given, which sends its reads to masters
// (replica hook: a fill never comes from a replica, which may lack the
// write whose invalidation the lease came after).
func (s *core) cachedObjects(ctx context.Context, ids []uint64, load func(ctx context.Context, ids []uint64) ([]model.Object, error)) ([]model.Object, error) {
	oc := s.objects
	if !oc.on() || len(ids) == 0 {
		return load(ctx, ids)
	}
	mctx := replicas.OnMaster(ctx)
	cached, direct := oc.split(ids)
	var out []model.Object
	var leases map[uint64]objcache.Lease
	if len(cached) > 0 {
		hits, l, err := oc.cache.Get(ctx, cached)
		if err == nil {
			leases = l
			for _, id := range cached {
				if o, ok := hits[id]; ok {
					out = append(out, o)
				} else {
					direct = append(direct, id)
				}
			}
		} else {
			direct = append(direct, cached...)
		}
	}
	if len(direct) == 0 {
		return out, nil
	}
	loaded, err := load(mctx, direct)
	if err != nil {
		return nil, err
	}
	oc.cache.Fill(ctx, loaded, leases)
	return append(out, loaded...), nil
}
