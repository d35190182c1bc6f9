package objcache

import (
	"slices"
	"testing"

	"github.com/pinstore/pinstore/model"
)

// readPage is ReadPage that fails the test on an error.
func readPage(t *testing.T, c *Cache, from uint64, field string) EdgeRead {
	t.Helper()
	r, err := c.ReadPage(ctx, from, field)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A first page is filled under the generation its reader took and read
// back whole; an empty page is a hit, not a miss; an invalidation of its
// owner drops it and refuses the fill of a reader from before it.
func testPagesFillUnderTheirGeneration(t *testing.T, newCache newCacheFunc) {
	c, _ := newCache(t, Options{})
	owner := fillPins(t, c, 80, 1)[0] // a pin owns lists too (its likers)
	field, other := PageField(model.PinLikers, 26, true, 0, 0), PageField(model.PinLikers, 26, false, 0, 0)
	r := readPage(t, c, owner, field)
	if r.Page != nil || r.Gen == "" || !r.ObjectHit {
		t.Fatalf("first read: %+v", r)
	}
	page := []model.Entry{{To: user(1), Sequence: 30}, {To: user(2), Sequence: -4}}
	c.FillPage(ctx, owner, r.Gen, field, EncodePage(7, page))
	c.FillPage(ctx, owner, r.Gen, other, EncodePage(-1, nil))
	r2 := readPage(t, c, owner, field)
	n, got, err := DecodePage(r2.Page)
	if err != nil || n != 7 || !slices.Equal(got, page) {
		t.Fatalf("read back %d, %v (%v), want 7, %v", n, got, err, page)
	}
	if r3 := readPage(t, c, owner, other); r3.Page == nil {
		t.Fatal("an empty page read as a miss")
	} else if n, got, err := DecodePage(r3.Page); err != nil || n != -1 || len(got) != 0 {
		t.Fatalf("the empty page: %d, %v, %v", n, got, err)
	}
	if st := c.PageStats(); st.Hits.Load() != 2 || st.Misses.Load() != 1 {
		t.Fatalf("%d hits, %d misses; want 2 and 1", st.Hits.Load(), st.Misses.Load())
	}
	stale := readPage(t, c, owner, PageField(model.PinLikers, 51, true, 0, 0)) // a miss: its generation
	if err := c.Invalidate(ctx, owner); err != nil {
		t.Fatal(err)
	}
	if r := readPage(t, c, owner, field); r.Page != nil || r.ObjectHit {
		t.Fatalf("after the invalidation: %+v", r)
	}
	c.FillPage(ctx, owner, stale.Gen, field, EncodePage(7, page))
	if r := readPage(t, c, owner, field); r.Page != nil {
		t.Fatal("a fill from before the invalidation was taken")
	}
	if c.PageStats().Refused.Load() != 1 {
		t.Fatalf("%d fills refused, want 1", c.PageStats().Refused.Load())
	}
}

// A reader scrolling a long list fills a page field per page: once the
// pages fill half of the owner's hash, further page fills are left out
// (counted) and read from MySQL, while the pages it holds keep answering;
// the checks of the owner's edges still fill the rest, up to the hash's
// size; first pages have a quarter more to themselves; the owner's
// invalidation empties it.
func testHashesHoldAtMostTheirSize(t *testing.T, newCache newCacheFunc) {
	const size = 4 << 10
	c, client := newCache(t, Options{HashSize: size})
	owner := fillPins(t, c, 90, 1)[0]
	key := c.edgeKey(owner)
	filled := func() int { // the bytes the hash holds, as the fills counted them
		t.Helper()
		n, err := client.HGet(ctx, key, "_n").Int()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	var page []model.Entry
	for i := range 25 {
		page = append(page, model.Entry{To: user(uint64(i + 1)), Sequence: int64(100 - i)})
	}
	value := EncodePage(-1, page) // 409 bytes
	fields := make([]string, 30)
	for i := range fields {
		fields[i] = PageField(model.PinLikers, 25, true, int64(1000-25*i), user(uint64(25*i+1)))
		r := readPage(t, c, owner, fields[i])
		if r.Page != nil {
			t.Fatalf("page %d read before it was filled", i)
		}
		c.FillPage(ctx, owner, r.Gen, fields[i], value)
	}
	held := 0
	for i, f := range fields {
		if r := readPage(t, c, owner, f); r.Page != nil {
			if held != i {
				t.Fatalf("page %d held after page %d was left out", i, held)
			}
			held++
		}
	}
	bytes := 0 // the held pages' fields and values
	for _, f := range fields[:held] {
		bytes += len(f) + len(value)
	}
	if held == 0 || held == len(fields) || bytes > size/2 || bytes+len(fields[held])+len(value) <= size/2 || filled() != bytes {
		t.Fatalf("%d pages held in %d bytes (%d counted) of a hash of %d bytes, pages to half of it", held, bytes, filled(), size)
	}
	if full := c.PageStats().Full.Load(); full != int64(len(fields)-held) {
		t.Fatalf("%d page fills counted as left out, want %d", full, len(fields)-held)
	}
	// Edges fill the rest, ten at a time, until a fill does not fit.
	edges := 0
	for batch := 0; c.EdgeStats().Full.Load() == 0; batch++ {
		if batch == 100 {
			t.Fatal("edge fills never stopped")
		}
		tos := make([]uint64, 10)
		for i := range tos {
			tos[i] = user(uint64(1000 + 10*batch + i))
		}
		r, err := c.ReadEdges(ctx, owner, model.PinLikers, tos, false)
		if err != nil {
			t.Fatal(err)
		}
		before := filled()
		c.FillEdges(ctx, owner, model.PinLikers, r.Gen, tos, make([]bool, len(tos)), EdgeUnknown)
		if after := filled(); after > size {
			t.Fatalf("an edge fill took the hash to %d bytes of %d", after, size)
		} else if after > before {
			edges += len(tos)
		} else if before+10*20 <= size { // the batch's fields are at least 20 bytes each
			t.Fatalf("an edge fill of about 200 bytes was left out at %d bytes of %d", before, size)
		}
	}
	if edges == 0 {
		t.Fatal("no edge fitted beside the pages")
	}
	if n, err := client.HLen(ctx, key).Result(); err != nil || n != int64(held+edges+2) {
		t.Fatalf("the hash has %d fields (%v), want %d pages, %d edges, its generation and its size", n, err, held, edges)
	}
	// The hash is full for cursor pages and edges, but first pages (the
	// page every reader of a list opens on) have a quarter more to
	// themselves, and stop there.
	firsts := 0
	for rows := 1; ; rows++ {
		if rows == 100 {
			t.Fatal("first-page fills never stopped")
		}
		field := PageField(model.PinLikers, rows, true, 0, 0)
		r := readPage(t, c, owner, field)
		before := filled()
		c.FillPage(ctx, owner, r.Gen, field, value)
		after := filled()
		if after > size+size/4 {
			t.Fatalf("a first-page fill took the hash to %d bytes of %d", after, size+size/4)
		}
		if after == before {
			if before+len(field)+len(value) <= size+size/4 {
				t.Fatalf("a first page of %d bytes was left out at %d bytes of %d", len(field)+len(value), before, size+size/4)
			}
			break
		}
		if r := readPage(t, c, owner, field); r.Page == nil {
			t.Fatalf("first page %d filled but not read", rows)
		}
		firsts++
	}
	if firsts < 2 {
		t.Fatalf("%d first pages fitted in the hash's last quarter, want at least 2", firsts)
	}
	if err := c.Invalidate(ctx, owner); err != nil {
		t.Fatal(err)
	}
	last := fields[len(fields)-1]
	r := readPage(t, c, owner, last)
	c.FillPage(ctx, owner, r.Gen, last, value)
	if r := readPage(t, c, owner, last); r.Page == nil {
		t.Fatal("after its owner's invalidation, the hash still refused a page")
	}
}

func TestDecodePageRefusesWhatEncodePageDidNotWrite(t *testing.T) {
	for _, b := range [][]byte{nil, {}, []byte("P12345678123"), []byte("Q0000000000000000")} {
		if _, _, err := DecodePage(b); err == nil {
			t.Errorf("DecodePage(%q): no error", b)
		}
	}
}
