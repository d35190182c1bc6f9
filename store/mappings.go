package store

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// addEdge inserts from→to into m's table on sh and, when the row is new,
// bumps the list's count in the same transaction. Re-adding is a no-op.
func addEdge(ctx context.Context, x sqlx.ExecerContext, sh shard, m model.Mapping, from, to uint64, seq int64) (bool, error) {
	res, err := x.ExecContext(ctx, "INSERT IGNORE INTO "+sh.db+"."+m.Table()+" (from_id, to_id, sequence) VALUES (?, ?, ?)", from, to, seq)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	_, err = x.ExecContext(ctx, "INSERT INTO "+sh.db+".mapping_counts (from_id, mapping, n) VALUES (?, ?, 1) ON DUPLICATE KEY UPDATE n = n + 1", from, uint8(m))
	return err == nil, err
}

// listEntry names one list (m of from) that a new object joins.
type listEntry struct {
	m    model.Mapping
	from uint64
}

// addEdges adds to (at seq) to each list like addEdge, with one statement
// for the counts of the lists it joined instead of one per list: a new
// pin joins two lists in its create transaction.
func addEdges(ctx context.Context, x sqlx.ExecerContext, sh shard, to uint64, seq int64, lists ...listEntry) error {
	counts := make([]any, 0, 2*len(lists))
	for _, l := range lists {
		res, err := x.ExecContext(ctx, "INSERT IGNORE INTO "+sh.db+"."+l.m.Table()+" (from_id, to_id, sequence) VALUES (?, ?, ?)", l.from, to, seq)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n > 0 {
			counts = append(counts, l.from, uint8(l.m))
		}
	}
	if len(counts) == 0 {
		return nil
	}
	values := strings.Repeat(", (?, ?, 1)", len(counts)/2)[2:]
	_, err := x.ExecContext(ctx, "INSERT INTO "+sh.db+".mapping_counts (from_id, mapping, n) VALUES "+values+" ON DUPLICATE KEY UPDATE n = n + 1", counts...)
	return err
}

// removeEdge deletes from→to from m's table on sh and, when a row went,
// lowers the count in the same transaction.
func removeEdge(ctx context.Context, x sqlx.ExecerContext, sh shard, m model.Mapping, from, to uint64) (bool, error) {
	res, err := x.ExecContext(ctx, "DELETE FROM "+sh.db+"."+m.Table()+" WHERE from_id = ? AND to_id = ?", from, to)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	_, err = x.ExecContext(ctx, "UPDATE "+sh.db+".mapping_counts SET n = n - 1 WHERE from_id = ? AND mapping = ?", from, uint8(m))
	return err == nil, err
}

// pairRoute validates a mapping call: m must be known and, for writes, be
// one that clients may write (an inverse pair); from and to must be of
// m's types. The pair is returned forward side first.
func (s *Store) pairRoute(op string, m model.Mapping, from, to uint64) (fwd model.Mapping, f, t uint64, err error) {
	if !m.Valid() {
		return 0, 0, 0, model.Wrap(op, model.EInvalid, "unknown mapping", nil)
	}
	inv, ok := m.Inverse()
	if !ok {
		return 0, 0, 0, model.Wrap(op, model.EInvalid, m.String()+" is kept by creating and deleting objects", nil)
	}
	if _, _, err := s.resolve(op, from, m.From()); err != nil {
		return 0, 0, 0, err
	}
	if _, _, err := s.resolve(op, to, m.To()); err != nil {
		return 0, 0, 0, err
	}
	if m.Forward() {
		return m, from, to, nil
	}
	return inv, to, from, nil
}

