package shardsql

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// The statements of mapping tables and mapping_counts.
var (
	insertEdge    = perMapping("INSERT IGNORE INTO {db}.{table} (from_id, to_id, sequence) VALUES (?, ?, ?)")
	deleteEdge    = perMapping("DELETE FROM {db}.{table} WHERE from_id = ? AND to_id = ?")
	raiseCount    = declare("INSERT INTO {db}.mapping_counts (from_id, mapping, n) VALUES (?, ?, 1) ON DUPLICATE KEY UPDATE n = n + 1")
	insertNewEdge = perMapping("INSERT INTO {db}.{table} (from_id, to_id, sequence) VALUES (?, ?, ?)")
	insertNewVar  = perMapping("INSERT INTO {db}.{table} (from_id, to_id, sequence) VALUES (?, " + newIDVar + ", ?)")
	addCounts     = declare("INSERT INTO {db}.mapping_counts (from_id, mapping, n) VALUES ")
	lowerCount    = declare("UPDATE {db}.mapping_counts SET n = n - 1 WHERE from_id = ? AND mapping = ?")
	addCount      = declare("INSERT INTO {db}.mapping_counts (from_id, mapping, n) VALUES (?, ?, ?)" + addCountsEnd)
	readCount     = perLock("SELECT n FROM {db}.mapping_counts WHERE from_id = ? AND mapping = ?")
	allEntries    = perMapping("SELECT to_id, sequence FROM {db}.{table} WHERE from_id = ?")
	idsAfter      = perMapping("SELECT to_id FROM {db}.{table} WHERE from_id = ? AND to_id > ? ORDER BY to_id LIMIT ?")
	lockEntries   = perMapping("SELECT to_id, sequence FROM {db}.{table} WHERE from_id = ? AND to_id IN (")
	neighbourUp   = perMapping("SELECT to_id, sequence FROM {db}.{table} WHERE from_id = ? AND to_id <> ?" + keyset("", false) + order("", false) + " LIMIT 1 FOR UPDATE")
	neighbourDown = perMapping("SELECT to_id, sequence FROM {db}.{table} WHERE from_id = ? AND to_id <> ?" + keyset("", true) + order("", true) + " LIMIT 1 FOR UPDATE")
	shiftDown     = perMapping("UPDATE {db}.{table} SET sequence = sequence - 2 WHERE from_id = ? AND to_id <> ? AND (sequence < ? OR (sequence = ? AND to_id <= ?))")
	setSequence   = perMapping("UPDATE {db}.{table} SET sequence = ? WHERE from_id = ? AND to_id = ?")
	scanPairs     = perListTable("SELECT from_id, to_id, sequence FROM {db}.{table} WHERE from_id > ? OR (from_id = ? AND to_id > ?) ORDER BY from_id, to_id LIMIT ?")
	existingPairs = perMapping("SELECT from_id, to_id FROM {db}.{table} WHERE (from_id, to_id) IN (")
	lockHandOrder = declare("INSERT INTO {db}.hand_ordered (from_id, mapping) VALUES (?, ?) ON DUPLICATE KEY UPDATE mapping = mapping")
	handOrdered   = declare("SELECT 1 FROM {db}.hand_ordered WHERE from_id = ? AND mapping = ?")
	page          = perListTable("SELECT e.to_id, e.sequence FROM {db}.{table} e WHERE e.from_id = ?")
	pageObjects   = perMappingObjects()
	lowestSeq     = perMapping("SELECT sequence FROM {db}.{table} WHERE from_id = ?" + order("", false) + " LIMIT 1 FOR UPDATE")
	removeList    = perMapping("DELETE FROM {db}.{table} WHERE from_id = ?")
	removeCount   = declare("DELETE FROM {db}.mapping_counts WHERE from_id = ? AND mapping = ?")
)

