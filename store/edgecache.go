package store

import (
	"context"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/objcache"
	"github.com/pinstore/pinstore/store/replicas"
	"github.com/pinstore/pinstore/store/topology"
)

// Edge checks (does this user like these pins, follow these users) are
// answered from the object cache's edges (objcache, edges.go) when it is
// on: one Redis round trip reads the user's entry and the edges asked,
// and only what the cache lacks is read from MySQL, on the master, then
// filled under the generation the read took.
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

// edgeCached reports whether HasMany answers m from the edge cache: the
// lists that say a viewer's state (a user's likes and following), which
// the item pages and edge routes check.
func edgeCached(m model.Mapping) bool { return m.ViewerEdge() != "" }

// cachedHasMany is HasMany from the edge cache; ok is false when the cache
// cannot answer (off, m not cached, from's invalidation pending, Redis
// away) and the caller reads MySQL.
func (s *Store) cachedHasMany(ctx context.Context, op string, sh topology.Shard, m model.Mapping, from, local uint64, tos []uint64) (out []bool, ok bool, err error) {
	oc := s.objects
	if !oc.on() || !edgeCached(m) || len(tos) == 0 || oc.pendingFor(from) {
		return nil, false, nil
	}
	r, err := oc.cache.ReadEdges(ctx, from, m, tos)
	if err != nil {
		return nil, false, nil
	}
	if !r.ObjectHit { // read (and filled) as any read by id
		if _, err := s.get(ctx, op, sh, from, local, m.From()); err != nil {
			return nil, true, err
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
		return out, true, nil
	}
	// A fill never comes from a replica, which may lack a write whose
	// invalidation the generation came after.
	has, err := s.readEdges(replicas.OnMaster(ctx), op, sh, m, from, missed)
	if err != nil {
		return nil, true, err
	}
	oc.cache.FillEdges(ctx, from, m, r.Gen, missed, has)
	j := 0
	for i, f := range r.Found {
		if f == objcache.EdgeUnknown {
			out[i] = has[j]
			j++
		}
	}
	return out, true, nil
}
