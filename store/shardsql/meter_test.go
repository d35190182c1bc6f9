package shardsql_test

import (
	"database/sql"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/shardsql/shardtest"
	"github.com/pinstore/pinstore/store/topology"
)

// roundTrips reads the round-trip metrics of reg for host and role: the
// queries and the errors.
func roundTrips(t testing.TB, reg *prometheus.Registry, host, role string) (queries uint64, errs float64) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	is := func(m *dto.Metric) bool {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		return got["host"] == host && got["role"] == role
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			switch {
			case !is(m):
			case f.GetName() == "pinstore_shard_query_seconds":
				queries = m.GetHistogram().GetSampleCount()
			case f.GetName() == "pinstore_shard_query_errors_total":
				errs = m.GetCounter().GetValue()
			}
		}
	}
	return queries, errs
}

// meteredPool is a pool on the shared MariaDB whose round trips reg
// records as host h's master.
func meteredPool(t testing.TB, dsn string) (*sqlx.DB, *shardsql.Meter, *shardsql.RoundTrips, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	rt, m := shardsql.NewRoundTrips(reg), &shardsql.Meter{}
	rt.Name(m, "h", shardsql.RoleMaster)
	pool, err := topology.DialMetered(dsn, 2, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	return pool, m, rt, reg
}

// twoPools is a pool on the shared MariaDB unmetered, and one metered
// (meteredPool) with reg holding its metrics.
func twoPools(tb testing.TB) (plain, metered *sqlx.DB, reg *prometheus.Registry) {
	tb.Helper()
	plain, err := topology.Dial(testenv.MySQLDSN(tb), 1)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { plain.Close() })
	metered, _, _, reg = meteredPool(tb, testenv.MySQLDSN(tb))
	return plain, metered, reg
}

// A pool's round trips are counted as its host's and role's: a
// transaction's statements (the queued ones with the next), a read on the
// pool, and the statements the server refused; neither a read that finds
// no row nor a duplicate key is an error. Named again (a replica
// promoted), the pool counts under its new role.
func TestMeterCountsRoundTrips(t *testing.T) {
	_, dbs := shardtest.Shards(t, "meter", 0)
	db := dbs[0]
	pool, m, rt, reg := meteredPool(t, testenv.MySQLDSN(t))

	tx, err := shardsql.BeginOn(ctx, pool, sql.LevelDefault)
	if err != nil {
		t.Fatal(err)
	}
	insert := "INSERT INTO " + db.Name + ".user_feed (from_id, to_id, sequence, author_id) VALUES (5, 10, 1, 7)"
	if _, err := tx.ExecContext(ctx, insert); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, insert); !shardsql.IsDuplicate(err) {
		t.Fatalf("a second insert of the row: %v, want a duplicate key", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	if q, e := roundTrips(t, reg, "h", "master"); q != 3 || e != 0 {
		t.Fatalf("insert, duplicate, commit: %d round trips, %v errors; want 3, 0", q, e)
	}

	var n int
	if err := pool.GetContext(ctx, &n, "SELECT to_id FROM "+db.Name+".user_feed WHERE from_id = 6"); err != sql.ErrNoRows {
		t.Fatalf("a read of no row: %v", err)
	}
	if _, err := pool.ExecContext(ctx, "SELECT * FROM "+db.Name+".no_such_table"); err == nil {
		t.Fatal("a statement on a missing table succeeded")
	}
	if q, e := roundTrips(t, reg, "h", "master"); q != 5 || e != 1 {
		t.Fatalf("then a read of no row and a refused statement: %d round trips, %v errors; want 5, 1", q, e)
	}

	rt.Name(m, "h", shardsql.RoleReplica)
	if err := pool.GetContext(ctx, &n, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if q, _ := roundTrips(t, reg, "h", "replica"); q != 1 {
		t.Fatalf("named a replica: %d round trips as replica, want 1", q)
	}
	if q, _ := roundTrips(t, reg, "h", "master"); q != 5 {
		t.Fatalf("named a replica: %d round trips as master, want still 5", q)
	}
}

// A host that does not answer: every dial that fails is a failed round
// trip of its pool.
func TestMeterCountsFailedDials(t *testing.T) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "tcp", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)) // nothing listens
	pool, _, _, reg := meteredPool(t, cfg.FormatDSN())
	for i := range 3 {
		if err := pool.PingContext(ctx); err == nil {
			t.Fatalf("ping %d of a closed port succeeded", i)
		}
	}
	if q, e := roundTrips(t, reg, "h", "master"); q != 3 || e != 3 {
		t.Fatalf("3 failed dials: %d round trips, %v errors; want 3, 3", q, e)
	}
}

// A metered pool allocates no more per statement than a pool unmetered.
func TestMeterAllocatesNothing(t *testing.T) {
	plain, metered, reg := twoPools(t)
	allocs := func(pool *sqlx.DB) float64 {
		var n int
		return testing.AllocsPerRun(200, func() {
			if err := pool.QueryRowContext(ctx, "SELECT ?", 1).Scan(&n); err != nil {
				t.Fatal(err)
			}
		})
	}
	if p, m := allocs(plain), allocs(metered); m > p {
		t.Fatalf("a read allocates %v times on a metered pool, %v on a plain one", m, p)
	}
	if q, _ := roundTrips(t, reg, "h", "master"); q < 200 {
		t.Fatalf("the metered pool counted %d of its 200 reads", q)
	}
}

// BenchmarkMeteredRead: one read, SELECT 1, on a pool unmetered and on a
// metered one (what the metering adds to a round trip).
//
//	go test -run '^$' -bench MeteredRead -count 5 ./store/shardsql
func BenchmarkMeteredRead(b *testing.B) {
	plain, metered, _ := twoPools(b)
	for _, c := range []struct {
		name string
		pool *sqlx.DB
	}{{"plain", plain}, {"metered", metered}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var n int
			for b.Loop() {
				if err := c.pool.QueryRowContext(ctx, "SELECT 1").Scan(&n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
