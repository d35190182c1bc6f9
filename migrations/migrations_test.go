package migrations

import (
	"context"
	"fmt"
	"slices"
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
			// Idempotent: created only if missing, dropped only if there,
			// a key stated whole (TestCacheOutboxPerWrite runs one twice),
			// or an upsert that sets what it computes (a recount).
			if !strings.Contains(s, "IF NOT EXISTS") && !strings.Contains(s, "IF EXISTS") && !strings.Contains(s, "DROP PRIMARY KEY, ADD PRIMARY KEY (") &&
				!(strings.HasPrefix(s, "INSERT INTO") && strings.Contains(s, "ON DUPLICATE KEY UPDATE n = VALUES(n)")) {
				t.Errorf("migration %d: statement is not idempotent: %.60s", m.Version, s)
			}
			if f := strings.Fields(s); len(f) > 5 && f[0] == "CREATE" && f[1] == "TABLE" {
				tables[f[5]] = true
			}
		}
	}
	for _, want := range []string{"users", "boards", "pins", "comments", "user_boards", "board_pins", "user_pins",
		"user_following", "user_followers", "user_likes", "pin_likers", "pin_comments", "mapping_counts", "user_feed", "feed_outbox", "pair_outbox", "usernames", "user_claims", "hand_ordered", "cache_outbox",
		"idempotency_claims", "idempotency_outcomes", "sections", "board_sections", "section_pins"} {
		if !tables[want] {
			t.Errorf("no CREATE TABLE for %s", want)
		}
	}
}

func TestApply(t *testing.T) {
	db, prefix, ms := openTest(t, "mg")
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

// applyBefore brings shard name up to the migration called migration,
// not including it, and returns that migration's index in ms.
func applyBefore(t *testing.T, db *sqlx.DB, name string, ms []Migration, migration string) int {
	t.Helper()
	i := slices.IndexFunc(ms, func(m Migration) bool { return m.Name == migration })
	if i < 0 {
		t.Fatalf("no %s migration", migration)
	}
	if err := Apply(context.Background(), db, name, ms[:i]); err != nil {
		t.Fatal(err)
	}
	return i
}

// A shard upgraded to cache_outbox rows per write keeps the rows it had,
// and a run of the migration stopped after its statements, run again,
// leaves the same table: keyed by object and token, no index on time.
func TestCacheOutboxPerWrite(t *testing.T) {
	db, prefix, ms := openTest(t, "mc")
	ctx := context.Background()
	name := prefix + "00000"
	i := applyBefore(t, db, name, ms, "cache_outbox_per_write")
	if ms[i].Version != CacheOutboxPerWrite {
		t.Fatalf("cache_outbox_per_write is version %d, CacheOutboxPerWrite says %d", ms[i].Version, CacheOutboxPerWrite)
	}
	if _, err := db.Exec("INSERT INTO " + name + ".cache_outbox (object_id, token, created_at) VALUES (7, 1, UTC_TIMESTAMP(6))"); err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, db, name, ms[:i+1]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("DELETE FROM "+name+".schema_migrations WHERE version = ?", ms[i].Version); err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, db, name, ms); err != nil { // the migration again, and any after it
		t.Fatal(err)
	}
	var keys []struct {
		Key    string `db:"INDEX_NAME"`
		Column string `db:"COLUMN_NAME"`
	}
	if err := db.Select(&keys, "SELECT INDEX_NAME, COLUMN_NAME FROM information_schema.statistics WHERE table_schema = ? AND table_name = 'cache_outbox' ORDER BY INDEX_NAME, SEQ_IN_INDEX", name); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(keys); got != "[{PRIMARY object_id} {PRIMARY token}]" {
		t.Fatalf("cache_outbox's keys: %s", got)
	}
	// A second write's row for the same object goes beside the first.
	if _, err := db.Exec("INSERT INTO " + name + ".cache_outbox (object_id, token, created_at) VALUES (7, 2, UTC_TIMESTAMP(6))"); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := db.Get(&rows, "SELECT COUNT(*) FROM "+name+".cache_outbox WHERE object_id = 7"); err != nil || rows != 2 {
		t.Fatalf("%d rows of object 7, want the one from before the migration and the new one (%v)", rows, err)
	}
}

// A fleet upgraded from before the flags column: the migration that adds
// it computes every existing row's flags from its document, by field name
// in any order, and every later write of a document keeps them.
func TestObjectFlagsBackfill(t *testing.T) {
	db, prefix, ms := openTest(t, "mf")
	ctx := context.Background()
	name := prefix + "00000"
	applyBefore(t, db, name, ms, "object_flags")
	// A shard created before the column was part of the first migration.
	if _, err := db.Exec("ALTER TABLE " + name + ".pins DROP COLUMN flags"); err != nil {
		t.Fatal(err)
	}
	docs := []struct {
		doc   string
		flags int
	}{
		{`{"board_id":"1","owner_id":"2","active":true}`, 1},
		{`{"board_id":"1","owner_id":"2","secret":true,"active":true}`, 3},
		{`{"active":true,"secret":true,"board_id":"1","owner_id":"2"}`, 3}, // fields in another order
		{`{"secret":true,"active":false,"board_id":"1","owner_id":"2"}`, 2},
		{`{"board_id":"1","owner_id":"2","data":{"secret":true,"active":true},"active":false}`, 0},
	}
	for _, d := range docs {
		if _, err := db.Exec("INSERT INTO "+name+".pins (doc, created_at, updated_at) VALUES (?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))", d.doc); err != nil {
			t.Fatal(err)
		}
	}
	if err := Apply(ctx, db, name, ms); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		var got []int
		if err := db.Select(&got, "SELECT flags FROM "+name+".pins ORDER BY local_id"); err != nil {
			t.Fatal(err)
		}
		for j, d := range docs {
			if j >= len(got) || got[j] != d.flags {
				t.Fatalf("%s: flags %v, want %d for %s", when, got, d.flags, d.doc)
			}
		}
	}
	check("after the migration")
	var cols []string // as a shard created with the column has them
	if err := db.Select(&cols, "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'pins' ORDER BY ORDINAL_POSITION", name); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cols, ","); got != "local_id,doc,version,created_at,updated_at,flags" {
		t.Fatalf("pins has columns %s", got)
	}
	docs[0].doc, docs[0].flags = `{"active":false,"board_id":"1","owner_id":"2"}`, 0
	docs[3].doc, docs[3].flags = `{"owner_id":"2","board_id":"1","active":true}`, 1
	for _, j := range []int{0, 3} {
		if _, err := db.Exec("UPDATE "+name+".pins SET doc = ? WHERE local_id = ?", docs[j].doc, j+1); err != nil {
			t.Fatal(err)
		}
	}
	check("after updates")
}

// openTest opens the test server's MariaDB for a test whose databases
// start with a prefix of its own (dropped after it), and reads the
// migrations.
func openTest(t *testing.T, tag string) (*sqlx.DB, string, []Migration) {
	t.Helper()
	dsn := testenv.MySQLDSN(t)
	prefix := testenv.UniquePrefix(t, tag)
	t.Cleanup(func() { testenv.DropDatabases(t, dsn, prefix) })
	db, err := sqlx.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ms, err := All()
	if err != nil {
		t.Fatal(err)
	}
	return db, prefix, ms
}
