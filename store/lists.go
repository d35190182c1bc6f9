package store

import (
	"context"
	"slices"
	"sync"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/edgeread"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// Lists is the generic mapping lists: pages of a list (with or without
// its objects), counts, membership (from the edge cache when it is on:
// edgecache.go), moves, and adding and removing pairs with their inverses
// (pairs.go). A follow's feed rows ride on the pair's
// settle (Feeds).
type Lists struct {
	*core
	feeds *Feeds
}

// List returns one page of from's list in m, ordered by (sequence, to_id),
// highest first when p.Desc, with the list's length in Count. With a
// cursor the page is a keyset range scan (constant cost at any depth);
// with an offset it skips p.Offset entries. NextCursor continues after the
// page's last entry and is empty on the last page. ENotFound when from is
// not a live object of m's from type; EInvalid for a bad limit or cursor.
func (s *Lists) List(ctx context.Context, m model.Mapping, from uint64, p model.Page) (model.List, error) {
	l, _, err := s.list(ctx, "store.List", m, from, p, false)
	return l, err
}

// ListObjects is List and the live objects of the page's entries, in page
// order (entries whose object is gone are left out). A list of the objects
// created under its owner (a board's pins, a user's boards or pins, a pin's
// comments) lives on the objects' shard: without an offset, its page and
// the objects come from one statement joining the list to their table.
// Other lists (and offset pages, where a join would read every skipped
// object), and every list when the object cache is on, take List and then
// GetMany, which reads the objects from the cache.
func (s *Lists) ListObjects(ctx context.Context, m model.Mapping, from uint64, p model.Page) (model.List, []model.Object, error) {
	const op = "store.ListObjects"
	if m.Valid() && m.Colocated() && p.Offset == 0 && !s.objects.on() {
		return s.list(ctx, op, m, from, p, true)
	}
	l, _, err := s.list(ctx, op, m, from, p, false)
	if err != nil || len(l.Entries) == 0 {
		return l, nil, err
	}
	objs, err := s.objectsByID(ctx, entryIDs(l.Entries), m.To())
	return l, objs, err
}

func entryIDs(entries []model.Entry) []uint64 {
	ids := make([]uint64, len(entries))
	for i, e := range entries {
		ids[i] = e.To
	}
	return ids
}

// list reads a page of from's list in m and, withObjects, its objects by
// a join on the list's own shard (m must be Colocated).
func (s *Lists) list(ctx context.Context, op string, m model.Mapping, from uint64, p model.Page, withObjects bool) (model.List, []model.Object, error) {
	if !m.Valid() {
		return model.List{}, nil, model.Wrap(op, model.EInvalid, "unknown mapping", nil)
	}
	if err := p.Normalize(); err != nil {
		return model.List{}, nil, err
	}
	sh, local, err := s.route(op, from, m.From())
	if err != nil {
		return model.List{}, nil, err
	}
	q, err := s.pageOf(p, uint8(m), from)
	if err != nil {
		return model.List{}, nil, err
	}
	carried := slices.Index(model.Counted(m.From()), m)
	if !withObjects {
		if l, ok, err := s.cachedPage(ctx, op, sh, m, from, local, p, q, carried); ok { // pagecache.go
			return l, nil, err
		}
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	// One read checks that the list's owner is live and reads the list's
	// length (batched with other requests' reads, pointread); a statement
	// of its own reads the page (and, withObjects, its objects). The length
	// is among the owner's own counts, or asked for besides them.
	count, secret, err := s.listOwner(ctx, op, sh, m, from, local, carried)
	if err != nil {
		return model.List{}, nil, err
	}
	if p.TimeRange() && m.Colocated() {
		// Only a list without an inverse can be ordered by hand.
		hand, err := shardsql.HandOrdered(ctx, s.reader(ctx, sh).DB, sh.DB, m, from) // replica hook
		if err != nil {
			return model.List{}, nil, classify(op, sh, err)
		}
		if hand {
			return model.List{}, nil, model.Wrap(op, model.EInvalid, "this "+m.From().String()+"'s "+m.CountName()+
				" are in an order chosen by hand, not by time: since and until do not apply to it", nil)
		}
	}
	var entries []model.Entry
	var objs []model.Object
	foreign := false
	db := s.reader(ctx, sh).DB // replica hook
	if withObjects {
		entries, objs, foreign, err = shardsql.ReadPageObjects(ctx, db, sh.DB, m, from, q, p.Limit)
	} else {
		entries, err = shardsql.ReadPage(ctx, db, sh.DB, m.Table(), from, q)
	}
	if err != nil {
		return model.List{}, nil, classify(op, sh, err)
	}
	l := s.page(entries, p, uint8(m), from)
	l.Count, l.Secret = count, secret
	if foreign {
		objs, err = s.objectsByID(ctx, entryIDs(l.Entries), m.To())
	}
	return l, objs, err
}

// listOwner checks that a list's owner is live and returns the list's
// length, and how many of its entries are secret when the owner counts
// them apart (model.SecretCounted): carried is m's index among the
// owner's counts, or -1. When the owner carries it and the object cache
// is on, the cached owner answers; otherwise one read by id does (batched
// with other requests' reads, pointread), asking for the length besides
// the owner's counts when the owner does not carry it.
func (s *Lists) listOwner(ctx context.Context, op string, sh topology.Shard, m model.Mapping, from, local uint64, carried int) (count, secret int64, err error) {
	var counts []int64
	if carried >= 0 && s.objects.on() {
		owner, err := s.get(ctx, op, sh, from, local, m.From())
		if err != nil {
			return 0, 0, err
		}
		counts = owner.Counts
	} else {
		extra := m
		if carried >= 0 {
			extra = 0
		}
		owner, err := s.readPoint(ctx, op, sh, m.From(), local, extra)
		if err != nil {
			return 0, 0, err
		}
		if carried < 0 {
			return owner.N, 0, nil
		}
		counts = owner.Row.Counts
	}
	count, secret = listCounts(counts, m, carried)
	return count, secret, nil
}

// pageOf turns a page request on list kind of from into the rows to read:
// limit+1 of them (the one more says whether a next page exists), after
// the cursor's position when there is one (EInvalid when the cursor is not
// this list's), within the time range when there is one (sequences are
// milliseconds: [since, until) at millisecond resolution).
func (s *core) pageOf(p model.Page, kind uint8, from uint64) (shardsql.Page, error) {
	q := shardsql.Page{Limit: p.Limit + 1, Offset: p.Offset, Desc: p.Desc}
	if !p.Since.IsZero() {
		ms := p.Since.UnixMilli()
		q.Min = &ms
	}
	if !p.Until.IsZero() {
		ms := p.Until.UnixMilli()
		q.Max = &ms
	}
	if p.Cursor != "" {
		c, err := s.cursor.decode(p.Cursor, kind, from, p.Desc)
		if err != nil {
			return q, err
		}
		q.After = &shardsql.Position{Seq: c.seq, To: c.to}
	}
	return q, nil
}

// page trims a limit+1 result to the page and makes the next cursor.
func (s *core) page(entries []model.Entry, p model.Page, kind uint8, from uint64) model.List {
	l := model.List{Entries: entries}
	if len(entries) > p.Limit {
		l.Entries = entries[:p.Limit]
		last := l.Entries[p.Limit-1]
		l.NextCursor = s.cursor.encode(cursorPos{kind: kind, desc: p.Desc, from: from, seq: last.Sequence, to: last.To})
	}
	return l
}

// Count returns the length of from's list in m, kept by every add and
// remove in the same transaction, so it never scans.
func (s *Lists) Count(ctx context.Context, m model.Mapping, from uint64) (int64, error) {
	const op = "store.Count"
	if !m.Valid() {
		return 0, model.Wrap(op, model.EInvalid, "unknown mapping", nil)
	}
	sh, _, err := s.route(op, from, m.From())
	if err != nil {
		return 0, err
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	n, err := shardsql.Count(ctx, s.reader(ctx, sh).DB, sh.DB, m, from) // replica hook
	return n, classify(op, sh, err)
}

// Move puts item just before (before != 0) or just after (after != 0) an
// anchor entry of from's list, in newest-first display order, by giving
// item a sequence between the anchor and its neighbour. When the two are
// adjacent, the entries on the far side are shifted down by two to make
// room; the relative order of every other entry is kept. Only lists
// without an inverse (a board's pins) can be ordered by hand. ENotFound
// when item or the anchor is not in the list.
func (s *Lists) Move(ctx context.Context, m model.Mapping, from, item, before, after uint64) error {
	const op = "store.Move"
	if !m.Valid() {
		return model.Wrap(op, model.EInvalid, "unknown mapping", nil)
	}
	if _, ok := m.Inverse(); ok {
		return model.Wrap(op, model.EInvalid, m.String()+" cannot be ordered by hand", nil)
	}
	if (before == 0) == (after == 0) {
		return model.Wrap(op, model.EInvalid, "give exactly one of before and after", nil)
	}
	anchor := before + after
	if anchor == item {
		return model.Wrap(op, model.EInvalid, "an entry cannot be moved next to itself", nil)
	}
	sh, _, err := s.route(op, from, m.From())
	if err != nil {
		return err
	}
	for _, id := range []uint64{item, anchor} {
		if _, _, err := s.route(op, id, m.To()); err != nil {
			return err
		}
	}
	// Concurrent moves on one list queue on its order's lock; a move that
	// still meets a deadlock (with a create or a delete on the list) was
	// rolled back whole and runs again.
	return s.inRetryTx(ctx, op, sh, func(tx *shardsql.Tx) error {
		if err := shardsql.LockHandOrder(ctx, tx, sh.DB, m, from); err != nil {
			return err
		}
		// Lock both rows in one statement, in key order.
		locked, err := shardsql.LockEntries(ctx, tx, sh.DB, m, from, item, anchor)
		if err != nil {
			return err
		}
		var a *model.Entry
		for i := range locked {
			if locked[i].To == anchor {
				a = &locked[i]
			}
		}
		if len(locked) != 2 || a == nil {
			return model.Wrap(op, model.ENotFound, "not in this list", nil)
		}
		// Display order is newest first, so "before" is above the anchor in
		// (sequence, to_id) order.
		pos := shardsql.Position{Seq: a.Sequence, To: a.To}
		lo, hi := a, (*model.Entry)(nil)
		if before != 0 {
			hi, err = shardsql.Neighbour(ctx, tx, sh.DB, m, from, item, pos, false)
		} else {
			hi = a
			lo, err = shardsql.Neighbour(ctx, tx, sh.DB, m, from, item, pos, true)
		}
		if err != nil {
			return err
		}
		var seq int64
		switch {
		case hi == nil:
			seq = lo.Sequence + 1
		case lo == nil:
			seq = hi.Sequence - 1
		case hi.Sequence-lo.Sequence >= 2:
			seq = lo.Sequence + (hi.Sequence-lo.Sequence)/2
		default:
			if err := shardsql.ShiftDown(ctx, tx, sh.DB, m, from, item, shardsql.Position{Seq: lo.Sequence, To: lo.To}); err != nil {
				return err
			}
			seq = lo.Sequence - 1
		}
		return shardsql.SetSequence(ctx, tx, sh.DB, m, from, item, seq)
	})
}

// MaxHasMany bounds one HasMany.
const MaxHasMany = 250

// HasMany reports, for each of tos in order, whether from's list m holds
// it (does this user like these pins, follow these users): from the edge
// cache for a user's likes and following when the object cache is on
// (edgecache.go), else with one statement on from's shard. That from is
// live is read as any read by id is: from the object cache when it is on
// (never older than a write acknowledged before the call), else by a read
// on from's host. It does not read the objects of tos (HasManyLive does).
// ENotFound when from is not a live object of m's from type; EInvalid for
// a malformed id or more than MaxHasMany of them.
func (s *Lists) HasMany(ctx context.Context, m model.Mapping, from uint64, tos []uint64) ([]bool, error) {
	has, _, err := s.hasMany(ctx, m, from, tos, false)
	return has, err
}

// HasManyLive is HasMany with the objects of the edges it finds, for a
// caller that must not report an edge to an object that is gone (its
// removal from the list may still be on its way, Delete) or that the
// caller may not see: has[i] is true when the list holds tos[i] and its
// object is live, and objs[i] is then that object, read as any read by id
// is. With the edge cache on, the objects the cache holds come in the
// edges' own round trip; the rest are read by id (GetMany).
func (s *Lists) HasManyLive(ctx context.Context, m model.Mapping, from uint64, tos []uint64) (has []bool, objs []model.Object, err error) {
	has, objs, err = s.hasMany(ctx, m, from, tos, true)
	if err != nil {
		return nil, nil, err
	}
	if objs == nil {
		objs = make([]model.Object, len(tos))
	}
	var read []uint64
	for i, to := range tos {
		if has[i] && objs[i].ID == 0 {
			read = append(read, to)
		}
	}
	if len(read) == 0 {
		return has, objs, nil
	}
	found, err := s.objectsByID(ctx, read, m.To())
	if err != nil {
		return nil, nil, err
	}
	byID := make(map[uint64]model.Object, len(found))
	for _, o := range found {
		byID[o.ID] = o
	}
	for i, to := range tos {
		if has[i] && objs[i].ID == 0 {
			objs[i] = byID[to]
			has[i] = objs[i].ID != 0
		}
	}
	return has, objs, nil
}

// hasMany is HasMany, and with objects the entries of tos the object
// cache returned with the edges (ID 0 for the others; nil when the edges
// did not come from the cache).
func (s *Lists) hasMany(ctx context.Context, m model.Mapping, from uint64, tos []uint64, objects bool) ([]bool, []model.Object, error) {
	const op = "store.HasMany"
	if !m.Valid() {
		return nil, nil, model.Wrap(op, model.EInvalid, "unknown mapping", nil)
	}
	if len(tos) > MaxHasMany {
		return nil, nil, model.Wrap(op, model.EInvalid, "too many ids", nil)
	}
	sh, local, err := s.route(op, from, m.From())
	if err != nil {
		return nil, nil, err
	}
	for _, id := range tos {
		if _, err := model.CheckID("id", id, 0); err != nil {
			return nil, nil, shardsql.Classify(op, "", err)
		}
	}
	if out, objs, ok, err := s.cachedHasMany(ctx, op, sh, m, from, local, tos, objects); ok { // edgecache.go
		return out, objs, err
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	if _, err := s.get(ctx, op, sh, from, local, m.From()); err != nil {
		return nil, nil, err
	}
	out, err := s.readEdges(ctx, op, sh, m, from, tos)
	return out, nil, err
}

// readEdges reads from MySQL whether from's list m holds each of tos, in
// order, with the edge checks of other callers on the same pool
// (edgeread).
func (s *Lists) readEdges(ctx context.Context, op string, sh topology.Shard, m model.Mapping, from uint64, tos []uint64) ([]bool, error) {
	out := make([]bool, len(tos))
	if len(tos) == 0 {
		return out, nil
	}
	c := &edgeread.Check{Listed: shardsql.Listed{DB: sh.DB, M: m, From: from, Tos: tos}}
	if err := s.reader(ctx, sh).Edges.Do(ctx, c); err != nil { // replica hook
		return nil, classify(op, sh, err)
	}
	for i, id := range tos {
		out[i] = c.Found[id]
	}
	return out, nil
}

// MaxGetMany bounds one multi-get.
const MaxGetMany = 1000

// objectsByID is GetMany for every part of the store: the live objects
// among ids, in request order. The object cache answers what it holds; for
// the rest it sends one statement per host: a UNION ALL of one primary-key
// IN (…) select per shard database.
func (s *core) objectsByID(ctx context.Context, ids []uint64, typ idcodec.Type) ([]model.Object, error) {
	const op = "store.GetMany"
	if len(ids) > MaxGetMany {
		return nil, model.Wrap(op, model.EInvalid, "too many ids", nil)
	}
	if !s.objects.on() {
		return s.getMany(ctx, op, ids, typ)
	}
	want := make([]uint64, 0, len(ids))
	seen := make(map[uint64]bool, len(ids))
	for _, id := range ids {
		if _, err := model.CheckID("id", id, typ); err != nil {
			if model.IsCode(err, model.ENotFound) { // of another type: not found, left out
				continue
			}
			return nil, shardsql.Classify(op, "", err)
		}
		if !seen[id] {
			seen[id] = true
			want = append(want, id)
		}
	}
	objs, err := s.cachedObjects(ctx, want, func(ctx context.Context, ids []uint64) ([]model.Object, error) {
		return s.getMany(ctx, op, ids, typ)
	})
	if err != nil {
		return nil, err
	}
	byID := make(map[uint64]model.Object, len(objs))
	for _, o := range objs {
		byID[o.ID] = o
	}
	out := make([]model.Object, 0, len(objs))
	for _, id := range ids {
		if o, ok := byID[id]; ok {
			out = append(out, o)
		}
	}
	return out, nil
}

// getMany is GetMany from MySQL alone.
func (s *core) getMany(ctx context.Context, op string, ids []uint64, typ idcodec.Type) ([]model.Object, error) {
	t := s.router.Current()
	byHost := map[*topology.Host][]shardsql.ObjectSelect{}
	for _, id := range ids {
		sh, local, err := t.Route(id, typ)
		switch {
		case model.IsCode(err, model.ENotFound): // of another type: not found, left out
			continue
		case err != nil:
			return nil, shardsql.Classify(op, "", err)
		}
		parts := byHost[sh.Host]
		i := 0
		for i < len(parts) && parts[i].DB != sh.DB {
			i++
		}
		if i == len(parts) {
			parts = append(parts, shardsql.ObjectSelect{DB: sh.DB, Type: typ})
		}
		parts[i].Locals = append(parts[i].Locals, local)
		byHost[sh.Host] = parts
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	var mu sync.Mutex
	found := make(map[uint64]model.Object, len(ids))
	err := eachHost(byHost, func(h *topology.Host, parts []shardsql.ObjectSelect) error {
		err := shardsql.ReadObjects(ctx, s.hostReader(ctx, h).DB, parts, func(i int, r shardsql.Row, _ int64) { // replica hook
			if !r.Flags.Active() {
				return
			}
			o := r.Object(parts[i].DB, typ)
			mu.Lock()
			found[o.ID] = o
			mu.Unlock()
		})
		return shardsql.Classify(op, h.Name, err)
	})
	if err != nil {
		return nil, err
	}
	out := make([]model.Object, 0, len(found))
	for _, id := range ids {
		if o, ok := found[id]; ok {
			out = append(out, o)
		}
	}
	return out, nil
}

// eachHost runs fn for every host's work concurrently and returns the
// first error.
func eachHost[W any](work map[*topology.Host]W, fn func(h *topology.Host, w W) error) error {
	if len(work) == 1 {
		for h, w := range work {
			return fn(h, w)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for h, w := range work {
		wg.Go(func() {
			if err := fn(h, w); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}
