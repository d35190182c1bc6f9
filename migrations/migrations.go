// Package migrations embeds the SQL applied to every shard database.
//
// Files are named NNNN_name.sql and applied in order; each shard records the
// versions it has in its schema_migrations table. Every statement must be
// idempotent (CREATE TABLE IF NOT EXISTS, …) so that a migration
// interrupted half-way can simply be run again. Statements are separated
// by a line holding only ";".
package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

//go:embed *.sql
var files embed.FS

// Migration is one versioned step of the shard schema.
type Migration struct {
	Version    int
	Name       string
	Statements []string
}

// All returns the embedded migrations in version order.
func All() ([]Migration, error) {
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []Migration
	for _, name := range names {
		num, rest, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migrations: bad file name %q", name)
		}
		if len(out) > 0 && out[len(out)-1].Version >= v {
			return nil, fmt.Errorf("migrations: duplicate version %d", v)
		}
		body, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		m := Migration{Version: v, Name: strings.TrimSuffix(rest, ".sql")}
		for _, stmt := range strings.Split(string(body), "\n;\n") {
			if s := strings.TrimSpace(stripComments(stmt)); s != "" {
				m.Statements = append(m.Statements, s)
			}
		}
		out = append(out, m)
	}
	return out, nil
}

func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// CacheOutboxPerWrite is the version of 0015_cache_outbox_per_write.sql:
// from it on, a shard's cache_outbox is keyed by object and write.
const CacheOutboxPerWrite = 15

// Version is the newest migration the shard database name has recorded:
// 0 when the database or its schema_migrations does not exist. name must
// be a database name the caller built (it is not quoted).
func Version(ctx context.Context, q sqlx.QueryerContext, name string) (int, error) {
	var have int
	err := q.QueryRowxContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM "+name+".schema_migrations").Scan(&have)
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == 1049 || me.Number == 1146) {
		return 0, nil
	}
	return have, err
}

// Apply brings the shard database name on db up to the newest of ms (as
// All returns them), creating the database if it does not exist. It
// applies only the versions the database has not recorded; every
// statement is idempotent, so an interrupted Apply is finished by calling
// it again. The common case, an up-to-date database, costs one query.
// name must be a database name the caller built (it is not quoted).
func Apply(ctx context.Context, db *sqlx.DB, name string, ms []Migration) error {
	have, err := Version(ctx, db, name)
	if err != nil {
		return err
	}
	if have >= ms[len(ms)-1].Version {
		return nil
	}
	// All of a shard's statements run on one connection, with the shard as
	// its default database so unqualified table names land in it.
	conn, err := db.Connx(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS " + name + " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
		"USE " + name,
		"CREATE TABLE IF NOT EXISTS schema_migrations (version INT NOT NULL PRIMARY KEY, name VARCHAR(100) NOT NULL, applied_at DATETIME(6) NOT NULL) ENGINE=InnoDB",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	for _, m := range ms {
		if m.Version <= have {
			continue
		}
		for _, q := range m.Statements {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("migration %d: %w", m.Version, err)
			}
		}
		if _, err := conn.ExecContext(ctx, "INSERT IGNORE INTO schema_migrations (version, name, applied_at) VALUES (?, ?, UTC_TIMESTAMP(6))", m.Version, m.Name); err != nil {
			return err
		}
	}
	// The connection goes back to the pool; leave no default database on it.
	_, err = conn.ExecContext(ctx, "USE information_schema")
	if err != nil {
		return err
	}
	return nil
}
