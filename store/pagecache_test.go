package store

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
)

// Pages come from the cache once read, first pages and pages after a
// cursor alike, and are never older than a write acknowledged before the
// read: pins created, moved by hand and deleted through another server, a
// board created on the owner's list, a like and an unlike (a list the
// user does not count: its length is the page's own), and this server's
// own move whose invalidation Redis did not take. Each page is held
// against the same page read by a server with the cache off.
func TestPagesFromTheCache(t *testing.T) {
	b, m := openTest(t) // on Redis directly
	proxy := startCutProxy(t, testenv.RedisAddr(t))
	a := openSecond(t, b, proxy.ln.Addr().String())
	truth, err := Open(ctx, Config{Map: m, CursorSecret: []byte("test"), Redis: RedisConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { truth.Close() })
	owner, liker := mustUser(t, b, "owner"), mustUser(t, b, "liker")
	board := mustBoard(t, b, owner)
	var pins []uint64
	for range 5 {
		pins = append(pins, mustPin(t, b, board))
	}
	for _, p := range pins[:3] {
		if err := b.AddMapping(ctx, model.UserLikes, liker, p); err != nil {
			t.Fatal(err)
		}
	}
	type read struct {
		m    model.Mapping
		from uint64
		p    model.Page
	}
	reads := []read{
		{model.BoardPins, board, model.Page{Limit: 3, Desc: true}},
		{model.BoardPins, board, model.Page{Limit: 3}},
		{model.BoardPins, board, model.Page{Limit: 10, Desc: true}},
		{model.UserBoards, owner, model.Page{Limit: 2, Desc: true}},
		{model.UserLikes, liker, model.Page{Limit: 2, Desc: true}}, // not counted on the user: the page keeps its length
	}
	// The next pages, after the cursors a reader scrolling on is handed,
	// beside the first pages of the same length: each cursor keeps its
	// position while the list changes around it.
	for _, r := range []read{
		{model.BoardPins, board, model.Page{Limit: 2, Desc: true}},
		{model.BoardPins, board, model.Page{Limit: 2}},
		{model.UserLikes, liker, model.Page{Limit: 1, Desc: true}},
	} {
		l, err := truth.List(ctx, r.m, r.from, r.p)
		if err != nil {
			t.Fatal(err)
		}
		if l.NextCursor == "" {
			t.Fatalf("setup: %s of %d has one page", r.m, r.from)
		}
		reads = append(reads, r)
		r.p.Cursor = l.NextCursor
		reads = append(reads, r)
	}
	check := func(s *Store, when string) {
		t.Helper()
		for _, r := range reads {
			want, err := truth.List(ctx, r.m, r.from, r.p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.List(ctx, r.m, r.from, r.p)
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if !slices.Equal(got.Entries, want.Entries) || got.Count != want.Count || got.NextCursor != want.NextCursor {
				t.Fatalf("%s, %s of %d %+v: got %v (count %d, next %q), want %v (count %d, next %q)", when, r.m, r.from, r.p,
					got.Entries, got.Count, got.NextCursor, want.Entries, want.Count, want.NextCursor)
			}
		}
	}
	st := a.objects.cache.PageStats()
	check(a, "first read")
	hits, misses := st.Hits.Load(), st.Misses.Load()
	check(a, "read again")
	if st.Hits.Load() != hits+int64(len(reads)) || st.Misses.Load() != misses {
		t.Fatalf("read again: %d hits, %d misses; want %d and 0", st.Hits.Load()-hits, st.Misses.Load()-misses, len(reads))
	}
	pins = append(pins, mustPin(t, b, board))
	check(a, "after a create through the other server")
	if err := b.Move(ctx, model.BoardPins, board, pins[0], pins[5], 0); err != nil {
		t.Fatal(err)
	}
	check(a, "after a move through the other server")
	if err := b.Move(ctx, model.BoardPins, board, pins[3], 0, pins[1]); err != nil {
		t.Fatal(err)
	}
	check(a, "after a second move")
	if err := b.Delete(ctx, pins[5], idcodec.TypePin, 0); err != nil {
		t.Fatal(err)
	}
	check(a, "after a delete through the other server")
	mustBoard(t, b, owner)
	check(a, "after a board created through the other server")
	if err := b.RemoveMapping(ctx, model.UserLikes, liker, pins[2]); err != nil {
		t.Fatal(err)
	}
	check(a, "after an unlike through the other server")
	if err := b.AddMapping(ctx, model.UserLikes, liker, pins[4]); err != nil {
		t.Fatal(err)
	}
	check(a, "after a like through the other server")
	// a's own move, whose invalidation Redis does not take: b fills its
	// pages again before it; a must not read them.
	proxy.setCut(true)
	check(b, "the other server, before the move")
	if err := a.Move(ctx, model.BoardPins, board, pins[4], pins[0], 0); err != nil {
		t.Fatal(err)
	}
	if !a.objects.pendingFor(board) {
		t.Fatal("setup: the move's invalidation is not pending")
	}
	proxy.setCut(false)
	check(a, "after this server's move, its invalidation pending")
	deadline := time.Now().Add(time.Second)
	for a.objects.pendingFor(board) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	check(b, "the other server, once the invalidation was resent")
}

// Pages whose reads overlap no write see the last acknowledged one:
// moves through alternating servers, each followed by reads of the first
// page through both.
func TestFirstPageAfterEachMove(t *testing.T) {
	a, _ := openTest(t)
	b := openSecond(t, a, testenv.RedisAddr(t))
	stores := []*Store{a, b}
	board := mustBoard(t, a, mustUser(t, a, "mover"))
	var pins []uint64
	for range 6 {
		pins = append(pins, mustPin(t, a, board))
	}
	order := slices.Clone(pins)
	slices.Reverse(order) // newest first
	for i := range 40 {
		item, anchor := order[(i*5+3)%len(order)], order[(i*7+1)%len(order)]
		if item == anchor {
			continue
		}
		if err := stores[i%2].Move(ctx, model.BoardPins, board, item, anchor, 0); err != nil {
			t.Fatal(err)
		}
		order = slices.DeleteFunc(order, func(id uint64) bool { return id == item })
		order = slices.Insert(order, slices.Index(order, anchor), item)
		for _, s := range stores {
			l, err := s.List(ctx, model.BoardPins, board, model.Page{Limit: len(pins), Desc: true})
			if err != nil {
				t.Fatal(err)
			}
			var got []uint64
			for _, e := range l.Entries {
				got = append(got, e.To)
			}
			if !slices.Equal(got, order) {
				t.Fatalf("move %d (%d before %d): page %v, want %v", i, item, anchor, got, order)
			}
		}
	}
	if a.objects.cache.PageStats().Hits.Load()+b.objects.cache.PageStats().Hits.Load() == 0 {
		t.Fatal("no page came from the cache: the test did not test it")
	}
}

// Follows toggled through alternating servers while readers read the
// users' following through either, as a first page and as a page after a
// cursor (one at the list's top, so it holds every entry too): a page that
// no write to an entry overlapped holds that entry exactly when the last
// acknowledged write left it there, never an older state.
func TestPagesNeverOlderAcrossServers(t *testing.T) {
	for _, afterCursor := range []bool{false, true} {
		t.Run(map[bool]string{false: "first page", true: "after a cursor"}[afterCursor], func(t *testing.T) {
			a, _ := openTest(t)
			b := openSecond(t, a, testenv.RedisAddr(t))
			const nUsers, nItems, writes = 3, 4, 24
			var users, targets []uint64
			for i := range nUsers {
				users = append(users, mustUser(t, a, fmt.Sprintf("follower%d", i)))
			}
			for i := range nItems {
				targets = append(targets, mustUser(t, a, fmt.Sprintf("followed%d", i)))
			}
			page := func(i int) model.Page {
				p := model.Page{Limit: nItems, Desc: true}
				if afterCursor {
					p.Cursor = a.cursor.encode(cursorPos{kind: uint8(model.UserFollowing), desc: true, from: users[i], seq: math.MaxInt64, to: math.MaxUint64})
				}
				return p
			}
			pages, judged := toggleRace{ // edgecache_test.go
				stores: []*Store{a, b}, owners: nUsers, items: nItems, writes: writes,
				toggle: func(s *Store, i, k int, on bool) error {
					if on {
						return s.AddMapping(ctx, model.UserFollowing, users[i], targets[k])
					}
					return s.RemoveMapping(ctx, model.UserFollowing, users[i], targets[k])
				},
				read: func(s *Store, i int) ([]bool, error) {
					l, err := s.List(ctx, model.UserFollowing, users[i], page(i))
					if err != nil {
						return nil, err
					}
					held := make([]bool, nItems)
					for k, target := range targets {
						held[k] = slices.ContainsFunc(l.Entries, func(e model.Entry) bool { return e.To == target })
					}
					return held, nil
				},
			}.run(t)
			hits, refused := answeredFromCache(t, "page", a.objects.cache.PageStats(), b.objects.cache.PageStats())
			t.Logf("%d pages, %d entries judged, %d pages from the cache, %d fills refused", pages, judged, hits, refused)
		})
	}
}
