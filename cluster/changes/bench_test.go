package changes_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/pinstore/pinstore/cluster/changes"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/store/shardmap"
)

// benchTxns is how many create-pin transactions (a pin, its two list
// entries and a count: three events) the benchmarks read.
const benchTxns = 5000

// benchFleet writes benchTxns create-pin transactions on a fresh host and
// returns it with the token from before them.
func benchFleet(b *testing.B) (*fleet, string) {
	return benchFleetOn(b, newFleetTB(b), 1)
}

// benchFleetOn writes benchTxns create-pin transactions into shard of f
// and returns f with the token from before them.
func benchFleetOn(b *testing.B, f *fleet, shard int) (*fleet, string) {
	ch := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go changes.Follow(ctx, changes.Config{Map: func() *shardmap.Map { return f.m }}, changes.Token{}, func(e changes.Event) error {
		ch <- e.Token
		cancel()
		return nil
	})
	start := <-ch
	stmts := make([]string, 0, 4)
	for i := 1; i <= benchTxns; i++ {
		pin := uint64(shard)<<46 | uint64(1)<<36 | uint64(i)
		db := fmt.Sprintf("{%d}", shard)
		stmts = append(stmts[:0],
			fmt.Sprintf(`INSERT INTO %s.pins (local_id, doc, version, created_at, updated_at) VALUES (%d, '{"board_id":"2","owner_id":"3","description":"a pin of the benchmark","active":true}', 1, NOW(6), NOW(6))`, db, i),
			fmt.Sprintf(`INSERT INTO %s.board_pins VALUES (2, %d, %d)`, db, pin, i),
			fmt.Sprintf(`INSERT INTO %s.user_pins VALUES (3, %d, %d)`, db, pin, i),
			`INSERT INTO `+db+`.mapping_counts VALUES (2, 2, 1) ON DUPLICATE KEY UPDATE n = n + 1`)
		f.txTB(b, stmts...)
	}
	return f, start
}

// BenchmarkFollow is the stream's rate from one host: benchTxns
// create-pin transactions already in the binlog, told from a token
// before them.
//
//	go test -run '^$' -bench 'Follow|RawBinlog' -benchtime 3x ./cluster/changes/
func BenchmarkFollow(b *testing.B) {
	f, start := benchFleet(b)
	tok, _ := changes.ParseToken(start)
	b.ResetTimer()
	began := time.Now()
	for range b.N {
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		changes.Follow(ctx, changes.Config{Map: func() *shardmap.Map { return f.m }}, tok, func(e changes.Event) error {
			if e.Kind != changes.Progress {
				if n++; n == 3*benchTxns {
					cancel()
				}
			}
			return nil
		})
		cancel()
	}
	b.ReportMetric(float64(3*benchTxns*b.N)/time.Since(began).Seconds(), "events/s")
}

// BenchmarkRawBinlog is the limit: the same binlog read by go-mysql's
// syncer alone, every event parsed and nothing made of it.
func BenchmarkRawBinlog(b *testing.B) {
	f, start := benchFleet(b)
	tok, _ := changes.ParseToken(start)
	last := f.host.Query(b, "SELECT @@gtid_binlog_pos")
	cfg, _ := mysqldriver.ParseDSN(f.host.DSN())
	host, port, _ := strings.Cut(cfg.Addr, ":")
	var p uint16
	fmt.Sscan(port, &p)
	b.ResetTimer()
	began := time.Now()
	for range b.N {
		syncer := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{ServerID: 1 << 31, Flavor: mysql.MariaDBFlavor, Host: host, Port: p, User: cfg.User, Logger: slog.New(slog.DiscardHandler)})
		set, _ := mysql.ParseMariadbGTIDSet(tok.Hosts["default"].Pos)
		s, err := syncer.StartSyncGTID(set)
		if err != nil {
			b.Fatal(err)
		}
		for {
			ev, err := s.GetEvent(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			if g, ok := ev.Event.(*replication.MariadbGTIDEvent); ok && g.GTID.String() == last {
				break
			}
		}
		syncer.Close()
	}
	b.ReportMetric(float64(3*benchTxns*b.N)/time.Since(began).Seconds(), "events/s")
}

// BenchmarkFollowTwoHosts is the stream's rate from two hosts at once:
// benchTxns create-pin transactions on each, told from tokens before
// them, the two hosts' events merged into one stream.
//
//	go test -run '^$' -bench 'Follow' -benchtime 3x ./cluster/changes/
func BenchmarkFollowTwoHosts(b *testing.B) {
	prefix := testenv.UniquePrefix(b, "chg")
	a, startA := benchFleetOn(b, newFleetOn(b, "changes-a", 1, prefix), 0)
	c, startC := benchFleetOn(b, newFleetOn(b, "changes-c", 2, prefix), 1)
	m, err := shardmap.Parse([]byte(fmt.Sprintf("shards: 2\ndb_prefix: %s\nhosts:\n  a: {master: %q}\n  c: {master: %q}\nranges:\n  - {shards: \"0\", host: a}\n  - {shards: \"1\", host: c}\n",
		a.m.DBPrefix, a.host.DSN(), c.host.DSN())), 2, a.m.DBPrefix)
	if err != nil {
		b.Fatal(err)
	}
	ta, _ := changes.ParseToken(startA)
	tc, _ := changes.ParseToken(startC)
	tok := changes.Token{Hosts: map[string]changes.HostPos{"a": ta.Hosts["default"], "c": tc.Hosts["default"]}}
	b.ResetTimer()
	began := time.Now()
	for range b.N {
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		changes.Follow(ctx, changes.Config{Map: func() *shardmap.Map { return m }}, tok, func(e changes.Event) error {
			if e.Kind != changes.Progress {
				if n++; n == 2*3*benchTxns {
					cancel()
				}
			}
			return nil
		})
		cancel()
	}
	b.ReportMetric(float64(2*3*benchTxns*b.N)/time.Since(began).Seconds(), "events/s")
}
