package store

import (
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// The store against the real MariaDB, one goroutine, no HTTP:
//
//	go test -run '^$' -bench . -benchtime 2000x ./store
func BenchmarkStore(b *testing.B) {
	s, _ := openTestB(b)
	u, _ := s.CreateUser(ctx, model.UserDoc{Username: "bench"})
	bd, _ := s.CreateBoard(ctx, model.BoardDoc{OwnerID: model.ID(u.ID), Name: "b"})
	var pin model.Object
	for range 60 {
		pin, _ = s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(bd.ID), Link: "https://example.com/p"}, 0)
	}
	b.Run("GetPin", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Get(ctx, pin.ID, idcodec.TypePin); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("CreatePin", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(bd.ID), Link: "https://example.com/p"}, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("BoardPage50", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l, err := s.List(ctx, model.BoardPins, bd.ID, model.Page{Limit: 50, Desc: true})
			if err != nil || len(l.Entries) != 50 {
				b.Fatal(err, len(l.Entries))
			}
			ids := make([]uint64, len(l.Entries))
			for i, e := range l.Entries {
				ids[i] = e.To
			}
			if objs, err := s.GetMany(ctx, ids, idcodec.TypePin); err != nil || len(objs) != 50 {
				b.Fatal(err)
			}
		}
	})
}
