// Package shardtest provisions shard databases for the tests of the
// packages that send statements to them (pointread, edgeread): each on
// the shared MariaDB, under a prefix private to the test, migrated as
// pinstore migrate does, and dropped when the test ends.
package shardtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/migrations"
	"github.com/pinstore/pinstore/store/shardsql"
)

// Shards provisions shard databases ns… under a private prefix that
// starts with tag, and returns a pool on their host and the databases.
func Shards(t *testing.T, tag string, ns ...int) (*sqlx.DB, []shardsql.DB) {
	t.Helper()
	dsn := testenv.MySQLDSN(t)
	prefix := testenv.UniquePrefix(t, tag)
	t.Cleanup(func() { testenv.DropDatabases(t, dsn, prefix) })
	db, err := sqlx.Open("mysql", dsn+"?parseTime=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ms, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	var dbs []shardsql.DB
	for _, n := range ns {
		d := shardsql.DB{N: n, Name: fmt.Sprintf("%s%05d", prefix, n)}
		if err := migrations.Apply(context.Background(), db, d.Name, ms); err != nil {
			t.Fatal(err)
		}
		dbs = append(dbs, d)
	}
	return db, dbs
}
