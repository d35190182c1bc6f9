package shardsql

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// AddEdge inserts from→to into m's table and, when the row is new, raises
// the list's count in the same transaction (t records from as changed).
// Re-adding is a no-op (false).
func AddEdge(ctx context.Context, t *Tx, db DB, m model.Mapping, from, to uint64, seq int64) (bool, error) {
	res, err := t.ExecContext(ctx, "INSERT IGNORE INTO "+db.table(m.Table())+" (from_id, to_id, sequence) VALUES (?, ?, ?)", from, to, seq)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	_, err = t.change(ctx, []uint64{from}, "INSERT INTO "+db.table(countsTable)+" (from_id, mapping, n) VALUES (?, ?, 1) ON DUPLICATE KEY UPDATE n = n + 1", from, uint8(m))
	return err == nil, err
}

// ListRef names one list: m of from.
type ListRef struct {
	M    model.Mapping
	From uint64
}

// AddEdges adds to (at seq) to each list like AddEdge: a new pin joins
// two lists in its create transaction. Its statements are queued
// (later.go): each count rises when its insert added a row (ROW_COUNT of
// the statement before it), with no round trip to read it; t records
// every list's owner as changed.
func AddEdges(ctx context.Context, t *Tx, db DB, to uint64, seq int64, lists ...ListRef) error {
	for _, l := range lists {
		if err := later(ctx, t, "INSERT IGNORE INTO "+db.table(l.M.Table())+" (from_id, to_id, sequence) VALUES (?, ?, ?)", l.From, to, seq); err != nil {
			return err
		}
		if err := t.changeLater(ctx, []uint64{l.From}, "INSERT INTO "+db.table(countsTable)+" (from_id, mapping, n) SELECT ?, ?, 1 FROM DUAL WHERE ROW_COUNT() > 0 ON DUPLICATE KEY UPDATE n = n + 1", l.From, uint8(l.M)); err != nil {
			return err
		}
	}
	return nil
}

// RemoveEdge deletes from→to from m's table and, when a row went, lowers
// the count in the same transaction (t records from as changed). Removing
// an absent row is a no-op.
func RemoveEdge(ctx context.Context, t *Tx, db DB, m model.Mapping, from, to uint64) (bool, error) {
	res, err := t.ExecContext(ctx, "DELETE FROM "+db.table(m.Table())+" WHERE from_id = ? AND to_id = ?", from, to)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	_, err = t.change(ctx, []uint64{from}, "UPDATE "+db.table(countsTable)+" SET n = n - 1 WHERE from_id = ? AND mapping = ?", from, uint8(m))
	return err == nil, err
}

// AddSecret changes by delta the number of secret entries of from's list
// m (model.SecretKey), in the transaction that changes them; t records
// from as changed.
func AddSecret(ctx context.Context, t *Tx, db DB, m model.Mapping, from uint64, delta int64) error {
	if delta == 0 {
		return nil
	}
	return t.changeLater(ctx, []uint64{from}, "INSERT INTO "+db.table(countsTable)+" (from_id, mapping, n) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE n = n + VALUES(n)", from, model.SecretKey(m), delta)
}

// Count reads the length of from's list m (0 when it never had a row).
func Count(ctx context.Context, q sqlx.QueryerContext, db DB, m model.Mapping, from uint64) (int64, error) {
	return CountLocked(ctx, q, db, m, from, NoLock)
}

