package testenv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

const mysqlHowTo = "start MariaDB with: mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld && " +
	"start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd " +
	"(or set " + EnvMySQLDSN + " to a reachable server, e.g. " + DefaultMySQLDSN + ")"

var mysqlPrimary = primary{
	what:   "MariaDB",
	env:    EnvMySQLDSN,
	def:    DefaultMySQLDSN,
	howTo:  mysqlHowTo,
	ping:   pingMySQL,
	docker: dockerMySQL,
}

// MySQLDSN returns the DSN of the primary MariaDB, without a database name
// (e.g. "root@tcp(127.0.0.1:3306)/"): the value of PINSTORE_TEST_MYSQL_DSN, or
// DefaultMySQLDSN, once it answers a ping within 3s. When it doesn't and a
// Docker engine is reachable, it starts mariadb:10.11 (once per process,
// removed by [Cleanup] or after 30 minutes) and returns its DSN. Otherwise it
// skips tb, or fails it when CI=true. The answer is computed once per process.
func MySQLDSN(tb testing.TB) string {
	tb.Helper()
	return mysqlPrimary.get(tb)
}

// rootDSN returns the DSN of root, with an empty password and no database,
// on the server at addr (host:port).
func rootDSN(addr string) string { return "root@tcp(" + addr + ")/" }

// openMySQL opens a pool on dsn with connect, read and write timeouts of d.
func openMySQL(dsn string, d time.Duration) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse DSN %q: %w", dsn, err)
	}
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = d, d, d
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

func pingMySQL(dsn string) error {
	db, err := openMySQL(dsn, pingTimeout)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	return db.PingContext(ctx)
}

var dbNameRe = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// systemSchemas are never dropped, whatever the prefix.
var systemSchemas = map[string]bool{
	"mysql": true, "information_schema": true, "performance_schema": true, "sys": true,
}

// DropDatabases drops every database on the server at dsn whose name starts
// with prefix, except the system schemas, and the deployments' record of
// prefix that pinstore migrate wrote. prefix must match
// ^[a-z][a-z0-9_]{0,15}$ and end in "_" (as UniquePrefix's do), so it can
// never match a real shard. Failures are reported with tb.Errorf, not Fatal,
// so it is safe in tb.Cleanup and the remaining cleanups still run.
func DropDatabases(tb testing.TB, dsn, prefix string) {
	tb.Helper()
	if err := dropDatabases(dsn, prefix); err != nil {
		tb.Errorf("testenv.DropDatabases: %v", err)
	}
}

func dropDatabases(dsn, prefix string) error {
	if err := checkPrefix(prefix); err != nil {
		return err
	}
	db, err := openMySQL(dsn, 30*time.Second)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SELECT schema_name FROM information_schema.schemata")
	if err != nil {
		return err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		if strings.HasPrefix(n, prefix) && !systemSchemas[n] {
			names = append(names, n)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, n := range names {
		if !dbNameRe.MatchString(n) {
			return fmt.Errorf("refusing to drop database with unexpected name %q", n)
		}
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+n+"`"); err != nil {
			return fmt.Errorf("drop %s: %w", n, err)
		}
	}
	// pinstore migrate's record of the deployment (migrations.DeploymentsDB).
	_, err = db.ExecContext(ctx, "DELETE FROM pinstore_deployments.deployments WHERE db_prefix = ?", prefix)
	var me *mysql.MySQLError
	if err != nil && !(errors.As(err, &me) && (me.Number == 1049 || me.Number == 1146)) {
		return fmt.Errorf("forget the deployment %s: %w", prefix, err)
	}
	return nil
}
