package testenv

import (
	"fmt"
	"strings"
)

// SeedPinsSQL is one INSERT of n pins into the pins table of shard
// database db (migrated), about 250 bytes of document each: bulk data for
// benchmarks, written in SQL rather than through the API.
func SeedPinsSQL(db string, n int) string {
	var b strings.Builder
	note := strings.Repeat("x", 150)
	fmt.Fprintf(&b, "INSERT INTO %s.pins (doc, created_at, updated_at) VALUES ", db)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `('{"description": "pin %d of %s", "link": "https://example.com/%d", "note": "%s"}', NOW(6), NOW(6))`, i, db, i, note)
	}
	return b.String()
}
