package reshard

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jmoiron/sqlx"
)

// tableInfo is one table's shape as information_schema describes it.
type tableInfo struct {
	name    string
	cols    []string
	ints    []intKind // per column: how to decode integers
	pk      []int     // indexes into cols
	autoInc bool
}

type intKind uint8

const (
	notInt intKind = iota
	signedInt
	unsignedInt
)

// listTables describes the base tables of database name. Table and column
// names come from the server and are checked against a strict pattern
// before they are ever put in SQL text; a table without a primary key is
// an error (it could not be copied in chunks).
func listTables(ctx context.Context, db *sqlx.DB, name string) ([]tableInfo, error) {
	// Three queries, each with the schema as a constant, so the server
	// opens only this database's tables.
	var base []string
	if err := sqlx.SelectContext(ctx, db, &base, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME", name); err != nil {
		return nil, err
	}
	var cols []struct {
		Table    string `db:"TABLE_NAME"`
		Column   string `db:"COLUMN_NAME"`
		DataType string `db:"DATA_TYPE"`
		ColType  string `db:"COLUMN_TYPE"`
		Extra    string `db:"EXTRA"`
	}
	if err := sqlx.SelectContext(ctx, db, &cols, "SELECT TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, EXTRA FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME, ORDINAL_POSITION", name); err != nil {
		return nil, err
	}
	var keys []struct {
		Table  string `db:"TABLE_NAME"`
		Column string `db:"COLUMN_NAME"`
	}
	if err := sqlx.SelectContext(ctx, db, &keys, "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = ? AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY TABLE_NAME, ORDINAL_POSITION", name); err != nil {
		return nil, err
	}
	base = slices.DeleteFunc(base, func(t string) bool { return t == logTable }) // a move's own, never copied
	byName := map[string]*tableInfo{}
	out := make([]tableInfo, len(base))
	for i, t := range base {
		if !identRE.MatchString(t) {
			return nil, fmt.Errorf("unexpected table name %q", t)
		}
		out[i].name = t
		byName[t] = &out[i]
	}
	for _, c := range cols {
		tb := byName[c.Table]
		if tb == nil {
			continue // a view
		}
		if !identRE.MatchString(c.Column) {
			return nil, fmt.Errorf("unexpected column name %q.%q", c.Table, c.Column)
		}
		if strings.Contains(strings.ToLower(c.Extra), "generated") {
			continue // derived from the others (an object's flags): the target computes it
		}
		kind := notInt
		switch strings.ToLower(c.DataType) {
		case "tinyint", "smallint", "mediumint", "int", "bigint":
			kind = signedInt
			if strings.Contains(strings.ToLower(c.ColType), "unsigned") {
				kind = unsignedInt
			}
		}
		if strings.Contains(strings.ToLower(c.Extra), "auto_increment") {
			tb.autoInc = true
		}
		tb.cols = append(tb.cols, c.Column)
		tb.ints = append(tb.ints, kind)
	}
	for _, k := range keys {
		tb := byName[k.Table]
		if tb == nil {
			continue
		}
		i := slices.Index(tb.cols, k.Column)
		if i < 0 {
			return nil, fmt.Errorf("table %s: primary key column %q not found", tb.name, k.Column)
		}
		tb.pk = append(tb.pk, i)
	}
	for _, tb := range out {
		if len(tb.pk) == 0 {
			return nil, fmt.Errorf("table %s has no primary key; it cannot be copied in chunks", tb.name)
		}
	}
	return out, nil
}

// sameTables lists the source's tables and checks the target has the same
// tables with the same columns and keys.
func sameTables(ctx context.Context, w shardWork) ([]tableInfo, error) {
	src, err := listTables(ctx, w.src, w.name)
	if err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	if len(src) == 0 {
		return nil, fmt.Errorf("source database %s has no tables (is it provisioned?)", w.name)
	}
	dst, err := listTables(ctx, w.dst, w.name)
	if err != nil {
		return nil, fmt.Errorf("target: %w", err)
	}
	if len(src) != len(dst) {
		return nil, fmt.Errorf("source has %d tables, target %d: schemas differ", len(src), len(dst))
	}
	for i := range src {
		a, b := src[i], dst[i]
		if a.name != b.name || strings.Join(a.cols, ",") != strings.Join(b.cols, ",") || fmt.Sprint(a.pk) != fmt.Sprint(b.pk) {
			return nil, fmt.Errorf("table %s differs between source and target (%v / %v): schemas differ", a.name, a.cols, b.cols)
		}
	}
	return src, nil
}