// CountLocked is Count reading the count's row with the lock given.
func CountLocked(ctx context.Context, q sqlx.QueryerContext, db DB, m model.Mapping, from uint64, lock Lock) (int64, error) {
	var n int64
	err := q.QueryRowxContext(ctx, "SELECT n FROM "+db.table(countsTable)+" WHERE from_id = ? AND mapping = ?"+string(lock), from, uint8(m)).Scan(&n)
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

// pageSQL builds the statement for one page of from's rows of table (e)
// and, with objects of type typ, their rows (o, NULL when gone) joined on
// the same shard.
func pageSQL(db DB, table string, from uint64, p Page, objects idcodec.Type) (string, []any) {
	var b strings.Builder
	b.WriteString("SELECT e.to_id, e.sequence")
	if objects != 0 {
		b.WriteString(", o.doc, COALESCE(o.flags, 0), o.version, o.created_at, o.updated_at")
		countColumns(&b, db, objects, "o.local_id", 0, len(model.CountKeys(objects)))
	}
	b.WriteString(" FROM ")
	b.WriteString(db.table(table))
	b.WriteString(" e")
	if objects != 0 {
		// XOR with the shard and type bits leaves the local id of an id
		// of this shard and type, and a value above any local id otherwise.
		b.WriteString(" LEFT JOIN ")
		b.WriteString(db.table(objectTables[objects]))
		b.WriteString(" o ON o.local_id = e.to_id ^ ")
		b.WriteString(strconv.FormatUint(db.ID(objects, 0), 10))
	}
	b.WriteString(" WHERE e.from_id = ?")
	args := p.bounds(&b, []any{from}, "e.")
	if p.After != nil {
		b.WriteString(keyset("e.", p.Desc))
		args = append(args, p.After.Seq, p.After.Seq, p.After.To)
	}
	b.WriteString(order("e.", p.Desc))
	b.WriteString(" LIMIT ?")
	args = append(args, p.Limit)
	if p.Offset > 0 {
		b.WriteString(" OFFSET ?")
		args = append(args, p.Offset)
	}
	return b.String(), args
}

// ReadPage reads one page of from's rows of a list table (a mapping's
// table or the feed).
func ReadPage(ctx context.Context, q sqlx.QueryerContext, db DB, table string, from uint64, p Page) ([]Entry, error) {
	query, args := pageSQL(db, table, from, p, 0)
	return scanEntries(ctx, q, query, args...)
}

// ReadPageObjects reads one page of from's list m with the live objects of
// its first want entries, in one statement joining the list to their
// table on the same shard (m must list objects created under from, which
// live on its shard). foreign reports an entry that is not an object of
// this shard and m's type (pinstore never writes one into these lists);
// the caller then reads the objects by id.
func ReadPageObjects(ctx context.Context, q sqlx.QueryerContext, db DB, m model.Mapping, from uint64, p Page, want int) (entries []Entry, objs []model.Object, foreign bool, err error) {
	typ := m.To()
	query, args := pageSQL(db, m.Table(), from, p, typ)
	rows, err := q.QueryContext(ctx, query, args...)
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
	return scanEntries(ctx, q, "SELECT to_id, sequence FROM "+db.table(m.Table())+" WHERE from_id = ?", from)
}

// ReadIDsAfter reads up to n of from's to_ids in m above after, in to_id
// order: a whole list read in pages by primary key.
func ReadIDsAfter(ctx context.Context, q sqlx.QueryerContext, db DB, m model.Mapping, from, after uint64, n int) ([]uint64, error) {
	var ids []uint64
	err := sqlx.SelectContext(ctx, q, &ids, "SELECT to_id FROM "+db.table(m.Table())+" WHERE from_id = ? AND to_id > ? ORDER BY to_id LIMIT ?", from, after, n)
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
	query, args, err := sqlx.In("SELECT to_id, sequence FROM "+db.table(m.Table())+" WHERE from_id = ? AND to_id IN (?) ORDER BY to_id FOR UPDATE", from, ids)
	if err != nil {
		return nil, err
	}
	return scanEntries(ctx, q, query, args...)
}

// Neighbour reads and locks the entry next to pos in from's list m, other
// than skip: the next one up in (sequence, to_id) order, or with down the
// next one down. nil when pos is at that end.
func Neighbour(ctx context.Context, q sqlx.QueryerContext, db DB, m model.Mapping, from, skip uint64, pos Position, down bool) (*Entry, error) {
	var e Entry
	err := q.QueryRowxContext(ctx, "SELECT to_id, sequence FROM "+db.table(m.Table())+" WHERE from_id = ? AND to_id <> ?"+keyset("", down)+order("", down)+" LIMIT 1 FOR UPDATE",
		from, skip, pos.Seq, pos.Seq, pos.To).Scan(&e.To, &e.Sequence)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return &e, err
}

// ShiftDown lowers by two the sequence of every entry of from's list m at
// or below pos, other than skip: room for one entry just above pos.
func ShiftDown(ctx context.Context, x sqlx.ExecerContext, db DB, m model.Mapping, from, skip uint64, pos Position) error {
	_, err := x.ExecContext(ctx, "UPDATE "+db.table(m.Table())+" SET sequence = sequence - 2 WHERE from_id = ? AND to_id <> ? AND (sequence < ? OR (sequence = ? AND to_id <= ?))",
		from, skip, pos.Seq, pos.Seq, pos.To)
	return err
}

// SetSequence gives entry to of from's list m a new sequence.
func SetSequence(ctx context.Context, x sqlx.ExecerContext, db DB, m model.Mapping, from, to uint64, seq int64) error {
	_, err := x.ExecContext(ctx, "UPDATE "+db.table(m.Table())+" SET sequence = ? WHERE from_id = ? AND to_id = ?", seq, from, to)
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
	rows, err := q.QueryContext(ctx, "SELECT from_id, to_id, sequence FROM "+db.table(table)+
		" WHERE from_id > ? OR (from_id = ? AND to_id > ?) ORDER BY from_id, to_id LIMIT ?", from, from, to, n)
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
	var b strings.Builder
	b.WriteString("SELECT from_id, to_id FROM " + db.table(m.Table()) + " WHERE (from_id, to_id) IN (")
	args := make([]any, 0, 2*len(pairs))
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?)")
		args = append(args, p[0], p[1])
	}
	b.WriteByte(')')
	rows, err := q.QueryContext(ctx, b.String(), args...)
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