// AddMapping adds from→to and its inverse: forward side first, each side
// in its own shard transaction, each idempotent. ENotFound when either
// object is not live.
func (s *Store) AddMapping(ctx context.Context, m model.Mapping, from, to uint64) error {
	const op = "store.AddMapping"
	fwd, f, t, err := s.pairRoute(op, m, from, to)
	if err != nil {
		return err
	}
	if fwd.From() == fwd.To() && f == t {
		return model.Wrap(op, model.EInvalid, "an object cannot be linked to itself", nil)
	}
	if _, err := s.Get(ctx, t, fwd.To()); err != nil {
		return err
	}
	fsh, fLocal, _ := s.resolve(op, f, fwd.From())
	seq := now().UnixMilli()
	err = s.inPairTx(ctx, op, fsh, func(tx *sqlx.Tx) error {
		if _, _, err := readLive(ctx, tx, op, fsh, fwd.From(), fLocal, " LOCK IN SHARE MODE"); err != nil {
			return err
		}
		_, err := addEdge(ctx, tx, fsh, fwd, f, t, seq)
		return err
	})
	if err != nil {
		return err
	}
	inv, _ := fwd.Inverse()
	tsh, tLocal, _ := s.resolve(op, t, inv.From())
	err = s.inPairTx(ctx, op, tsh, func(tx *sqlx.Tx) error {
		// The target's row lock orders this with a delete of the target:
		// either the inverse row commits before the delete does, and the
		// delete's drain removes the pair, or the target is seen deleted.
		if _, _, err := readLive(ctx, tx, op, tsh, fwd.To(), tLocal, " LOCK IN SHARE MODE"); err != nil {
			return err
		}
		_, err := addEdge(ctx, tx, tsh, inv, t, f, seq)
		return err
	})
	if model.IsCode(err, model.ENotFound) {
		// Deleted since the check above: take the forward row back (if this
		// fails too, repair removes rows that point at deleted objects).
		if rerr := s.inPairTx(ctx, op, fsh, func(tx *sqlx.Tx) error {
			_, err := removeEdge(ctx, tx, fsh, fwd, f, t)
			return err
		}); rerr != nil {
			return rerr
		}
	}
	if err == nil && fwd == model.UserFollowing {
		err = s.backfillFeed(ctx, op, f, t)
	}
	return err
}

// inPairTx runs one side of a pair's add or remove, which is idempotent,
// again when InnoDB picks it as a deadlock victim (it then rolled back
// whole): these small transactions meet the feed fan-out's shared locks on
// follow rows and each other's count rows.
func (s *Store) inPairTx(ctx context.Context, op string, sh shard, fn func(tx *sqlx.Tx) error) error {
	return retryDeadlock(func() error { return s.inTx(ctx, op, sh, fn) })
}

// RemoveMapping removes from→to and its inverse, forward side first.
// Removing an absent pair is a no-op. The objects need not be live.
func (s *Store) RemoveMapping(ctx context.Context, m model.Mapping, from, to uint64) error {
	const op = "store.RemoveMapping"
	fwd, f, t, err := s.pairRoute(op, m, from, to)
	if err != nil {
		return err
	}
	return s.removePair(ctx, op, fwd, f, t)
}

func (s *Store) removePair(ctx context.Context, op string, fwd model.Mapping, f, t uint64) error {
	inv, _ := fwd.Inverse()
	for _, side := range []struct {
		m        model.Mapping
		from, to uint64
	}{{fwd, f, t}, {inv, t, f}} {
		sh, _, err := s.resolve(op, side.from, side.m.From())
		if err != nil {
			return err
		}
		if err := s.inPairTx(ctx, op, sh, func(tx *sqlx.Tx) error {
			_, err := removeEdge(ctx, tx, sh, side.m, side.from, side.to)
			return err
		}); err != nil {
			return err
		}
		if side.m == model.UserFollowing {
			// The feed is on the follower's shard, like the forward row:
			// cleared before the inverse, which may be on a host that is down.
			if _, err := s.dropFeedAuthor(ctx, op, f, t); err != nil {
				return err
			}
		}
	}
	return nil
}

// List returns one page of from's list in m, ordered by (sequence, to_id),
// highest first when p.Desc. With a cursor the page is a keyset range scan
// (constant cost at any depth); with an offset it skips p.Offset entries.
// NextCursor continues after the page's last entry and is empty on the
// last page. ENotFound when from is not a live object of m's from type.
func (s *Store) List(ctx context.Context, m model.Mapping, from uint64, p model.Page) (model.List, error) {
	l, _, err := s.list(ctx, "store.List", m, from, p, false)
	return l, err
}

