package shardsql

import (
	"slices"
	"strings"
	"testing"
)

// A transaction's cache_outbox rows go in ascending id order, whatever the
// order its statements changed the objects in: the key's order, so that
// transactions marking the same objects, and the batched delete of taken
// marks, lock their rows in one order.
func TestMarksInKeyOrder(t *testing.T) {
	tx := &Tx{touched: []uint64{30, 10, 20}}
	tx.MarkCached(DB{N: 1, Name: "db00001"}, 7, true)
	tx.queueMarks()
	var ids []uint64
	for i := 0; i < len(tx.queuedArgs); i += 3 {
		ids = append(ids, tx.queuedArgs[i].(uint64))
	}
	if !slices.Equal(ids, []uint64{10, 20, 30}) {
		t.Fatalf("marks queued for %v, want 10, 20, 30", ids)
	}
	if !slices.Equal(tx.Touched(), []uint64{30, 10, 20}) {
		t.Fatalf("touched became %v", tx.Touched())
	}
}

// A shard whose cache_outbox is keyed per write takes plain inserts; one
// keyed by object alone (not migrated yet) takes upserts, where a second
// write's mark of an object replaces the first's instead of failing.
func TestMarksUpsertOnlyWhereKeyedByObject(t *testing.T) {
	for _, perWrite := range []bool{true, false} {
		tx := &Tx{touched: []uint64{10}}
		tx.MarkCached(DB{N: 1, Name: "db00001"}, 7, perWrite)
		tx.queueMarks()
		q := tx.queued.String()
		if !strings.HasPrefix(q, "INSERT INTO db00001.cache_outbox ") {
			t.Fatalf("marks queued as %q", q)
		}
		if upsert := strings.Contains(q, "ON DUPLICATE KEY UPDATE"); upsert == perWrite {
			t.Fatalf("per write %v: marks queued as %q", perWrite, q)
		}
	}
}
