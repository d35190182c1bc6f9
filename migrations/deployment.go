package migrations

import (
	"context"
	"database/sql"
	"errors"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// A deployment's record: each MariaDB server that holds a deployment's
// shard databases lists it, by database prefix with its shard count, in
// the table DeploymentsDB.deployments (one server may hold several
// deployments under different prefixes). pinstore migrate records it on
// every host once that host's shards are migrated, a move records it on
// the hosts it creates shards on, and replica add copies it; a server
// checks it before it writes, so that it never writes into another
// deployment's databases (the same prefix, another shard count) without
// saying so.

// DeploymentsDB is the database of the deployments' records. No shard
// database prefix can make a shard of that name.
const DeploymentsDB = "pinstore_deployments"

// RecordDeployment records on db that the shard databases prefix+"%05d"
// are a deployment of shards shards. It is idempotent; it overwrites a
// record of another shard count (migrate checks before it calls this).
func RecordDeployment(ctx context.Context, db sqlx.ExecerContext, prefix string, shards int) error {
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS " + DeploymentsDB + " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
		"CREATE TABLE IF NOT EXISTS " + DeploymentsDB + ".deployments (db_prefix VARCHAR(64) NOT NULL PRIMARY KEY, shards INT NOT NULL, recorded_at DATETIME(6) NOT NULL) ENGINE=InnoDB",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	_, err := db.ExecContext(ctx, "INSERT INTO "+DeploymentsDB+".deployments (db_prefix, shards, recorded_at) VALUES (?, ?, UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE shards = VALUES(shards), recorded_at = VALUES(recorded_at)", prefix, shards)
	return err
}

// RecordedDeployment reads the shard count recorded on q for prefix's
// deployment; ok is false when there is no record.
func RecordedDeployment(ctx context.Context, q sqlx.QueryerContext, prefix string) (shards int, ok bool, err error) {
	err = q.QueryRowxContext(ctx, "SELECT shards FROM "+DeploymentsDB+".deployments WHERE db_prefix = ?", prefix).Scan(&shards)
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