// ListObjects is List and the live objects of the page's entries, in page
// order (entries whose object is gone are left out). A list of the objects
// created under its owner (a board's pins, a user's boards or pins, a pin's
// comments) lives on the objects' shard: without an offset, its page and
// the objects come from one statement joining the list to their table.
// Other lists (and offset pages, where a join would read every skipped
// object) take List and then GetMany.
func (s *Store) ListObjects(ctx context.Context, m model.Mapping, from uint64, p model.Page) (model.List, []model.Object, error) {
	const op = "store.ListObjects"
	if m.Valid() && m.Colocated() && p.Offset == 0 {
		return s.list(ctx, op, m, from, p, true)
	}
	l, _, err := s.list(ctx, op, m, from, p, false)
	if err != nil || len(l.Entries) == 0 {
		return l, nil, err
	}
	objs, err := s.GetMany(ctx, entryIDs(l.Entries), m.To())
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
func (s *Store) list(ctx context.Context, op string, m model.Mapping, from uint64, p model.Page, withObjects bool) (model.List, []model.Object, error) {
	if !m.Valid() {
		return model.List{}, nil, model.Wrap(op, model.EInvalid, "unknown mapping", nil)
	}
	if err := p.Normalize(); err != nil {
		return model.List{}, nil, err
	}
	sh, local, err := s.resolve(op, from, m.From())
	if err != nil {
		return model.List{}, nil, err
	}
	var pos *cursorPos
	if p.Cursor != "" {
		c, err := s.cursor.decode(p.Cursor, uint8(m), from, p.Desc)
		if err != nil {
			return model.List{}, nil, err
		}
		pos = &c
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	// One read checks that the list's owner is live and reads the list's
	// length (batched with other requests' reads, pointread.go); a
	// statement of its own reads the page (and, withObjects, its objects).
	owner := pointRead{sh: sh, typ: m.From(), local: local, count: m, withCount: true}
	err = s.pointRead(ctx, &owner)
	if errors.Is(err, sql.ErrNoRows) || err == nil && !model.ActiveOf(owner.r.doc) {
		return model.List{}, nil, notFound(op, m.From())
	}
	if err != nil {
		return model.List{}, nil, classify(op, sh.host, err)
	}
	q, args := pageQuery(sh, m, from, p, pos, withObjects)
	var entries []model.Entry
	var objs []model.Object
	foreign := false
	if withObjects {
		entries, objs, foreign, err = scanEntryObjects(ctx, sh, m.To(), p.Limit, q, args...)
	} else {
		entries, err = scanEntries(ctx, sh.host.db, q, args...)
	}
	if err != nil {
		return model.List{}, nil, classify(op, sh.host, err)
	}
	l := s.page(entries, p, uint8(m), from)
	l.Count = owner.n
	if foreign {
		objs, err = s.GetMany(ctx, entryIDs(l.Entries), m.To())
	}
	return l, objs, err
}

// page trims a limit+1 result to the page and makes the next cursor.
func (s *Store) page(entries []model.Entry, p model.Page, kind uint8, from uint64) model.List {
	l := model.List{Entries: entries}
	if len(entries) > p.Limit {
		l.Entries = entries[:p.Limit]
		last := l.Entries[p.Limit-1]
		l.NextCursor = s.cursor.encode(cursorPos{kind: kind, desc: p.Desc, from: from, seq: last.Sequence, to: last.To})
	}
	return l
}

// pageQuery builds the statement for one page of limit+1 entries (e) and,
// withObjects, their objects (o, NULL when gone) from the same shard.
func pageQuery(sh shard, m model.Mapping, from uint64, p model.Page, pos *cursorPos, withObjects bool) (string, []any) {
	var b strings.Builder
	b.WriteString("SELECT e.to_id, e.sequence")
	if withObjects {
		b.WriteString(", o.doc, o.version, o.created_at, o.updated_at")
	}
	b.WriteString(" FROM ")
	b.WriteString(sh.db)
	b.WriteByte('.')
	b.WriteString(m.Table())
	b.WriteString(" e")
	if withObjects {
		// XOR with the shard and type bits leaves the local id of an id
		// of this shard and type, and a value above any local id otherwise.
		base := idcodec.MustEncode(uint32(sh.n), m.To(), 0)
		b.WriteString(" LEFT JOIN ")
		b.WriteString(sh.db)
		b.WriteByte('.')
		b.WriteString(objectTables[m.To()])
		b.WriteString(" o ON o.local_id = e.to_id ^ ")
		b.WriteString(strconv.FormatUint(base, 10))
	}
	b.WriteString(" WHERE e.from_id = ?")
	args := []any{from}
	if pos != nil {
		if p.Desc {
			b.WriteString(" AND e.sequence <= ? AND (e.sequence < ? OR e.to_id < ?)")
		} else {
			b.WriteString(" AND e.sequence >= ? AND (e.sequence > ? OR e.to_id > ?)")
		}
		args = append(args, pos.seq, pos.seq, pos.to)
	}
	if p.Desc {
		b.WriteString(" ORDER BY e.sequence DESC, e.to_id DESC LIMIT ?")
	} else {
		b.WriteString(" ORDER BY e.sequence, e.to_id LIMIT ?")
	}
	args = append(args, p.Limit+1)
	if p.Offset > 0 {
		b.WriteString(" OFFSET ?")
		args = append(args, p.Offset)
	}
	return b.String(), args
}

// scanEntryObjects reads a page query made withObjects: the entries, and
// the live objects of the first limit of them. foreign reports an entry
// that is not an object of this shard and type (pinstore never writes one
// into these lists); the caller then reads the objects with GetMany.
func scanEntryObjects(ctx context.Context, sh shard, typ idcodec.Type, limit int, query string, args ...any) (entries []model.Entry, objs []model.Object, foreign bool, err error) {
	rows, err := sh.host.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, nil, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var e model.Entry
		var doc []byte
		var version sql.NullInt64
		var created, updated sql.NullTime
		if err := rows.Scan(&e.To, &e.Sequence, &doc, &version, &created, &updated); err != nil {
			return nil, nil, false, err
		}
		entries = append(entries, e)
		if int(idcodec.ShardOf(e.To)) != sh.n || idcodec.TypeOf(e.To) != typ {
			foreign = true
		}
		if len(entries) <= limit && doc != nil && model.ActiveOf(doc) {
			objs = append(objs, model.Object{ID: e.To, Type: typ, Version: version.Int64, CreatedAt: created.Time, UpdatedAt: updated.Time, Doc: doc})
		}
	}
	return entries, objs, foreign, rows.Err()
}

func scanEntries(ctx context.Context, q sqlx.QueryerContext, query string, args ...any) ([]model.Entry, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []model.Entry
	for rows.Next() {
		var e model.Entry
		if err := rows.Scan(&e.To, &e.Sequence); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Count returns the length of from's list in m, kept by every add and
// remove in the same transaction, so it never scans.
func (s *Store) Count(ctx context.Context, m model.Mapping, from uint64) (int64, error) {
	const op = "store.Count"
	if !m.Valid() {
		return 0, model.Wrap(op, model.EInvalid, "unknown mapping", nil)
	}
	sh, _, err := s.resolve(op, from, m.From())
	if err != nil {
		return 0, err
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	var n int64
	err = sh.host.db.QueryRowContext(ctx, "SELECT n FROM "+sh.db+".mapping_counts WHERE from_id = ? AND mapping = ?", from, uint8(m)).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, classify(op, sh.host, err)
}

// Move puts item just before (before != 0) or just after (after != 0) an
// anchor entry of from's list, in newest-first display order, by giving
// item a sequence between the anchor and its neighbour. When the two are
// adjacent, the entries on the far side are shifted down by two to make
// room; the relative order of every other entry is kept. Only lists
// without an inverse (a board's pins) can be ordered by hand.
func (s *Store) Move(ctx context.Context, m model.Mapping, from, item, before, after uint64) error {
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
	sh, _, err := s.resolve(op, from, m.From())
	if err != nil {
		return err
	}
	for _, id := range []uint64{item, anchor} {
		if _, _, err := s.resolve(op, id, m.To()); err != nil {
			return err
		}
	}
	tbl := sh.db + "." + m.Table()
	return s.inTx(ctx, op, sh, func(tx *sqlx.Tx) error {
		// Lock both rows in one statement, in key order, so concurrent
		// moves on one list queue instead of deadlocking.
		locked, err := scanEntries(ctx, tx, "SELECT to_id, sequence FROM "+tbl+" WHERE from_id = ? AND to_id IN (?, ?) ORDER BY to_id FOR UPDATE", from, item, anchor)
		if err != nil {
			return err
		}
		var a *model.Entry
		found := 0
		for i := range locked {
			found++
			if locked[i].To == anchor {
				a = &locked[i]
			}
		}
		if found != 2 || a == nil {
			return model.Wrap(op, model.ENotFound, "not in this list", nil)
		}
		neighbour := func(x *model.Entry, up bool) (*model.Entry, error) {
			q := " AND sequence >= ? AND (sequence > ? OR to_id > ?) ORDER BY sequence, to_id"
			if !up {
				q = " AND sequence <= ? AND (sequence < ? OR to_id < ?) ORDER BY sequence DESC, to_id DESC"
			}
			var e model.Entry
			err := tx.QueryRowxContext(ctx, "SELECT to_id, sequence FROM "+tbl+" WHERE from_id = ? AND to_id <> ?"+q+" LIMIT 1 FOR UPDATE",
				from, item, x.Sequence, x.Sequence, x.To).Scan(&e.To, &e.Sequence)
			if errors.Is(err, sql.ErrNoRows) {
				return nil, nil
			}
			return &e, err
		}
		// Display order is newest first, so "before" is above the anchor in
		// (sequence, to_id) order.
		lo, hi := a, (*model.Entry)(nil)
		if before != 0 {
			hi, err = neighbour(a, true)
		} else {
			hi, lo = a, nil
			lo, err = neighbour(a, false)
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
			if _, err := tx.ExecContext(ctx, "UPDATE "+tbl+" SET sequence = sequence - 2 WHERE from_id = ? AND to_id <> ? AND (sequence < ? OR (sequence = ? AND to_id <= ?))",
				from, item, lo.Sequence, lo.Sequence, lo.To); err != nil {
				return err
			}
			seq = lo.Sequence - 1
		}
		_, err = tx.ExecContext(ctx, "UPDATE "+tbl+" SET sequence = ? WHERE from_id = ? AND to_id = ?", seq, from, item)
		return err
	})
}

// byHost groups ids by the host of their shard, then by shard.
type hostBatch struct {
	host   *host
	shards map[int][]uint64 // shard → ids, in first-seen order
	order  []int
}

func (s *Store) groupByHost(op string, ids []uint64, typ idcodec.Type) (map[*host]*hostBatch, error) {
	t := s.topo.Load()
	out := map[*host]*hostBatch{}
	for _, id := range ids {
		sh, err := t.route(int(idcodec.ShardOf(id)))
		if err != nil {
			return nil, model.Wrap(op, model.EInvalid, model.ErrorMessage(err), nil)
		}
		b := out[sh.host]
		if b == nil {
			b = &hostBatch{host: sh.host, shards: map[int][]uint64{}}
			out[sh.host] = b
		}
		if _, ok := b.shards[sh.n]; !ok {
			b.order = append(b.order, sh.n)
		}
		b.shards[sh.n] = append(b.shards[sh.n], id)
	}
	return out, nil
}

// eachHost runs fn for every batch concurrently and returns the first error.
func eachHost(groups map[*host]*hostBatch, fn func(b *hostBatch) error) error {
	if len(groups) == 1 {
		for _, b := range groups {
			return fn(b)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for _, b := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(b); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// MaxGetMany bounds one multi-get.
const MaxGetMany = 1000

// GetMany returns the live objects among ids, in request order; unknown,
// deleted or wrong-type ids are left out. It sends one statement per host:
// a UNION ALL of one primary-key IN (…) select per shard database.
func (s *Store) GetMany(ctx context.Context, ids []uint64, typ idcodec.Type) ([]model.Object, error) {
	const op = "store.GetMany"
	if len(ids) > MaxGetMany {
		return nil, model.Wrap(op, model.EInvalid, "too many ids", nil)
	}
	want := make([]uint64, 0, len(ids))
	for _, id := range ids {
		_, err := model.CheckID("id", id, typ)
		switch {
		case err == nil:
			want = append(want, id)
		case !model.IsCode(err, model.ENotFound): // of another type: not found, left out
			return nil, classify(op, nil, err)
		}
	}
	groups, err := s.groupByHost(op, want, typ)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	var mu sync.Mutex
	found := make(map[uint64]model.Object, len(want))
	err = eachHost(groups, func(b *hostBatch) error {
		var q strings.Builder
		args := make([]any, 0, len(want))
		for i, n := range b.order {
			if i > 0 {
				q.WriteString(" UNION ALL ")
			}
			q.WriteString("SELECT " + itoa(int64(n)) + ", local_id, doc, version, created_at, updated_at FROM " + s.topo.Load().names[n] + "." + objectTables[typ] + " WHERE local_id IN (")
			for j, id := range b.shards[n] {
				if j > 0 {
					q.WriteByte(',')
				}
				q.WriteByte('?')
				args = append(args, idcodec.LocalOf(id))
			}
			q.WriteByte(')')
		}
		rows, err := b.host.db.QueryContext(ctx, q.String(), args...)
		if err != nil {
			return classify(op, b.host, err)
		}
		defer rows.Close()
		for rows.Next() {
			var n int
			var r row
			if err := rows.Scan(&n, &r.local, &r.doc, &r.version, &r.created, &r.updated); err != nil {
				return classify(op, b.host, err)
			}
			if !model.ActiveOf(r.doc) {
				continue
			}
			o := r.object(shard{n: n}, typ)
			mu.Lock()
			found[o.ID] = o
			mu.Unlock()
		}
		return classify(op, b.host, rows.Err())
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
