// Package migrations embeds the SQL applied to every shard database.
//
// Files are named NNNN_name.sql and applied in order; each shard records the
// versions it has in its schema_migrations table. Every statement must be
// idempotent (CREATE TABLE IF NOT EXISTS, …) so that a migration
// interrupted half-way can simply be run again. Statements are separated
// by a line holding only ";".
package migrations

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
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
