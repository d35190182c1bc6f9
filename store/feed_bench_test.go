package store

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/topology"
)

// BenchmarkFanOut: one pin by an author with n followers, from CreatePin
// until every follower's feed row is written. The followers are follow
// rows only (user_following on their shards, user_followers on the
// author's), spread over the test shards; fan-out does not read them as
// objects.
//
//	go test -run '^$' -bench FanOut -benchtime 5x ./store
func BenchmarkFanOut(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("followers=%d", n), func(b *testing.B) {
			s, _ := openTestB(b)
			o, err := s.CreateUser(ctx, model.UserDoc{Username: fmt.Sprintf("author%d", n)})
			if err != nil {
				b.Fatal(err)
			}
			author := o.ID
			bo, err := s.Create(ctx, idcodec.TypeBoard, &model.BoardDoc{OwnerID: model.ID(author), Name: "b"}, 0)
			if err != nil {
				b.Fatal(err)
			}
			followers := make([]uint64, n)
			for i := range followers {
				followers[i] = idcodec.MustEncode(uint32(i%testShards), idcodec.TypeUser, uint64(1_000_000+i/testShards))
			}
			insertFollows(b, s, author, followers)
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if _, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(bo.ID)}, 0); err != nil {
					b.Fatal(err)
				}
				for s.FeedBacklog() != 0 {
					time.Sleep(100 * time.Microsecond)
				}
			}
			b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "rows/s")
			b.StopTimer()
			sh, _, _ := s.route("bench", followers[n-1], idcodec.TypeUser)
			var got int
			if err := sh.Host.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+sh.Name+".user_feed WHERE from_id = ?", followers[n-1]).Scan(&got); err != nil || got != b.N {
				b.Fatalf("the last follower's feed holds %d rows (%v), want %d", got, err, b.N)
			}
		})
	}
}

// insertFollows writes both sides of followers → author directly, in
// batches.
func insertFollows(b *testing.B, s *Store, author uint64, followers []uint64) {
	b.Helper()
	ash, _, _ := s.route("bench", author, idcodec.TypeUser)
	seq := time.Now().UnixMilli() - 1000
	byShard := map[int][]uint64{}
	for _, f := range followers {
		byShard[int(idcodec.ShardOf(f))] = append(byShard[int(idcodec.ShardOf(f))], f)
	}
	exec := func(sh topology.Shard, table string, rows [][2]uint64) {
		for start := 0; start < len(rows); start += 1000 {
			chunk := rows[start:min(start+1000, len(rows))]
			var q strings.Builder
			args := make([]any, 0, 3*len(chunk))
			q.WriteString("INSERT INTO " + sh.Name + "." + table + " (from_id, to_id, sequence) VALUES ")
			for i, r := range chunk {
				if i > 0 {
					q.WriteByte(',')
				}
				q.WriteString("(?,?,?)")
				args = append(args, r[0], r[1], seq)
			}
			if _, err := sh.Host.DB.ExecContext(ctx, q.String(), args...); err != nil {
				b.Fatal(err)
			}
		}
	}
	var inverse [][2]uint64
	for n, fs := range byShard {
		sh, _ := s.router.Current().Shard(n)
		var rows [][2]uint64
		for _, f := range fs {
			rows = append(rows, [2]uint64{f, author})
			inverse = append(inverse, [2]uint64{author, f})
		}
		exec(sh, "user_following", rows)
	}
	exec(ash, "user_followers", inverse)
}
