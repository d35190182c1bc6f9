package objcache

import "testing"

// BenchmarkGetHits reads cached entries, one per call (a get by id) and 50
// per call (a page), from one goroutine and from 32, as the server's
// requests do: what a hit costs pinstore, Redis's round trip included.
func BenchmarkGetHits(b *testing.B) {
	c, _ := newCache(b, Options{})
	ids := fillPins(b, c, 9000, 500)
	for _, par := range []int{1, 32} {
		b.Run(map[int]string{1: "getone", 32: "getone-32-callers"}[par], func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					i = (i + 7) % len(ids)
					if _, hit, _, err := c.GetOne(ctx, ids[i]); err != nil || !hit {
						b.Errorf("GetOne: hit %v, %v", hit, err)
						return
					}
				}
			})
		})
	}
	for _, n := range []int{1, 50} {
		for _, par := range []int{1, 32} {
			b.Run(map[int]string{1: "one", 50: "page50"}[n]+map[int]string{1: "", 32: "-32-callers"}[par], func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism(par)
				b.RunParallel(func(pb *testing.PB) {
					i := 0
					for pb.Next() {
						i = (i + 7) % (len(ids) - n)
						hits, _, err := c.Get(ctx, ids[i:i+n])
						if err != nil || len(hits) != n {
							b.Errorf("%d hits of %d: %v", len(hits), n, err)
							return
						}
					}
				})
			})
		}
	}
}