// perMappingObjects declares, for every mapping, the head of a page of
// its list joined to the rows of the objects listed (o, NULL when gone)
// on the same shard, with their counts.
func perMappingObjects() mappingStmt {
	var s mappingStmt
	for _, m := range model.Mappings() {
		for int(m) >= len(s) {
			s = append(s, 0)
		}
		typ := m.To()
		var b strings.Builder
		b.WriteString("SELECT e.to_id, e.sequence, o.doc, COALESCE(o.flags, 0), o.version, o.created_at, o.updated_at")
		countColumns(&b, typ, "o.local_id", 0, len(model.CountKeys(typ)))
		// XOR with the shard and type bits leaves the local id of an id
		// of this shard and type, and a value above any local id otherwise.
		b.WriteString(" FROM {db}." + m.Table() + " e LEFT JOIN {db}." + objectTables[typ] + " o ON o.local_id = e.to_id ^ " + base(typ) + " WHERE e.from_id = ?")
		s[m] = declare(b.String())
	}
	return s
}

// addCountsEnd ends the rows of addCounts (and addCount's one): each adds
// its n to the count.
const addCountsEnd = " ON DUPLICATE KEY UPDATE n = n + VALUES(n)"

// AddEdge inserts from→to into m's table and, when the row is new, raises
// the list's count in the same transaction (t records from as changed).
// Re-adding is a no-op (false).
func AddEdge(ctx context.Context, t *Tx, db DB, m model.Mapping, from, to uint64, seq int64) (bool, error) {
	res, err := t.ExecContext(ctx, db.sql(insertEdge.of(m)), from, to, seq)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	_, err = t.change(ctx, []uint64{from}, db.sql(raiseCount), from, uint8(m))
	return err == nil, err
}

// ListRef names one list: m of from.
type ListRef struct {
	M    model.Mapping
	From uint64
}

// AddEdges adds to, an object its transaction has just inserted (as a
// rule NewObject, the insert still queued with these statements), at seq
// to each of lists (a new pin joins its board's and owner's lists in its
// create transaction), and counts it: each list's count rises by one and,
// for each list in secret too, its count of secret entries
// (model.SecretKey). A new object is on no list yet, so each insert is
// plain (a row already there fails the transaction instead of leaving a
// count wrong), and all the counts go in one statement. The statements
// are queued (later.go), with no round trip of their own; t records every
// list's owner as changed.
func AddEdges(ctx context.Context, t *Tx, db DB, to Ref, seq int64, lists, secret []ListRef) error {
	if len(lists) == 0 {
		return nil
	}
	owners := make([]uint64, 0, len(lists))
	counts := make([]any, 0, 3*(len(lists)+len(secret)))
	for _, l := range lists {
		st, err := to.pick(t, insertNewEdge.of(l.M), insertNewVar.of(l.M))
		if err != nil {
			return err
		}
		if err := later(ctx, t, db.sql(st), append(to.arg([]any{l.From}), seq)...); err != nil {
			return err
		}
		owners = append(owners, l.From)
		counts = append(counts, l.From, uint8(l.M), 1)
	}
	for _, l := range secret {
		counts = append(counts, l.From, model.SecretKey(l.M), 1)
	}
	return t.changeLater(ctx, owners, placeholders(db.sql(addCounts), len(counts)/3, "(?, ?, ?)", addCountsEnd), counts...)
}

// RemoveEdge deletes from→to from m's table and, when a row went, lowers
// the count in the same transaction (t records from as changed). Removing
// an absent row is a no-op.
func RemoveEdge(ctx context.Context, t *Tx, db DB, m model.Mapping, from, to uint64) (bool, error) {
	res, err := t.ExecContext(ctx, db.sql(deleteEdge.of(m)), from, to)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	_, err = t.change(ctx, []uint64{from}, db.sql(lowerCount), from, uint8(m))
	return err == nil, err
}

// AddSecret changes by delta the number of secret entries of from's list
// m (model.SecretKey), in the transaction that changes them; t records
// from as changed.
func AddSecret(ctx context.Context, t *Tx, db DB, m model.Mapping, from uint64, delta int64) error {
	if delta == 0 {
		return nil
	}
	return t.changeLater(ctx, []uint64{from}, db.sql(addCount), from, model.SecretKey(m), delta)
}

// Count reads the length of from's list m (0 when it never had a row).
func Count(ctx context.Context, q sqlx.QueryerContext, db DB, m model.Mapping, from uint64) (int64, error) {
	return CountLocked(ctx, q, db, m, from, NoLock)
}

