package migrations

import (
	"strings"
	"testing"
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
			if !strings.Contains(s, "IF NOT EXISTS") {
				t.Errorf("migration %d: statement is not idempotent: %.60s", m.Version, s)
			}
			if f := strings.Fields(s); len(f) > 5 && f[0] == "CREATE" && f[1] == "TABLE" {
				tables[f[5]] = true
			}
		}
	}
	for _, want := range []string{"users", "boards", "pins", "comments", "user_boards", "board_pins", "user_pins",
		"user_following", "user_followers", "user_likes", "pin_likers", "pin_comments", "mapping_counts", "user_feed", "feed_outbox"} {
		if !tables[want] {
			t.Errorf("no CREATE TABLE for %s", want)
		}
	}
}
