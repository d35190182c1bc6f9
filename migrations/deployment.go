package migrations

import (
	"context"
	"database/sql"
	"errors"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// A deployment's record: on each MariaDB server that holds its shard
// databases, the database prefix+"deployment" names the deployment (its
// database prefix) and its shard count. pinstore migrate writes it on
// every host once that host's shards are migrated, and a move writes it on
// the hosts it creates shards on; a server checks it before it writes, so
// that it never writes into another deployment's databases (the same
// prefix, another shard count) without saying so.

// DeploymentDB is the name of the database holding the record of the
// deployment whose shard databases are prefix+"%05d". It can never be a
// shard's name.
func DeploymentDB(prefix string) string { return prefix + "deployment" }

// RecordDeployment records on db that the shard databases prefix+"%05d"
// are a deployment of shards shards. It is idempotent; it overwrites a
// record of another shard count (migrate checks before it calls this).
func RecordDeployment(ctx context.Context, db sqlx.ExecerContext, prefix string, shards int) error {
	name := DeploymentDB(prefix)
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS " + name + " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
		"CREATE TABLE IF NOT EXISTS " + name + ".deployment (db_prefix VARCHAR(64) NOT NULL PRIMARY KEY, shards INT NOT NULL, recorded_at DATETIME(6) NOT NULL) ENGINE=InnoDB",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	_, err := db.ExecContext(ctx, "INSERT INTO "+name+".deployment (db_prefix, shards, recorded_at) VALUES (?, ?, UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE shards = VALUES(shards), recorded_at = VALUES(recorded_at)", prefix, shards)
	return err
}

// RecordedDeployment reads the shard count recorded on q for prefix's
// deployment; ok is false when there is no record.
func RecordedDeployment(ctx context.Context, q sqlx.QueryerContext, prefix string) (shards int, ok bool, err error) {
	err = q.QueryRowxContext(ctx, "SELECT shards FROM "+DeploymentDB(prefix)+".deployment WHERE db_prefix = ?", prefix).Scan(&shards)
	var me *mysql.MySQLError
	switch {
	case errors.Is(err, sql.ErrNoRows), errors.As(err, &me) && (me.Number == 1049 || me.Number == 1146):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	}
	return shards, true, nil
}

// Newest is the version of the newest embedded migration.
func Newest() (int, error) {
	ms, err := All()
	if err != nil {
		return 0, err
	}
	return ms[len(ms)-1].Version, nil
}
