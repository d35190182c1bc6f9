package store

import (
	"context"
	"slices"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/objcache"
	"github.com/pinstore/pinstore/store/replicas"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// The first page of a list (no cursor, offset or time range: the page a
// board, a profile or a pin's comments open on) is answered from the
// object cache when it is on (objcache, pages.go): one Redis round trip,
// shared with concurrent callers, reads the owner's entry (its liveness
// and the list's count) and the page's rows, and only a miss reads
// MySQL, on the master, then fills under the generation the read took.
//
// A page is never older than a write acknowledged before the read began,
// for the reason edges are not (edgecache.go): every statement that adds,
// removes or reorders a list's rows records the list's owner as changed
// in its transaction (shardsql's TestListRowWritesRecordTheirOwner), and
// the owner's invalidation, before the write is acknowledged, deletes the
// hash that holds its pages. While this process has not got an owner's
// invalidation into Redis, its pages of that owner read MySQL; on a Redis
// error a page reads MySQL and fills nothing. The page's objects are read
// by id afterwards, as every list's are.

// cachedFirstPage is list's first page from the cache; ok is false when
// the cache cannot answer (off, not a first page, the owner's
// invalidation pending, Redis away) and the caller reads MySQL. carried
// is m's index among its owner's counts, or -1: a list its owner does not
// count (a user's likes) keeps its length with the page.
func (s *Lists) cachedFirstPage(ctx context.Context, op string, sh topology.Shard, m model.Mapping, from, local uint64, p model.Page, q shardsql.Page, carried int) (l model.List, ok bool, err error) {
	oc := s.objects
	if !oc.on() || p.Cursor != "" || p.Offset != 0 || p.TimeRange() || oc.pendingFor(from) {
		return l, false, nil
	}
	field := objcache.PageField(m, q.Limit, p.Desc)
	r, err := oc.cache.ReadPage(ctx, from, field)
	if err != nil {
		return l, false, nil
	}
	owner := r.Object
	if !r.ObjectHit { // read (and filled) as any read by id, under the store's deadline
		if owner, err = s.get(ctx, op, sh, from, local, m.From()); err != nil {
			return l, true, err
		}
	}
	var count int64
	var entries []model.Entry
	if r.Page != nil {
		count, entries, err = objcache.DecodePage(r.Page)
	}
	if r.Page == nil || err != nil {
		if count, entries, err = s.readFirstPage(ctx, op, sh, m, from, local, q, carried); err != nil {
			return l, true, err
		}
		oc.cache.FillPage(ctx, from, r.Gen, field, objcache.EncodePage(count, entries))
	}
	l = s.page(entries, p, uint8(m), from)
	if carried < 0 {
		l.Count = count
	} else {
		l.Count, l.Secret = listCounts(owner.Counts, m, carried)
	}
	return l, true, nil
}

// readFirstPage reads a first page's rows from MySQL and, for a list its
// owner does not count (carried -1), the list's length; else count is -1.
// A fill never comes from a replica, which may lack a write whose
// invalidation the generation came after: both reads go to the master.
func (s *Lists) readFirstPage(ctx context.Context, op string, sh topology.Shard, m model.Mapping, from, local uint64, q shardsql.Page, carried int) (count int64, entries []model.Entry, err error) {
	ctx, cancel := s.deadline(replicas.OnMaster(ctx))
	defer cancel()
	count = -1
	if carried < 0 {
		owner, err := s.readPoint(ctx, op, sh, m.From(), local, m)
		if err != nil {
			return 0, nil, err
		}
		count = owner.N
	}
	if entries, err = shardsql.ReadPage(ctx, s.reader(ctx, sh).DB, sh.DB, m.Table(), from, q); err != nil {
		return 0, nil, classify(op, sh, err)
	}
	return count, entries, nil
}

// listCounts reads, from an owner's counts, the length of its list m (at
// carried) and how many of the list's entries are secret when the owner
// counts them apart (model.SecretCounted).
func listCounts(counts []int64, m model.Mapping, carried int) (count, secret int64) {
	if j := slices.Index(model.SecretCounted(m.From()), m); j >= 0 {
		secret = counts[len(model.Counted(m.From()))+j]
	}
	return counts[carried], secret
}
