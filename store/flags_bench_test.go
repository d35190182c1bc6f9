package store

import (
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// What reading a page of a secret board costs, where every object's
// active and secret flags decide whether it is returned: the page joined
// with its pins in one statement (ListObjects), and a multi-get of the
// same 50 pins from MySQL (GetMany, object cache off), both on a board of
// 60 secret pins.
//
//	go test -run '^$' -bench SecretPage -benchtime 3000x -count 3 ./store
func BenchmarkSecretPage(b *testing.B) {
	s, _ := openTestWith(b, func(c *Config) { c.ObjectCache.Disabled = true })
	u, err := s.CreateUser(ctx, model.UserDoc{Username: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	bd, err := s.Create(ctx, idcodec.TypeBoard, &model.BoardDoc{OwnerID: model.ID(u.ID), Name: "b", Secret: true}, 0)
	if err != nil {
		b.Fatal(err)
	}
	var ids []uint64 // the 50 newest, as the page lists them
	for i := range 60 {
		p, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(bd.ID), Link: "https://example.com/p", Description: "a pin on a secret board"}, 0)
		if err != nil {
			b.Fatal(err)
		}
		if i >= 10 {
			ids = append(ids, p.ID)
		}
	}
	b.Run("ListObjects50", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, objs, err := s.ListObjects(ctx, model.BoardPins, bd.ID, model.Page{Limit: 50, Desc: true})
			if err != nil || len(objs) != 50 {
				b.Fatal(err, len(objs))
			}
		}
	})
	b.Run("GetMany50", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if objs, err := s.GetMany(ctx, ids, idcodec.TypePin); err != nil || len(objs) != 50 {
				b.Fatal(err, len(objs))
			}
		}
	})
}
