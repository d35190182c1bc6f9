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
	"github.com/pinstore/pinstore/store/shardmap"
)

// benchTxns is how many create-pin transactions (a pin, its two list
// entries and a count: three events) the benchmarks read.
const benchTxns = 5000

// benchFleet writes benchTxns create-pin transactions on a fresh host and
// returns it with the token from before them.
func benchFleet(b *testing.B) (*fleet, string) {
	f := newFleetTB(b)
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
		pin := uint64(1)<<46 | uint64(1)<<36 | uint64(i)
		stmts = append(stmts[:0],
			fmt.Sprintf(`INSERT INTO {1}.pins (local_id, doc, version, created_at, updated_at) VALUES (%d, '{"board_id":"2","owner_id":"3","description":"a pin of the benchmark","active":true}', 1, NOW(6), NOW(6))`, i),
			fmt.Sprintf(`INSERT INTO {1}.board_pins VALUES (2, %d, %d)`, pin, i),
			fmt.Sprintf(`INSERT INTO {1}.user_pins VALUES (3, %d, %d)`, pin, i),
			`INSERT INTO {1}.mapping_counts VALUES (2, 2, 1) ON DUPLICATE KEY UPDATE n = n + 1`)
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
