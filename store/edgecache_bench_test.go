package store

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// BenchmarkEdgeCheck: 32 goroutines check whether users like pins, the
// cache warm, as an edge route does: of one pin or of ten, half of them
// liked. "get" is the bar, a cached read of one pin by id; "hasmany+get"
// reads the edges, then the objects of those found (the route before
// HasManyLive); "live" is HasManyLive, the objects in the edges' round
// trip.
//
//	go test -run '^$' -bench EdgeCheck -benchtime 40000x ./store
func BenchmarkEdgeCheck(b *testing.B) {
	s, _ := openTestB(b)
	var users, pins []uint64
	for i := range 20 {
		u, err := s.CreateUser(ctx, model.UserDoc{Username: fmt.Sprintf("edgebench%d", i)})
		if err != nil {
			b.Fatal(err)
		}
		users = append(users, u.ID)
	}
	board, err := s.Create(ctx, idcodec.TypeBoard, &model.BoardDoc{OwnerID: model.ID(users[0]), Name: "b"}, 0)
	if err != nil {
		b.Fatal(err)
	}
	for range 40 {
		p, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(board.ID), Link: "https://example.com/x"}, 0)
		if err != nil {
			b.Fatal(err)
		}
		pins = append(pins, p.ID)
	}
	for _, u := range users {
		for _, p := range pins[:len(pins)/2] {
			if err := s.AddMapping(ctx, model.UserLikes, u, p); err != nil {
				b.Fatal(err)
			}
		}
	}
	pick := func(r *rand.Rand, n int) (uint64, []uint64) {
		tos := make([]uint64, n)
		for i := range tos {
			tos[i] = pins[r.IntN(len(pins))]
		}
		return users[r.IntN(len(users))], tos
	}
	checks := map[string]func(from uint64, tos []uint64) error{
		"get": func(_ uint64, tos []uint64) error {
			_, err := s.Get(ctx, tos[0], idcodec.TypePin)
			return err
		},
		"hasmany+get": func(from uint64, tos []uint64) error {
			has, err := s.HasMany(ctx, model.UserLikes, from, tos)
			if err != nil {
				return err
			}
			var found []uint64
			for i, h := range has {
				if h {
					found = append(found, tos[i])
				}
			}
			if len(found) > 0 {
				_, err = s.GetMany(ctx, found, idcodec.TypePin)
			}
			return err
		},
		"live": func(from uint64, tos []uint64) error {
			_, _, err := s.HasManyLive(ctx, model.UserLikes, from, tos)
			return err
		},
	}
	for _, n := range []int{1, 10} {
		for _, name := range []string{"get", "hasmany+get", "live"} {
			if name == "get" && n > 1 {
				continue
			}
			check := checks[name]
			b.Run(fmt.Sprintf("%s/ids=%d", name, n), func(b *testing.B) {
				for range 2 { // warm: every edge and object cached
					for _, u := range users {
						if err := check(u, pins); err != nil && name != "get" {
							b.Fatal(err)
						}
					}
				}
				b.ReportAllocs()
				b.SetParallelism(16) // 32 goroutines on 2 CPUs
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					r := rand.New(rand.NewPCG(rand.Uint64(), 1))
					for pb.Next() {
						if err := check(pick(r, n)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
