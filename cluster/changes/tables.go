package changes

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// table is what a shard table is to the stream: the objects of a type, or
// a list's entries. Any other table of a shard database is internal.
type table struct {
	typ  idcodec.Type  // objects of this type; 0 for a list
	list model.Mapping // entries of this list; 0 for objects
}

// tables are the shard tables the stream tells of, by name, from model's
// declarations of the types and lists.
func tables() map[string]table {
	out := map[string]table{}
	for _, typ := range model.ObjectTypes() {
		out[model.Table(typ)] = table{typ: typ}
	}
	for _, m := range model.Mappings() {
		out[m.Table()] = table{list: m}
	}
	return out
}

// The columns the stream reads: an object's local_id, doc and version; an
// entry's from_id, to_id and sequence.
var (
	objectColumns = []string{"local_id", "doc", "version"}
	listColumns   = []string{"from_id", "to_id", "sequence"}
)

// columns maps a column's name to its place in a table's row.
type columns map[string]int

// layouts reads where the columns the stream needs are in each table of
// the shard database db, from information_schema. Every shard runs the
// same migrations, which only ever add columns at the end, so one
// database's layout holds for every shard of the host, and for rows
// written before the newest columns were added.
func layouts(ctx context.Context, q *sql.DB, db string, want map[string]table) (map[string]columns, error) {
	rows, err := q.QueryContext(ctx, "SELECT TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ?", db)
	if err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", db, err)
	}
	defer rows.Close()
	out := map[string]columns{}
	for rows.Next() {
		var tbl, col string
		var pos int
		if err := rows.Scan(&tbl, &col, &pos); err != nil {
			return nil, fmt.Errorf("read the columns of %s: %w", db, err)
		}
		if _, ok := want[tbl]; !ok {
			continue
		}
		if out[tbl] == nil {
			out[tbl] = columns{}
		}
		out[tbl][col] = pos - 1
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the columns of %s: %w", db, err)
	}
	for name, t := range want {
		need := objectColumns
		if t.list != 0 {
			need = listColumns
		}
		for _, c := range need {
			if _, ok := out[name][c]; !ok {
				return nil, fmt.Errorf("%s.%s has no column %s: is the database migrated?", db, name, c)
			}
		}
	}
	return out, nil
}

// shardOf reads the shard of a shard database's name (prefix + %05d);
// false for any other database.
func shardOf(db, prefix string, shards int) (int, bool) {
	rest, ok := strings.CutPrefix(db, prefix)
	if !ok || len(rest) < 5 {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || n >= shards || fmt.Sprintf("%05d", n) != rest {
		return 0, false
	}
	return n, true
}

// integer reads an integer column's value as the binlog decoder gives it.
func integer(v any) (int64, bool) {
	switch n := v.(type) {
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint64:
		return int64(n), true
	}
	return 0, false
}

// text reads a text column's value as the binlog decoder gives it.
func text(v any) ([]byte, bool) {
	switch s := v.(type) {
	case []byte:
		return s, true
	case string:
		return []byte(s), true
	}
	return nil, false
}
