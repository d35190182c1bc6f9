package backup

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// loadShards copies each of dbs from the restored copy into the master
// the map names for its shard: loaded into a database of its own first
// (binary-logged, so the master's replicas get it too), then swapped in
// with one RENAME TABLE, the tables it replaces kept aside in
// restore_aside_<db>_<time>. It returns what it loaded.
func loadShards(ctx context.Context, pl *plan, srv *scratch, dbs []string, admin Credentials, p io.Writer) ([]string, error) {
	stamp := time.Now().UTC().Format("20060102150405")
	var done []string
	for _, db := range dbs {
		shard, err := strconv.Atoi(strings.TrimPrefix(db, pl.man.DBPrefix))
		if err != nil {
			return done, fmt.Errorf("load %s: not a shard database", db)
		}
		r, ok := pl.current.RangeOf(shard)
		if !ok || r.Host != pl.man.Host {
			return done, fmt.Errorf("load %s: shard %d is not on host %s in the map", db, shard, pl.man.Host)
		}
		live, err := newEndpoint(pl.current.Hosts[r.Host].Master, admin)
		if err != nil {
			return done, fmt.Errorf("load %s: host %s master: %w", db, r.Host, err)
		}
		aside, err := loadShard(ctx, pl.tools, srv, live, db, stamp)
		if err != nil {
			return done, fmt.Errorf("load %s into %s: %w", db, live, err)
		}
		line := db + " → " + live.String()
		if aside != "" {
			line += " (what it held is kept in " + aside + ")"
		}
		done = append(done, line)
		fmt.Fprintf(p, "restore: loaded %s\n", line)
	}
	return done, nil
}

func loadShard(ctx context.Context, tools Tools, srv *scratch, live endpoint, db, stamp string) (string, error) {
	ldb, err := live.open(ctx)
	if err != nil {
		return "", err
	}
	defer ldb.Close()
	var cs, coll string
	if err := srv.db.QueryRowContext(ctx, "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", db).Scan(&cs, &coll); err != nil {
		return "", fmt.Errorf("the restored copy's %s: %w", db, err)
	}
	tmp, aside := "restore_tmp_"+db, "restore_aside_"+db+"_"+stamp
	create := fmt.Sprintf(" CHARACTER SET %s COLLATE %s", cs, coll)
	if err := execAll(ctx, ldb, "DROP DATABASE IF EXISTS "+ident(tmp), "CREATE DATABASE "+ident(tmp)+create); err != nil {
		return "", err
	}
	opts, err := live.optionFile("")
	if err != nil {
		return "", err
	}
	defer os.Remove(opts)
	dump := exec.CommandContext(ctx, tools.Dump, "--no-defaults", "--user=root", "--socket="+srv.sock,
		"--single-transaction", "--skip-lock-tables", "--no-tablespaces", "--hex-blob", "--default-character-set=utf8mb4", db)
	load := exec.CommandContext(ctx, tools.Client, "--defaults-file="+opts, "--binary-mode", "--default-character-set=utf8mb4", tmp)
	pipe, err := dump.StdoutPipe()
	if err != nil {
		return "", err
	}
	load.Stdin = pipe
	dumpErr, loadErr := &tailBuffer{max: 2048}, &tailBuffer{max: 2048}
	dump.Stderr, load.Stderr, load.Stdout = dumpErr, loadErr, loadErr
	if err := load.Start(); err != nil {
		return "", err
	}
	if err := dump.Start(); err != nil {
		_ = load.Process.Kill()
		_ = load.Wait()
		return "", err
	}
	derr, lerr := dump.Wait(), load.Wait()
	if derr != nil {
		return "", fmt.Errorf("mariadb-dump: %v: %s", derr, dumpErr)
	}
	if lerr != nil {
		return "", fmt.Errorf("mariadb: %v: %s", lerr, loadErr)
	}
	restored, err := tablesOf(ctx, ldb, tmp)
	if err != nil {
		return "", err
	}
	if err := execAll(ctx, ldb, "CREATE DATABASE IF NOT EXISTS "+ident(db)+create); err != nil {
		return "", err
	}
	current, err := tablesOf(ctx, ldb, db)
	if err != nil {
		return "", err
	}
	var renames []string
	for _, t := range current {
		renames = append(renames, ident(db)+"."+ident(t)+" TO "+ident(aside)+"."+ident(t))
	}
	for _, t := range restored {
		renames = append(renames, ident(tmp)+"."+ident(t)+" TO "+ident(db)+"."+ident(t))
	}
	stmts := []string{}
	if len(current) > 0 {
		stmts = append(stmts, "CREATE DATABASE "+ident(aside)+create)
	} else {
		aside = ""
	}
	stmts = append(stmts, "RENAME TABLE "+strings.Join(renames, ", "), "DROP DATABASE "+ident(tmp))
	return aside, execAll(ctx, ldb, stmts...)
}

func execAll(ctx context.Context, db *sqlx.DB, stmts ...string) error {
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%.80s: %w", q, err)
		}
	}
	return nil
}

func tablesOf(ctx context.Context, db *sqlx.DB, schema string) ([]string, error) {
	var ts []string
	if err := db.SelectContext(ctx, &ts, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME", schema); err != nil {
		return nil, fmt.Errorf("tables of %s: %w", schema, err)
	}
	return ts, nil
}