// identRE accepts the table and column names the migrations create.
var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,63}$`)

// tableSum is a table's (or a chunk's) row count and the XOR of a 64-bit
// hash of every row (MD5 of all its columns, each QUOTE()d so that NULL
// and the empty string differ). Rows are unique (primary key), so XOR loses nothing that
// matters.
type tableSum struct {
	rows int64
	hash uint64
}

func (tb tableInfo) rowHash() string {
	parts := make([]string, len(tb.cols))
	for i, c := range tb.cols {
		parts[i] = "QUOTE(`" + c + "`)"
	}
	return "CAST(CONV(LEFT(MD5(CONCAT_WS(0x1f, " + strings.Join(parts, ", ") + ")), 16), 16, 10) AS UNSIGNED)"
}

func (tb tableInfo) pkList() string {
	parts := make([]string, len(tb.pk))
	for i, c := range tb.pk {
		parts[i] = "`" + tb.cols[c] + "`"
	}
	return strings.Join(parts, ", ")
}

func (tb tableInfo) colList() string {
	parts := make([]string, len(tb.cols))
	for i, c := range tb.cols {
		parts[i] = "`" + c + "`"
	}
	return strings.Join(parts, ", ")
}

// keyCond is the condition "primary key > lo AND primary key <= hi" (a
// nil bound is open), written as ORs of equal prefixes so the range
// optimizer uses the primary key.
func (tb tableInfo) keyCond(lo, hi []any) (string, []any) {
	var conds []string
	var args []any
	for _, b := range []struct {
		key []any
		op  string
	}{{lo, ">"}, {hi, "<"}} {
		if b.key == nil {
			continue
		}
		var ors []string
		for i := range tb.pk {
			var ands []string
			for j := 0; j < i; j++ {
				ands = append(ands, "`"+tb.cols[tb.pk[j]]+"` = ?")
				args = append(args, b.key[j])
			}
			ands = append(ands, "`"+tb.cols[tb.pk[i]]+"` "+b.op+" ?")
			args = append(args, b.key[i])
			ors = append(ors, "("+strings.Join(ands, " AND ")+")")
		}
		if b.op == "<" { // <= hi: also the key equal to hi
			var ands []string
			for j := range tb.pk {
				ands = append(ands, "`"+tb.cols[tb.pk[j]]+"` = ?")
				args = append(args, b.key[j])
			}
			ors = append(ors, "("+strings.Join(ands, " AND ")+")")
		}
		conds = append(conds, "("+strings.Join(ors, " OR ")+")")
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// tableChecksum is the tableSum of tb's rows with keys in (lo, hi] (a nil
// bound is open) in database name on db.
func tableChecksum(ctx context.Context, db *sqlx.DB, name string, tb tableInfo, lo, hi []any) (tableSum, error) {
	where, args := tb.keyCond(lo, hi)
	var s tableSum
	err := db.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(BIT_XOR("+tb.rowHash()+"), 0) FROM "+name+".`"+tb.name+"`"+where, args...).Scan(&s.rows, &s.hash)
	return s, err
}

// chunkEnd returns the primary key of the batch-th row after lo on the
// source, or nil when fewer rows remain (the chunk runs to the end).
func chunkEnd(ctx context.Context, db *sqlx.DB, name string, tb tableInfo, lo []any, batch int) ([]any, error) {
	where, args := tb.keyCond(lo, nil)
	q := "SELECT " + tb.pkList() + " FROM " + name + ".`" + tb.name + "`" + where + " ORDER BY " + tb.pkList() + " LIMIT 1 OFFSET " + strconv.Itoa(batch-1)
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, rows.Err()
	}
	key := make([]any, len(tb.pk))
	ptrs := make([]any, len(key))
	for i := range key {
		ptrs[i] = &key[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	for i, c := range tb.pk {
		if key[i], err = tb.ints[c].decode(key[i]); err != nil {
			return nil, err
		}
	}
	return key, rows.Err()
}

// decode turns an integer column's text (as the driver returns it) into an
// int64 or uint64, so keys compare as numbers; other values pass as they are.
func (k intKind) decode(v any) (any, error) {
	b, ok := v.([]byte)
	if !ok || k == notInt {
		return v, nil
	}
	if k == unsignedInt {
		return strconv.ParseUint(string(b), 10, 64)
	}
	return strconv.ParseInt(string(b), 10, 64)
}