// handOrderedTable records the lists whose order was chosen by hand (a
// board whose pins were moved): their sequences are no longer times.
const handOrderedTable = "hand_ordered"

// MarkHandOrdered records that from's list m is ordered by hand.
func MarkHandOrdered(ctx context.Context, x sqlx.ExecerContext, db DB, m model.Mapping, from uint64) error {
	_, err := x.ExecContext(ctx, "INSERT IGNORE INTO "+db.table(handOrderedTable)+" (from_id, mapping) VALUES (?, ?)", from, uint8(m))
	return err
}

// HandOrdered reports whether from's list m was ever ordered by hand.
func HandOrdered(ctx context.Context, q sqlx.QueryerContext, db DB, m model.Mapping, from uint64) (bool, error) {
	var one int
	err := q.QueryRowxContext(ctx, "SELECT 1 FROM "+db.table(handOrderedTable)+" WHERE from_id = ? AND mapping = ?", from, uint8(m)).Scan(&one)
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
	err = q.QueryRowxContext(ctx, "SELECT sequence FROM "+db.table(m.Table())+" WHERE from_id = ?"+order("", false)+" LIMIT 1 FOR UPDATE", from).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return seq, err == nil, err
}

// RemoveList deletes every row of from's list m and its count, in the
// transaction that empties it (t records from as changed).
func RemoveList(ctx context.Context, t *Tx, db DB, m model.Mapping, from uint64) error {
	if _, err := t.ExecContext(ctx, "DELETE FROM "+db.table(m.Table())+" WHERE from_id = ?", from); err != nil {
		return err
	}
	_, err := t.change(ctx, []uint64{from}, "DELETE FROM "+db.table(countsTable)+" WHERE from_id = ? AND mapping = ?", from, uint8(m))
	return err
}
