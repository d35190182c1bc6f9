package backup

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strings"
)

// querier is a connection or a transaction.
type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// tableColumns lists, per database of dbs present on the server, its base
// tables and their columns in order.
func tableColumns(ctx context.Context, q querier, prefix string, dbs []string) (map[string]map[string][]string, error) {
	want := make(map[string]bool, len(dbs))
	for _, d := range dbs {
		want[d] = true
	}
	rows, err := q.QueryContext(ctx, `SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME
		FROM information_schema.COLUMNS c JOIN information_schema.TABLES t
		  ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME
		WHERE c.TABLE_SCHEMA LIKE ? AND t.TABLE_TYPE = 'BASE TABLE'
		ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION`, prefix+"%")
	if err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	defer rows.Close()
	out := map[string]map[string][]string{}
	for rows.Next() {
		var db, table, col string
		if err := rows.Scan(&db, &table, &col); err != nil {
			return nil, fmt.Errorf("list tables: %w", err)
		}
		if !want[db] {
			continue
		}
		if out[db] == nil {
			out[db] = map[string][]string{}
		}
		out[db][table] = append(out[db][table], col)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tables: %w", err)
	}
	// A database with no table yet is still there.
	drows, err := q.QueryContext(ctx, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?", prefix+"%")
	if err != nil {
		return nil, fmt.Errorf("list databases: %w", err)
	}
	defer drows.Close()
	for drows.Next() {
		var db string
		if err := drows.Scan(&db); err != nil {
			return nil, fmt.Errorf("list databases: %w", err)
		}
		if want[db] && out[db] == nil {
			out[db] = map[string][]string{}
		}
	}
	return out, drows.Err()
}

// checksums sums every table of dbs (those present) on q: its rows and
// the XOR of each row's CRC32, the same whatever the storage's layout.
func checksums(ctx context.Context, q querier, prefix string, dbs []string, progress func(done, total int)) (map[string]map[string]TableSum, error) {
	cols, err := tableColumns(ctx, q, prefix, dbs)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(cols))
	for db := range cols {
		names = append(names, db)
	}
	sort.Strings(names)
	out := make(map[string]map[string]TableSum, len(cols))
	for i, db := range names {
		out[db] = map[string]TableSum{}
		for table, cs := range cols[db] {
			parts := make([]string, 0, 2*len(cs))
			for _, c := range cs {
				parts = append(parts, "ISNULL("+ident(c)+")", "CAST("+ident(c)+" AS BINARY)")
			}
			stmt := fmt.Sprintf("SELECT COUNT(*), COALESCE(BIT_XOR(CRC32(CONCAT_WS(0x1f, %s))), 0) FROM %s.%s",
				strings.Join(parts, ", "), ident(db), ident(table))
			var s TableSum
			if err := q.QueryRowContext(ctx, stmt).Scan(&s.Rows, &s.Sum); err != nil {
				return nil, fmt.Errorf("checksum %s.%s: %w", db, table, err)
			}
			out[db][table] = s
		}
		if progress != nil {
			progress(i+1, len(names))
		}
	}
	return out, nil
}

func ident(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// compareSums lists the differences between want (the manifest) and got,
// for the databases of want ("" when they agree); tables and rows count
// what was compared.
func compareSums(want, got map[string]map[string]TableSum) (diffs []string, tables int, rows int64) {
	dbs := make([]string, 0, len(want))
	for db := range want {
		dbs = append(dbs, db)
	}
	sort.Strings(dbs)
	for _, db := range dbs {
		g, ok := got[db]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("database %s is missing", db))
			continue
		}
		for table, w := range want[db] {
			tables++
			rows += w.Rows
			gs, ok := g[table]
			switch {
			case !ok:
				diffs = append(diffs, fmt.Sprintf("table %s.%s is missing", db, table))
			case gs != w:
				diffs = append(diffs, fmt.Sprintf("table %s.%s: %d rows, sum %08x; the source had %d rows, sum %08x", db, table, gs.Rows, gs.Sum, w.Rows, w.Sum))
			}
		}
		for table := range g {
			if _, ok := want[db][table]; !ok {
				diffs = append(diffs, fmt.Sprintf("table %s.%s is not in the manifest", db, table))
			}
		}
	}
	sort.Strings(diffs)
	return diffs, tables, rows
}
