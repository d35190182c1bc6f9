package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/internal/testenv"
)

// TestReadyzNotProvisioned: a server whose shards nobody migrated says so
// at start and is not ready, and writes to it fail; once pinstore migrate
// has run, it is ready within seconds, with no restart.
func TestReadyzNotProvisioned(t *testing.T) {
	s := startServerMigrated(t, nil, false)
	st, b := readiness(t, s)
	shards := b.check("shards:default")
	if st != http.StatusServiceUnavailable || b.Status != "unavailable" || shards.OK || shards.Degrades ||
		!strings.Contains(shards.Error, "lacks 8 of the 8 shard databases") || !strings.Contains(shards.Error, "run pinstore migrate") {
		t.Fatalf("/readyz of a server on shards nobody migrated: %d %+v", st, b)
	}
	if !logged(s, "SHARDS NOT PROVISIONED") {
		t.Fatalf("serve did not say at start that its shards are not provisioned:\n%s", strings.Join(s.logs.Lines(), "\n"))
	}
	s.fail(http.StatusServiceUnavailable, "unavailable", http.MethodPost, "/v1/users", map[string]any{"username": "nobody"})

	env := map[string]string{"PINSTORE_MYSQL_DSN": s.dsn, "PINSTORE_SHARDS": fmt.Sprint(e2eShards), "PINSTORE_DB_PREFIX": s.prefix}
	if out, err := runCmd(t, env, "migrate"); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	waitReady(t, s, "ok after migrate", func(st int, b readyBody) bool { return st == http.StatusOK && b.Status == "ok" })
	s.must(http.StatusCreated, http.MethodPost, "/v1/users", map[string]any{"username": "somebody"})
}

// TestReadyzRedisDown: Redis down costs speed, not service: /readyz stays
// 200, says degraded and names the check, and reads and writes answer.
func TestReadyzRedisDown(t *testing.T) {
	s := startServerEnv(t, map[string]string{"PINSTORE_REDIS_ADDRS": fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))})
	st, b := readiness(t, s)
	if redis := b.check("redis"); st != http.StatusOK || b.Status != "degraded" || redis.OK || !redis.Degrades || redis.Error == "" {
		t.Fatalf("/readyz with Redis down: %d %+v", st, b)
	}
	u := s.create("/v1/users", map[string]any{"username": "redisdown"})
	s.must(http.StatusOK, http.MethodGet, "/v1/users/"+u.ID, nil)
}

// TestServeRefusesAnotherDeployment: a server never writes into databases
// that another deployment recorded under its prefix (another shard
// count), and migrate refuses them too; databases that migrate never
// recorded (made by a version before the record) are served, with an
// error at start and a degraded /readyz until migrate records them.
func TestServeRefusesAnotherDeployment(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	prefix := testenv.UniquePrefix(t, "dep")
	t.Cleanup(func() { testenv.DropDatabases(t, dsn, prefix) })
	env := func(shards int) map[string]string {
		return map[string]string{"PINSTORE_MYSQL_DSN": dsn, "PINSTORE_SHARDS": fmt.Sprint(shards), "PINSTORE_DB_PREFIX": prefix,
			"PINSTORE_REDIS_DISABLED": "true", "PINSTORE_DEV": "true"}
	}
	if out, err := runCmd(t, env(e2eShards), "migrate"); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	if out, err := runCmd(t, env(2*e2eShards), "migrate"); err == nil || !strings.Contains(err.Error(), "holds a deployment of 8 shards") {
		t.Fatalf("migrate of 16 shards over a deployment of 8: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := runCmd(t, env(2*e2eShards), "serve", "--addr", "127.0.0.1:0"); err == nil || !strings.Contains(err.Error(), "holds another deployment") {
		t.Fatalf("serve of 16 shards over a deployment of 8: %v\n%s", err, out)
	}

	// As if a version before the record had made them.
	db, err := sqlx.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "DELETE FROM pinstore_deployments.deployments WHERE db_prefix = ?", prefix); err != nil {
		t.Fatal(err)
	}
	s := startServerMigrated(t, map[string]string{"PINSTORE_DB_PREFIX": prefix}, false)
	if !logged(s, "NOT RECORDED AS THIS DEPLOYMENT'S") {
		t.Fatalf("serve did not say at start that migrate never recorded its databases:\n%s", strings.Join(s.logs.Lines(), "\n"))
	}
	st, b := readiness(t, s)
	if c := b.check("shards:default"); st != http.StatusOK || b.Status != "degraded" || c.OK || !c.Degrades || !strings.Contains(c.Error, "has not recorded") {
		t.Fatalf("/readyz on databases migrate never recorded: %d %+v", st, b)
	}
	if out, err := runCmd(t, env(e2eShards), "migrate"); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	waitReady(t, s, "ok once migrate recorded the deployment", func(st int, b readyBody) bool { return st == http.StatusOK && b.Status == "ok" })
}

// TestReadyzShardsBehind: shards behind this server's newest migration
// (a binary deployed before pinstore migrate ran) degrade the server
// without making it unready, and it says so at start.
func TestReadyzShardsBehind(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	prefix := testenv.UniquePrefix(t, "old")
	t.Cleanup(func() { testenv.DropDatabases(t, dsn, prefix) })
	env := map[string]string{"PINSTORE_MYSQL_DSN": dsn, "PINSTORE_SHARDS": fmt.Sprint(e2eShards), "PINSTORE_DB_PREFIX": prefix}
	if out, err := runCmd(t, env, "migrate"); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	db, err := sqlx.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The newest migration's row gone from the last shard: as if it had
	// been migrated by the version before.
	var newest int
	last := fmt.Sprintf("%s%05d", prefix, e2eShards-1)
	if err := db.QueryRow("SELECT MAX(version) FROM " + last + ".schema_migrations").Scan(&newest); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("DELETE FROM "+last+".schema_migrations WHERE version = ?", newest); err != nil {
		t.Fatal(err)
	}
	s := startServerMigrated(t, map[string]string{"PINSTORE_DB_PREFIX": prefix}, false)
	if !logged(s, "behind this server's newest migration") {
		t.Fatalf("serve did not say at start that its shards are behind:\n%s", strings.Join(s.logs.Lines(), "\n"))
	}
	st, b := readiness(t, s)
	want := fmt.Sprintf("are at migration %d, this server's newest is %d: run pinstore migrate", newest-1, newest)
	if c := b.check("shards:default"); st != http.StatusOK || b.Status != "degraded" || c.OK || !c.Degrades || !strings.Contains(c.Error, want) {
		t.Fatalf("/readyz on shards behind: %d %+v", st, b)
	}
}
