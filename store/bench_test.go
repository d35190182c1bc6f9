package store

import (
	"strconv"
	"testing"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// The store against the real MariaDB, one goroutine, no HTTP:
//
//	go test -run '^$' -bench . -benchtime 2000x ./store
func BenchmarkStore(b *testing.B) {
	s, _ := openTestB(b)
	u, _ := s.CreateUser(ctx, model.UserDoc{Username: "bench"})
	bd, _ := s.Create(ctx, idcodec.TypeBoard, &model.BoardDoc{OwnerID: model.ID(u.ID), Name: "b"}, 0)
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

// What an idempotency key costs a create: the claim (one insert of its
// own, on the key's home shard) and the outcome (one insert in the
// create's transaction, on the create's shard). Each
// iteration makes one pin without a key and one with a new key, timed
// apart, so drift on a shared machine hits both alike.
//
//	go test -run '^$' -bench CreatePinKey -benchtime 2000x -count 3 ./store
func BenchmarkCreatePinKey(b *testing.B) {
	s, _ := openTestB(b)
	u, _ := s.CreateUser(ctx, model.UserDoc{Username: "bench"})
	bd, _ := s.Create(ctx, idcodec.TypeBoard, &model.BoardDoc{OwnerID: model.ID(u.ID), Name: "b"}, 0)
	doc := model.PinDoc{BoardID: model.ID(bd.ID), Link: "https://example.com/p"}
	var none, keyed time.Duration
	n := 0
	for b.Loop() {
		n++
		t0 := time.Now()
		if _, err := s.CreatePin(ctx, doc, 0); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		c := model.WithIdempotency(ctx, model.NewIdempotency("bench", strconv.Itoa(n)+"-"+t1.String(), "POST", "/v1/pins", []byte("{}")))
		if _, err := s.CreatePin(c, doc, 0); err != nil {
			b.Fatal(err)
		}
		none, keyed = none+t1.Sub(t0), keyed+time.Since(t1)
	}
	b.ReportMetric(float64(none.Nanoseconds())/float64(n), "ns/create")
	b.ReportMetric(float64(keyed.Nanoseconds())/float64(n), "ns/keyed-create")
	b.ReportMetric(float64(keyed)/float64(none), "keyed/plain")
}