// CountLocked is Count reading the count's row with the lock given.
func CountLocked(ctx context.Context, q sqlx.QueryerContext, db DB, m model.Mapping, from uint64, lock Lock) (int64, error) {
	var n int64
	err := q.QueryRowxContext(ctx, db.sql(readCount[lock]), from, uint8(m)).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// Position is a place in a list's (sequence, to_id) order: the last entry
// of the page before.
type Position struct {
	Seq int64
	To  uint64
}

// keyset is the predicate "after pos in this order" on the columns
// sequence and to_id of alias (with its dot, or ""), taking the arguments
// pos.Seq, pos.Seq, pos.To. It is the whole of keyset paging: with the
// index (from_id, sequence, to_id) a page after any position is a range
// scan of limit rows, at any depth.
func keyset(alias string, desc bool) string {
	if desc {
		return " AND " + alias + "sequence <= ? AND (" + alias + "sequence < ? OR " + alias + "to_id < ?)"
	}
	return " AND " + alias + "sequence >= ? AND (" + alias + "sequence > ? OR " + alias + "to_id > ?)"
}

// order is the ORDER BY of a list in (sequence, to_id) order.
func order(alias string, desc bool) string {
	if desc {
		return " ORDER BY " + alias + "sequence DESC, " + alias + "to_id DESC"
	}
	return " ORDER BY " + alias + "sequence, " + alias + "to_id"
}

// Page asks for rows of one list table in (sequence, to_id) order.
type Page struct {
	Limit  int       // rows to read (ask one more than a page to learn whether more follow)
	Offset int       // rows to skip first (costs O(offset))
	Desc   bool      // highest sequence first
	After  *Position // keyset: only rows after this one in the page's order
	// Sequences in [Min, Max) only, when set: a time range (a sequence is
	// the time an entry was added, in milliseconds). Still a range scan of
	// the index (from_id, sequence, to_id).
	Min, Max *int64
}

// bounds writes a page's sequence range on alias's sequence column.
func (p Page) bounds(b *strings.Builder, args []any, alias string) []any {
	if p.Min != nil {
		b.WriteString(" AND " + alias + "sequence >= ?")
		args = append(args, *p.Min)
	}
	if p.Max != nil {
		b.WriteString(" AND " + alias + "sequence < ?")
		args = append(args, *p.Max)
	}
	return args
}

// pageTail is the rest of a page's statement after its head (the rows
// of one from_id): its range, keyset, order, limit and offset, declared
// once for each combination (pageTails).
func (p Page) tail() string {
	k := 0
	if p.Min != nil {
		k |= 1
	}
	if p.Max != nil {
		k |= 2
	}
	if p.After != nil {
		k |= 4
	}
	if p.Desc {
		k |= 8
	}
	if p.Offset > 0 {
		k |= 16
	}
	return pageTails[k]
}

// pageTails are Page.tail's texts, by combination.
var pageTails = func() (t [32]string) {
	for k := range t {
		s := ""
		if k&1 != 0 {
			s += " AND e.sequence >= ?"
		}
		if k&2 != 0 {
			s += " AND e.sequence < ?"
		}
		if k&4 != 0 {
			s += keyset("e.", k&8 != 0)
		}
		s += order("e.", k&8 != 0) + " LIMIT ?"
		if k&16 != 0 {
			s += " OFFSET ?"
		}
		t[k] = s
	}
	return t
}()

// args returns the arguments of a page of from's rows: from's, then
// those of its tail.
func (p Page) args(from uint64) []any {
	args := make([]any, 1, 8)
	args[0] = from
	if p.Min != nil {
		args = append(args, *p.Min)
	}
	if p.Max != nil {
		args = append(args, *p.Max)
	}
	if p.After != nil {
		args = append(args, p.After.Seq, p.After.Seq, p.After.To)
	}
	args = append(args, p.Limit)
	if p.Offset > 0 {
		args = append(args, p.Offset)
	}
	return args
}

// ReadPage reads one page of from's rows of a list table (a mapping's
// table or the feed).
func ReadPage(ctx context.Context, q sqlx.QueryerContext, db DB, table string, from uint64, p Page) ([]Entry, error) {
	s, err := page.of(table)
	if err != nil {
		return nil, err
	}
	return scanEntries(ctx, q, db.sql(s)+p.tail(), p.args(from)...)
}

// ReadPageObjects reads one page of from's list m with the live objects of
// its first want entries, in one statement joining the list to their
// table on the same shard (m must list objects created under from, which
// live on its shard). foreign reports an entry that is not an object of
// this shard and m's type (pinstore never writes one into these lists);
// the caller then reads the objects by id.
func ReadPageObjects(ctx context.Context, q sqlx.QueryerContext, db DB, m model.Mapping, from uint64, p Page, want int) (entries []Entry, objs []model.Object, foreign bool, err error) {
	typ := m.To()
	rows, err := q.QueryContext(ctx, db.sql(pageObjects.of(m))+p.tail(), p.args(from)...)
	if err != nil {
		return nil, nil, false, err
	}
	defer rows.Close()
	pad := len(model.CountKeys(typ))
	for rows.Next() {
		var e Entry
		var r Row
		var doc []byte
		var flags model.Flags
		var version sql.NullInt64
		var created, updated sql.NullTime
		var unused int64
		counts, fill := countDest(typ, pad, &unused)
		if err := rows.Scan(append([]any{&e.To, &e.Sequence, &doc, &flags, &version, &created, &updated}, counts...)...); err != nil {
			return nil, nil, false, err
		}
		entries = append(entries, e)
		if int(idcodec.ShardOf(e.To)) != db.N || idcodec.TypeOf(e.To) != typ {
			foreign = true
		}
		if len(entries) <= want && doc != nil && flags.Active() {
			fill(&r)
			objs = append(objs, model.Object{ID: e.To, Type: typ, Version: version.Int64, CreatedAt: created.Time, UpdatedAt: updated.Time, Doc: doc, Counts: r.Counts, Flags: flags})
		}
	}
	return entries, objs, foreign, rows.Err()
}

// ReadAllEntries reads every row of from's list m, in no particular
// order; for lists bounded by their owner (a board's pins).
func ReadAllEntries(ctx context.Context, q sqlx.QueryerContext, db DB, m model.Mapping, from uint64) ([]Entry, error) {
	return scanEntries(ctx, q, db.sql(allEntries.of(m)), from)
}

// ReadIDsAfter reads up to n of from's to_ids in m above after, in to_id
// order: a whole list read in pages by primary key.
func ReadIDsAfter(ctx context.Context, q sqlx.QueryerContext, db DB, m model.Mapping, from, after uint64, n int) ([]uint64, error) {
	var ids []uint64
	err := sqlx.SelectContext(ctx, q, &ids, db.sql(idsAfter.of(m)), from, after, n)
	return ids, err
}

func scanEntries(ctx context.Context, q sqlx.QueryerContext, query string, args ...any) ([]Entry, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		if err := rows.Scan(&e.To, &e.Sequence); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// LockEntries reads and locks (FOR UPDATE) the rows of ids in from's list
// m, in to_id order, so concurrent transactions locking the same rows
// queue instead of deadlocking.
func LockEntries(ctx context.Context, q sqlx.QueryerContext, db DB, m model.Mapping, from uint64, ids ...uint64) ([]Entry, error) {
	return scanEntries(ctx, q, placeholders(db.sql(lockEntries.of(m)), len(ids), "?", ") ORDER BY to_id FOR UPDATE"), idArgs([]any{from}, ids)...)
}

// Neighbour reads and locks the entry next to pos in from's list m, other
// than skip: the next one up in (sequence, to_id) order, or with down the
// next one down. nil when pos is at that end.
func Neighbour(ctx context.Context, q sqlx.QueryerContext, db DB, m model.Mapping, from, skip uint64, pos Position, down bool) (*Entry, error) {
	var e Entry
	s := neighbourUp
	if down {
		s = neighbourDown
	}
	err := q.QueryRowxContext(ctx, db.sql(s.of(m)), from, skip, pos.Seq, pos.Seq, pos.To).Scan(&e.To, &e.Sequence)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return &e, err
}

// ShiftDown lowers by two the sequence of every entry of from's list m at
// or below pos, other than skip: room for one entry just above pos.
func ShiftDown(ctx context.Context, t *Tx, db DB, m model.Mapping, from, skip uint64, pos Position) error {
	_, err := t.change(ctx, []uint64{from}, db.sql(shiftDown.of(m)), from, skip, pos.Seq, pos.Seq, pos.To)
	return err
}

// SetSequence gives entry to of from's list m a new sequence. Like every
// change to a list's rows, it records from as changed (a cached first
// page of the list goes with from's invalidation).
func SetSequence(ctx context.Context, t *Tx, db DB, m model.Mapping, from, to uint64, seq int64) error {
	_, err := t.change(ctx, []uint64{from}, db.sql(setSequence.of(m)), seq, from, to)
	return err
}

// PairRow is a row of a mapping table.
type PairRow struct {
	From, To uint64
	Seq      int64
}

// ScanPairs reads up to n rows of table after (from, to) in primary-key
// order: a whole table read in batches.
func ScanPairs(ctx context.Context, q sqlx.QueryerContext, db DB, table string, from, to uint64, n int) ([]PairRow, error) {
	s, err := scanPairs.of(table)
	if err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, db.sql(s), from, from, to, n)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []PairRow
	for rows.Next() {
		var r PairRow
		if err := rows.Scan(&r.From, &r.To, &r.Seq); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ExistingPairs reports which of the (from, to) pairs have a row in m's
// table, with one statement.
func ExistingPairs(ctx context.Context, q sqlx.QueryerContext, db DB, m model.Mapping, pairs [][2]uint64) (map[[2]uint64]bool, error) {
	args := make([]any, 0, 2*len(pairs))
	for _, p := range pairs {
		args = append(args, p[0], p[1])
	}
	rows, err := q.QueryContext(ctx, placeholders(db.sql(existingPairs.of(m)), len(pairs), "(?, ?)", ")"), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	found := map[[2]uint64]bool{}
	for rows.Next() {
		var k [2]uint64
		if err := rows.Scan(&k[0], &k[1]); err != nil {
			return nil, err
		}
		found[k] = true
	}
	return found, rows.Err()
}

// hand_ordered records the lists whose order was chosen by hand (a
// board whose pins were moved): their sequences are no longer times.

// LockHandOrder records that from's list m is ordered by hand, and holds
// the record's lock (exclusive) until the transaction ends: moves on one
// list (and creates placed by hand on it) take it first and so run one
// after another, instead of locking each other's rows and gaps in
// crossing orders.
func LockHandOrder(ctx context.Context, x sqlx.ExecerContext, db DB, m model.Mapping, from uint64) error {
	_, err := x.ExecContext(ctx, db.sql(lockHandOrder), from, uint8(m))
	return err
}

// HandOrdered reports whether from's list m was ever ordered by hand.
func HandOrdered(ctx context.Context, q sqlx.QueryerContext, db DB, m model.Mapping, from uint64) (bool, error) {
	var one int
	err := q.QueryRowxContext(ctx, db.sql(handOrdered), from, uint8(m)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// LowestSequence reads the lowest sequence of from's list m, locking the
// entry that has it (inside a transaction); ok is false for an empty list.
// A list shown highest sequence first puts an entry last by giving it one
// below this.
func LowestSequence(ctx context.Context, q sqlx.QueryerContext, db DB, m model.Mapping, from uint64) (seq int64, ok bool, err error) {
	err = q.QueryRowxContext(ctx, db.sql(lowestSeq.of(m)), from).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return seq, err == nil, err
}

// RemoveList deletes every row of from's list m and its count, in the
// transaction that empties it (t records from as changed).
func RemoveList(ctx context.Context, t *Tx, db DB, m model.Mapping, from uint64) error {
	if _, err := t.ExecContext(ctx, db.sql(removeList.of(m)), from); err != nil {
		return err
	}
	_, err := t.change(ctx, []uint64{from}, db.sql(removeCount), from, uint8(m))
	return err
}
