package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// The hybrid feed against the real MariaDB (one host, the 8 test shards),
// one goroutine, no HTTP:
//
//	go test -run '^$' -bench 'CreatePinHybrid|FeedHybrid' -benchtime 200x ./store

// setFollowerCount sets author's follower count without follow rows: an
// author "with a million followers" simulated by count.
func setFollowerCount(b *testing.B, s *Store, author uint64, n int64) {
	b.Helper()
	sh, _, _ := s.route("bench", author, idcodec.TypeUser)
	if _, err := sh.Host.DB.ExecContext(ctx, "INSERT INTO "+sh.Name+".mapping_counts (from_id, mapping, n) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE n = VALUES(n)", author, uint8(model.UserFollowers), n); err != nil {
		b.Fatal(err)
	}
}

// allFeedRows counts user_feed rows on every shard.
func allFeedRows(b *testing.B, s *Store) int {
	b.Helper()
	t := s.router.Current()
	total := 0
	for n := range t.Len() {
		sh, _ := t.Shard(n)
		var k int
		if err := sh.Host.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+sh.Name+".user_feed").Scan(&k); err != nil {
			b.Fatal(err)
		}
		total += k
	}
	return total
}

func waitBacklog(b *testing.B, s *Store) {
	for s.FeedBacklog() != 0 {
		time.Sleep(100 * time.Microsecond)
	}
}

// BenchmarkCreatePinHybrid: one pin, from CreatePin until its fan-out (if
// any) is written, by an author with 0, 10,000 or 1,000,000 followers
// (the last by count only), pushed (threshold above the count) or pulled
// (threshold 5,000); rows/pin is user_feed rows written per pin,
// create-ms the CreatePin call alone (ns/op includes the fan-out, which
// lingers 20 ms to batch pins).
func BenchmarkCreatePinHybrid(b *testing.B) {
	cases := []struct {
		mode      string
		followers int
		threshold int64
		simulated bool
	}{
		{"push", 0, 0, false},
		{"push", 10000, 20000, false},
		{"pull", 10000, 5000, false},
		{"pull", 1000000, 5000, true},
	}
	for _, c := range cases {
		b.Run(fmt.Sprintf("%s/followers=%d", c.mode, c.followers), func(b *testing.B) {
			s, _ := openTestWith(b, func(cfg *Config) {
				if c.threshold > 0 {
					cfg.FeedPullThreshold = c.threshold
				}
			})
			o, err := s.CreateUser(ctx, model.UserDoc{Username: "author"})
			if err != nil {
				b.Fatal(err)
			}
			bo, err := s.Create(ctx, idcodec.TypeBoard, &model.BoardDoc{OwnerID: model.ID(o.ID), Name: "b"}, 0)
			if err != nil {
				b.Fatal(err)
			}
			if c.simulated {
				setFollowerCount(b, s, o.ID, int64(c.followers))
			} else if c.followers > 0 {
				followers := make([]uint64, c.followers)
				for i := range followers {
					followers[i] = idcodec.MustEncode(uint32(i%testShards), idcodec.TypeUser, uint64(1_000_000+i/testShards))
				}
				insertFollows(b, s, o.ID, followers)
				setFollowerCount(b, s, o.ID, int64(c.followers))
			}
			var createT time.Duration
			pin := func() {
				t0 := time.Now()
				if _, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(bo.ID)}, 0); err != nil {
					b.Fatal(err)
				}
				createT += time.Since(t0)
				waitBacklog(b, s)
			}
			// The first pulled pin tells every follower once (feed_pulled).
			start := time.Now()
			pin()
			first := time.Since(start)
			before := allFeedRows(b, s)
			createT = 0
			b.ResetTimer()
			for range b.N {
				pin()
			}
			b.StopTimer()
			b.ReportMetric(float64(allFeedRows(b, s)-before)/float64(b.N), "rows/pin")
			b.ReportMetric(float64(createT.Microseconds())/1000/float64(b.N), "create-ms")
			b.ReportMetric(float64(first.Microseconds())/1000, "first-pin-ms")
		})
	}
}

