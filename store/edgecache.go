package store

import (
	"context"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/objcache"
	"github.com/pinstore/pinstore/store/replicas"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// Edge checks (does this user like these pins, follow these users) are
// answered from the object cache's edges (objcache, edges.go) when it is
// on: one Redis round trip reads the user's entry and the edges asked
// (and for HasManyLive the entries of the objects checked), and only what
// the cache lacks is read from MySQL, on the master, then
// filled under the generation the read took. A short list (DefaultWholeList)
// is read and cached whole, so that checks of entries it does not hold
// hit as well.
//
// They are never older than a write acknowledged before the check began,
// because the edges are invalidated with their owner's entry and nothing
// can change an edge without invalidating its owner: every row of a list
// is added or removed by shardsql's AddEdge, AddEdges, RemoveEdge or
// RemoveList, each of which changes the owner's count of the list
// (mapping_counts) in the same transaction, which records the owner in
// the shard's cache_outbox and invalidates it after the commit, before
// the write is acknowledged (cache.go; shardsql's
// TestListRowWritesRecordTheirOwner checks the package for any other
// write to a list's rows). Deletes' drains, pair heals and repairs go
// through those functions in transactions of txOn; a reshard copies rows
// to a host that serves them only after the cut-over, with their owners'
// entries unchanged. While this process has not got an owner's
// invalidation into Redis (pending), its checks of that owner read MySQL,
// as its object reads do; on a Redis error a check reads MySQL and fills
// nothing.

// DefaultWholeList is the longest list the edge cache holds whole unless
// configured (ObjectCacheConfig.WholeList). A list held whole answers
// every check of its owner, those of entries it does not hold included,
// until the owner's next invalidation; a longer one is cached entry by
// entry as checks ask.
const DefaultWholeList = 512

// wholeList is the longest list the edge cache holds whole; 0 for none.
func (s *Lists) wholeList() int { return wholeListOf(s.cfg.ObjectCache) }

func wholeListOf(cfg ObjectCacheConfig) int {
	switch n := cfg.WholeList; {
	case n < 0:
		return 0
	case n == 0:
		return DefaultWholeList
	default:
		return n
	}
}

// edgeHashSize is the size of an owner's hash of edges and pages
// (objcache.Options.HashSize): the one configured, or when lists are held
// whole beyond it, room for all of a user's edge-cached lists held whole
// taking at most half of it (an edge's field and value are at most 25
// bytes).
func edgeHashSize(cfg ObjectCacheConfig) int {
	edgeLists := 0
	for _, m := range model.Mappings() {
		if edgeCached(m) && m.From() == idcodec.TypeUser {
			edgeLists++
		}
	}
	size := cfg.HashSize
	if size <= 0 {
		size = objcache.DefaultHashSize
	}
	return max(size, 2*edgeLists*25*wholeListOf(cfg))
}

// edgeCached reports whether HasMany answers m from the edge cache: the
// lists that say a viewer's state (a user's likes and following), which
// the item pages and edge routes check.
func edgeCached(m model.Mapping) bool { return m.ViewerEdge() != "" }

// edgeOwnerTypes are the types whose objects own a list, and so may have
// an edge hash (edge-cached lists' owners, and the pages of any list,
// pagecache.go): only their invalidations drop one.
var edgeOwnerTypes = func() (out [model.TypeSlots]bool) {
	for _, m := range model.Mappings() {
		out[m.From()] = true
	}
	return out
}()

// edgeOwner reports whether id's object may have an edge hash.
func edgeOwner(id uint64) bool {
	t := idcodec.TypeOf(id)
	return int(t) < len(edgeOwnerTypes) && edgeOwnerTypes[t]
}

// cachedHasMany is HasMany from the edge cache; ok is false when the cache
// cannot answer (off, m not cached, from's invalidation pending, Redis
// away) and the caller reads MySQL. With objects it also returns the
// entries of tos the cache holds, read in the same round trip (ID 0 where
// it has none, or where this process has not got the object's
// invalidation into Redis).
func (s *Lists) cachedHasMany(ctx context.Context, op string, sh topology.Shard, m model.Mapping, from, local uint64, tos []uint64, objects bool) (out []bool, objs []model.Object, ok bool, err error) {
	oc := s.objects
	if !oc.on() || !edgeCached(m) || len(tos) == 0 || oc.pendingFor(from) {
		return nil, nil, false, nil
	}
	var pending []uint64 // checked before the read: a later check could miss a stale entry's resent invalidation
	if objects {
		_, pending = oc.split(tos)
	}
	r, err := oc.cache.ReadEdges(ctx, from, m, tos, objects)
	if err != nil {
		return nil, nil, false, nil
	}
	objs = r.Objects
	for _, id := range pending {
		for i, to := range tos {
			if to == id {
				objs[i] = model.Object{}
			}
		}
	}
	if !r.ObjectHit { // read (and filled) as any read by id, under the store's deadline
		if _, err := s.get(ctx, op, sh, from, local, m.From()); err != nil {
			return nil, nil, true, err
		}
	}
	out = make([]bool, len(tos))
	var missed []uint64
	for i, f := range r.Found {
		switch f {
		case objcache.EdgePresent:
			out[i] = true
		case objcache.EdgeUnknown:
			missed = append(missed, tos[i])
		}
	}
	if len(missed) == 0 {
		return out, objs, true, nil
	}
	// A fill never comes from a replica, which may lack a write whose
	// invalidation the generation came after. The cache's round trips
	// are bounded by its own timeout; MySQL's by the store's deadline.
	mctx, cancel := s.deadline(replicas.OnMaster(ctx))
	defer cancel()
	var has []bool
	if r.Whole == objcache.EdgeUnknown && s.wholeList() > 0 {
		if has, err = s.fillWholeList(mctx, op, sh, m, from, r.Gen, missed); err != nil {
			return nil, nil, true, err
		}
	}
	if has == nil {
		if has, err = s.readEdges(mctx, op, sh, m, from, missed); err != nil {
			return nil, nil, true, err
		}
		oc.cache.FillEdges(ctx, from, m, r.Gen, missed, has, objcache.EdgeUnknown)
	}
	j := 0
	for i, f := range r.Found {
		if f == objcache.EdgeUnknown {
			out[i] = has[j]
			j++
		}
	}
	return out, objs, true, nil
}

// fillWholeList reads from's list m whole when it has at most wholeList
// entries, caches it whole under gen and returns whether it holds each of
// tos; for a longer list it caches that it is, and returns nil.
func (s *Lists) fillWholeList(ctx context.Context, op string, sh topology.Shard, m model.Mapping, from uint64, gen objcache.Lease, tos []uint64) ([]bool, error) {
	ids, err := shardsql.ReadIDsAfter(ctx, s.reader(ctx, sh).DB, sh.DB, m, from, 0, s.wholeList()+1) // replica hook: ctx is on the master
	if err != nil {
		return nil, classify(op, sh, err)
	}
	oc := s.objects.cache
	if len(ids) > s.wholeList() {
		oc.FillEdges(ctx, from, m, gen, nil, nil, objcache.EdgeAbsent)
		return nil, nil
	}
	held := make([]bool, len(ids))
	in := make(map[uint64]bool, len(ids))
	for i, id := range ids {
		held[i], in[id] = true, true
	}
	oc.FillEdges(ctx, from, m, gen, ids, held, objcache.EdgePresent)
	has := make([]bool, len(tos))
	for i, id := range tos {
		has[i] = in[id]
	}
	return has, nil
}
