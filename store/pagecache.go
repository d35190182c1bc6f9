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

// A page of a list, the first one (the page a board, a profile or a
// pin's comments open on) or one after a cursor (the next pages, whose
// cursors every reader scrolling the list is handed alike), is answered
// from the object cache when it is on (objcache, pages.go); a page with
// an offset or a time range is not. One Redis round trip, shared with
// concurrent callers, reads the owner's entry (its liveness and the
// list's count) and the page's rows, and only a miss reads MySQL, on the
// master, then fills under the generation the read took.
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

// cachedPage is a page of list m from the cache; ok is false when the
// cache cannot answer (off, a page with an offset or a time range, the
// owner's invalidation pending, Redis away) and the caller reads MySQL.
// carried is m's index among its owner's counts, or -1: a list its owner
// does not count (a user's likes) keeps its length with the page.
func (s *Lists) cachedPage(ctx context.Context, op string, sh topology.Shard, m model.Mapping, from, local uint64, p model.Page, q shardsql.Page, carried int) (l model.List, ok bool, err error) {
	oc := s.objects
	if !oc.on() || q.Offset != 0 || q.Min != nil || q.Max != nil || oc.pendingFor(from) {
		return l, false, nil
	}
	var after shardsql.Position // the first page: none
	if q.After != nil {
		after = *q.After
	}
	field := objcache.PageField(m, q.Limit, q.Desc, after.Seq, after.To)
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
		if count, entries, err = s.readPage(ctx, op, sh, m, from, local, q, carried); err != nil {
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

// readPage reads a cached page's rows from MySQL and, for a list its
// owner does not count (carried -1), the list's length; else count is -1.
// A fill never comes from a replica, which may lack a write whose
// invalidation the generation came after: both reads go to the master.
func (s *Lists) readPage(ctx context.Context, op string, sh topology.Shard, m model.Mapping, from, local uint64, q shardsql.Page, carried int) (count int64, entries []model.Entry, err error) {
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