// BenchmarkFeedHybrid: a 50-pin feed page (entries, then the pins by id,
// as the API reads it) for a user following 200 pushed authors (5 pins
// each) plus 0, 5 or 50 pulled authors (5 pins each), alternated in the
// same loop with a 50-pin board page; ×board is the ratio of their times.
func BenchmarkFeedHybrid(b *testing.B) {
	s, _ := openTestWith(b, func(cfg *Config) { cfg.FeedPullThreshold = 1000 })
	mkAuthor := func(name string, pulled bool) uint64 {
		o, err := s.CreateUser(ctx, model.UserDoc{Username: name})
		if err != nil {
			b.Fatal(err)
		}
		if pulled {
			setFollowerCount(b, s, o.ID, 1000)
		}
		bo, err := s.Create(ctx, idcodec.TypeBoard, &model.BoardDoc{OwnerID: model.ID(o.ID), Name: "b"}, 0)
		if err != nil {
			b.Fatal(err)
		}
		for range 5 {
			if _, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(bo.ID)}, 0); err != nil {
				b.Fatal(err)
			}
		}
		return o.ID
	}
	var pushed, pulled []uint64
	for i := range 200 {
		pushed = append(pushed, mkAuthor(fmt.Sprintf("pushed%d", i), false))
	}
	for i := range 50 {
		pulled = append(pulled, mkAuthor(fmt.Sprintf("pulled%d", i), true))
	}
	owner, _ := s.CreateUser(ctx, model.UserDoc{Username: "owner"})
	board, _ := s.Create(ctx, idcodec.TypeBoard, &model.BoardDoc{OwnerID: model.ID(owner.ID), Name: "big"}, 0)
	for range 60 {
		if _, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(board.ID)}, 0); err != nil {
			b.Fatal(err)
		}
	}
	readers := map[int]uint64{}
	for _, k := range []int{0, 5, 50} {
		r, _ := s.CreateUser(ctx, model.UserDoc{Username: fmt.Sprintf("reader%d", k)})
		for _, a := range append(append([]uint64(nil), pushed...), pulled[:k]...) {
			if err := s.AddMapping(ctx, model.UserFollowing, r.ID, a); err != nil {
				b.Fatal(err)
			}
		}
		readers[k] = r.ID
	}
	waitBacklog(b, s)
	page := func(read func() (model.List, error)) {
		l, err := read()
		if err != nil || len(l.Entries) != 50 {
			b.Fatal(err, len(l.Entries))
		}
		ids := make([]uint64, len(l.Entries))
		for i, e := range l.Entries {
			ids[i] = e.To
		}
		if objs, err := s.GetMany(ctx, ids, idcodec.TypePin); err != nil || len(objs) != 50 {
			b.Fatal(err, len(objs))
		}
	}
	for _, k := range []int{0, 5, 50} {
		b.Run(fmt.Sprintf("pushed=200/pulled=%d", k), func(b *testing.B) {
			b.ReportAllocs()
			var feedT, boardT time.Duration
			for range b.N {
				t0 := time.Now()
				page(func() (model.List, error) {
					return s.List(ctx, model.BoardPins, board.ID, model.Page{Limit: 50, Desc: true})
				})
				t1 := time.Now()
				page(func() (model.List, error) { return s.Feed(ctx, readers[k], model.Page{Limit: 50}) })
				feedT += time.Since(t1)
				boardT += t1.Sub(t0)
			}
			b.ReportMetric(float64(feedT.Microseconds())/float64(b.N), "feed-µs")
			b.ReportMetric(float64(boardT.Microseconds())/float64(b.N), "board-µs")
			b.ReportMetric(float64(feedT)/float64(boardT), "×board")
		})
	}
}
