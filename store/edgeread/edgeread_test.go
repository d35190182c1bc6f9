package edgeread

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/shardsql/shardtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

var ctx = context.Background()

// shards provisions shard databases n… of a private prefix on the shared
// MariaDB and returns a pool and the databases.
func shards(t *testing.T, ns ...int) (*sqlx.DB, []shardsql.DB) {
	t.Helper()
	return shardtest.Shards(t, "er", ns...)
}

// addEdge puts the row from → to on list m, committed.
func addEdge(t testing.TB, db *sqlx.DB, d shardsql.DB, m model.Mapping, from, to uint64) {
	t.Helper()
	if _, err := db.Exec("INSERT INTO "+d.Name+"."+m.Table()+" (from_id, to_id, sequence) VALUES (?, ?, 1)", from, to); err != nil {
		t.Fatal(err)
	}
}

func check(d shardsql.DB, m model.Mapping, from uint64, tos ...uint64) *Check {
	return &Check{Listed: shardsql.Listed{DB: d, M: m, From: from, Tos: tos}}
}

// One statement for checks on two shards, two lists, the same user twice
// and a check of no ids answers each check as its own statement does.
func TestBatchAnswersEachCheckAsAlone(t *testing.T) {
	db, dbs := shards(t, 3, 8)
	addEdge(t, db, dbs[0], model.UserLikes, 1, 100)
	addEdge(t, db, dbs[0], model.UserLikes, 1, 101)
	addEdge(t, db, dbs[0], model.UserLikes, 2, 100)
	addEdge(t, db, dbs[0], model.UserFollowing, 1, 100)
	addEdge(t, db, dbs[1], model.UserLikes, 1, 102)
	batch := []*Check{
		check(dbs[0], model.UserLikes, 1, 100, 101, 102, 103),
		check(dbs[0], model.UserLikes, 2, 100, 101),
		check(dbs[0], model.UserFollowing, 1, 100, 101),
		check(dbs[1], model.UserLikes, 1, 100, 102),
		check(dbs[0], model.UserLikes, 1, 101),
		check(dbs[0], model.UserLikes, 1),
		check(dbs[1], model.UserFollowing, 1, 100),
	}
	q := NewQueue(db, Config{})
	q.lanes.Run(batch)
	for i, c := range batch {
		alone := check(c.DB, c.M, c.From, c.Tos...)
		alone.runAlone(ctx, db)
		if c.err != nil || alone.err != nil {
			t.Fatalf("check %d: %v, alone %v", i, c.err, alone.err)
		}
		if len(c.Found) != len(alone.Found) || !maps.Equal(c.Found, alone.Found) {
			t.Errorf("check %d (%v %d %v): batched %v, alone %v", i, c.M, c.From, c.Tos, c.Found, alone.Found)
		}
	}
	if want := map[uint64]bool{100: true, 101: true}; !maps.Equal(batch[0].Found, want) {
		t.Errorf("check 0 found %v, want %v", batch[0].Found, want)
	}
}

// A batch whose statement MySQL refuses (a shard's table is gone) is run
// again check by check: only the check on that shard fails.
func TestBatchIsolatesABrokenShard(t *testing.T) {
	db, dbs := shards(t, 2, 5)
	addEdge(t, db, dbs[1], model.UserLikes, 7, 70)
	if _, err := db.Exec("DROP TABLE " + dbs[0].Name + ".user_likes"); err != nil {
		t.Fatal(err)
	}
	good, bad := check(dbs[1], model.UserLikes, 7, 70, 71), check(dbs[0], model.UserLikes, 7, 70)
	NewQueue(db, Config{}).lanes.Run([]*Check{good, bad})
	if good.err != nil || !maps.Equal(good.Found, map[uint64]bool{70: true}) {
		t.Fatalf("check on the healthy shard: %v, %v", good.Found, good.err)
	}
	var myErr *mysql.MySQLError
	if !errors.As(bad.err, &myErr) {
		t.Fatalf("check on the broken shard: %v", bad.err)
	}
}

// Checks that arrive while the lane is busy share statements, and each
// sees the edge its caller committed just before it began: a check joins
// only a statement not yet sent.
func TestConcurrentChecksShareStatementsAndSeeTheirWrites(t *testing.T) {
	db, dbs := shards(t, 4, 9)
	reg := prometheus.NewRegistry()
	stats := NewStats(reg)
	q := NewQueue(db, Config{Lanes: 1, Stats: stats})
	const callers, rounds = 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Go(func() {
			d := dbs[c%2]
			from := uint64(1000 + c)
			for r := range rounds {
				to := uint64(r + 1)
				addEdge(t, db, d, model.UserLikes, from, to)
				ch := &Check{Listed: shardsql.Listed{DB: d, M: model.UserLikes, From: from, Tos: []uint64{to, to + 1000}}}
				if err := q.Do(ctx, ch); err != nil {
					errs <- err
					return
				}
				if !ch.Found[to] || ch.Found[to+1000] || len(ch.Found) != 1 {
					errs <- fmt.Errorf("caller %d round %d: found %v, want only %d", c, r, ch.Found, to)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checks, statements := testutil.ToFloat64(stats.Jobs), testutil.ToFloat64(stats.Statements)
	if checks != callers*rounds {
		t.Fatalf("%v checks counted, want %d", checks, callers*rounds)
	}
	if statements >= checks {
		t.Fatalf("%v statements for %v checks: none shared", statements, checks)
	}
	t.Logf("%v checks in %v statements", checks, statements)
}
