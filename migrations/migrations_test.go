package migrations

import (
	"context"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/pinstore/pinstore/internal/testenv"
)

func TestAll(t *testing.T) {
	ms, err := All()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 || ms[0].Version != 1 {
		t.Fatalf("migrations = %+v", ms)
	}
	tables := map[string]bool{}
	for _, m := range ms {
		for _, s := range m.Statements {
			// Idempotent: created only if missing, or an upsert that sets
			// what it computes (a recount).
			if !strings.Contains(s, "IF NOT EXISTS") && !(strings.HasPrefix(s, "INSERT INTO") && strings.Contains(s, "ON DUPLICATE KEY UPDATE n = VALUES(n)")) {
				t.Errorf("migration %d: statement is not idempotent: %.60s", m.Version, s)
			}
			if f := strings.Fields(s); len(f) > 5 && f[0] == "CREATE" && f[1] == "TABLE" {
				tables[f[5]] = true
			}
		}
	}
	for _, want := range []string{"users", "boards", "pins", "comments", "user_boards", "board_pins", "user_pins",
		"user_following", "user_followers", "user_likes", "pin_likers", "pin_comments", "mapping_counts", "user_feed", "feed_outbox", "pair_outbox", "usernames", "user_claims", "hand_ordered", "cache_outbox",
		"idempotency_claims", "idempotency_outcomes"} {
		if !tables[want] {
			t.Errorf("no CREATE TABLE for %s", want)
		}
	}
}

func TestApply(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	prefix := testenv.UniquePrefix(t, "mg")
	t.Cleanup(func() { testenv.DropDatabases(t, dsn, prefix) })
	db, err := sqlx.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms, err := All()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	name := prefix + "00000"
	// A database created by a run that stopped after the first migration.
	if err := Apply(ctx, db, name, ms[:1]); err != nil {
		t.Fatal(err)
	}
	var have int
	if err := db.Get(&have, "SELECT MAX(version) FROM "+name+".schema_migrations"); err != nil || have != 1 {
		t.Fatalf("after the first migration: version %d, %v", have, err)
	}
	if _, err := db.Exec("SELECT 1 FROM " + name + ".feed_outbox"); err == nil {
		t.Fatal("a later migration's table exists after applying only the first")
	}
	if err := Apply(ctx, db, name, ms); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&have, "SELECT MAX(version) FROM "+name+".schema_migrations"); err != nil || have != ms[len(ms)-1].Version {
		t.Fatalf("after all: version %d, %v; want %d", have, err, ms[len(ms)-1].Version)
	}
	var tables int
	if err := db.Get(&tables, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ?", name); err != nil {
		t.Fatal(err)
	}
	want := 1 // schema_migrations
	for _, m := range ms {
		for _, s := range m.Statements {
			if strings.HasPrefix(s, "CREATE TABLE") {
				want++
			}
		}
	}
	if tables != want {
		t.Fatalf("%d tables, want %d", tables, want)
	}
	// Up to date: applying again changes nothing.
	if err := Apply(ctx, db, name, ms); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := db.Get(&rows, "SELECT COUNT(*) FROM "+name+".schema_migrations"); err != nil || rows != len(ms) {
		t.Fatalf("schema_migrations holds %d rows, want %d (%v)", rows, len(ms), err)
	}
}
