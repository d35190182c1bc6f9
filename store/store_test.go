package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
)

var ctx = context.Background()

func mustUser(t *testing.T, s *Store, name string) uint64 {
	t.Helper()
	o, err := s.CreateUser(ctx, model.UserDoc{Username: name})
	for i := 2; model.IsCode(err, model.EUsernameTaken); i++ { // usernames are unique: name_2, name_3, …
		o, err = s.CreateUser(ctx, model.UserDoc{Username: fmt.Sprintf("%s_%d", name, i)})
	}
	if err != nil {
		t.Fatal(err)
	}
	return o.ID
}

func mustBoard(t *testing.T, s *Store, owner uint64) uint64 {
	t.Helper()
	o, err := s.Create(ctx, idcodec.TypeBoard, &model.BoardDoc{OwnerID: model.ID(owner), Name: "b"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return o.ID
}

func mustPin(t *testing.T, s *Store, board uint64) uint64 {
	t.Helper()
	o, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(board), Link: "https://example.com/x"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return o.ID
}

func ids(l model.List) []uint64 {
	var out []uint64
	for _, e := range l.Entries {
		out = append(out, e.To)
	}
	return out
}

// all pages through a list with cursors.
func all(t *testing.T, s *Store, m model.Mapping, from uint64, limit int, desc bool) []uint64 {
	t.Helper()
	return pageAll(t, model.Page{Limit: limit, Desc: desc}, func(p model.Page) (model.List, error) { return s.List(ctx, m, from, p) })
}

// pageAll follows a paged read's cursors to the end.
func pageAll(t *testing.T, p model.Page, read func(model.Page) (model.List, error)) []uint64 {
	t.Helper()
	var out []uint64
	for i := 0; ; i++ {
		l, err := read(p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ids(l)...)
		if l.NextCursor == "" {
			return out
		}
		if i > 1000 {
			t.Fatal("cursor loop")
		}
		p.Cursor = l.NextCursor
	}
}

func count(t *testing.T, s *Store, m model.Mapping, from uint64) int64 {
	t.Helper()
	n, err := s.Count(ctx, m, from)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPlacementAndGet(t *testing.T) {
	s, _ := openTest(t)
	u := mustUser(t, s, "ann")
	b := mustBoard(t, s, u)
	p := mustPin(t, s, b)
	if idcodec.ShardOf(u) != idcodec.ShardOf(b) || idcodec.ShardOf(b) != idcodec.ShardOf(p) {
		t.Fatalf("user %d, board %d, pin %d not on one shard", u, b, p)
	}
	if int(idcodec.ShardOf(u)) >= testShards {
		t.Fatalf("user on shard %d, outside the map", idcodec.ShardOf(u))
	}
	o, err := s.Get(ctx, p, idcodec.TypePin)
	if err != nil {
		t.Fatal(err)
	}
	var d model.PinDoc
	if err := json.Unmarshal(o.Doc, &d); err != nil || uint64(d.OwnerID) != u || uint64(d.BoardID) != b || !d.Active {
		t.Fatalf("pin doc %s: %v", o.Doc, err)
	}
	if _, err := s.Get(ctx, p, idcodec.TypeBoard); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("pin id as board: %v", err)
	}
	if _, err := s.Get(ctx, p|3<<62, idcodec.TypePin); !model.IsCode(err, model.EInvalid) {
		t.Fatalf("reserved bits: %v", err)
	}
	if _, err := s.Get(ctx, idcodec.MustEncode(testShards, idcodec.TypePin, 1), idcodec.TypePin); !model.IsCode(err, model.EInvalid) {
		t.Fatalf("shard outside map: %v", err)
	}
	if _, err := s.Get(ctx, p+1000, idcodec.TypePin); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("unknown pin: %v", err)
	}
	for m, want := range map[model.Mapping]uint64{model.UserBoards: u, model.BoardPins: b, model.UserPins: u} {
		if n := count(t, s, m, want); n != 1 {
			t.Fatalf("%s count = %d", m, n)
		}
	}
}

func TestGetManyOrderAcrossShards(t *testing.T) {
	s, _ := openTest(t)
	var users []uint64
	for i := range 20 {
		users = append(users, mustUser(t, s, "u"+string(rune('a'+i))))
	}
	shards := map[uint32]bool{}
	for _, u := range users {
		shards[idcodec.ShardOf(u)] = true
	}
	if len(shards) < 2 {
		t.Fatalf("20 users landed on %d shard(s)", len(shards))
	}
	want := slices.Clone(users)
	slices.Reverse(want)
	req := append(slices.Clone(want), users[0]+100000, idcodec.MustEncode(0, idcodec.TypeBoard, 1))
	got, err := s.GetMany(ctx, req, idcodec.TypeUser)
	if err != nil {
		t.Fatal(err)
	}
	var gotIDs []uint64
	for _, o := range got {
		gotIDs = append(gotIDs, o.ID)
	}
	if !slices.Equal(gotIDs, want) {
		t.Fatalf("GetMany order:\n got %v\nwant %v", gotIDs, want)
	}
}

func TestListPagingAndOrder(t *testing.T) {
	s, _ := openTest(t)
	u := mustUser(t, s, "pager")
	b := mustBoard(t, s, u)
	var pins []uint64
	for range 60 {
		pins = append(pins, mustPin(t, s, b))
	}
	newest := slices.Clone(pins)
	slices.Reverse(newest) // same-millisecond ties break on to_id, which grows with creation
	if got := all(t, s, model.BoardPins, b, 7, true); !slices.Equal(got, newest) {
		t.Fatalf("desc by cursor:\n got %v\nwant %v", got, newest)
	}
	if got := all(t, s, model.BoardPins, b, 11, false); !slices.Equal(got, pins) {
		t.Fatalf("asc by cursor:\n got %v\nwant %v", got, pins)
	}
	for _, off := range []int{0, 13, 50, 59, 60} {
		l, err := s.List(ctx, model.BoardPins, b, model.Page{Limit: 10, Offset: off, Desc: true})
		if err != nil {
			t.Fatal(err)
		}
		end := min(off+10, 60)
		if !slices.Equal(ids(l), newest[off:end]) {
			t.Fatalf("offset %d: got %v want %v", off, ids(l), newest[off:end])
		}
		if (l.NextCursor != "") != (end < 60) {
			t.Fatalf("offset %d: next cursor %q", off, l.NextCursor)
		}
		if l.NextCursor != "" {
			next, err := s.List(ctx, model.BoardPins, b, model.Page{Limit: 1, Cursor: l.NextCursor, Desc: true})
			if err != nil || ids(next)[0] != newest[end] {
				t.Fatalf("cursor after offset %d: %v %v", off, ids(next), err)
			}
		}
	}
	if n := count(t, s, model.BoardPins, b); n != 60 {
		t.Fatalf("count %d", n)
	}
	// Bad input: each is invalid_argument.
	bad := []model.Page{{Limit: -1}, {Limit: 251}, {Offset: -1}, {Cursor: "nope"}, {Cursor: "x", Offset: 3}}
	l, _ := s.List(ctx, model.BoardPins, b, model.Page{Limit: 5, Desc: true})
	bad = append(bad, model.Page{Cursor: l.NextCursor, Desc: false}) // cursor of the other direction
	for _, p := range bad {
		if _, err := s.List(ctx, model.BoardPins, b, p); !model.IsCode(err, model.EInvalid) {
			t.Fatalf("page %+v: err %v", p, err)
		}
	}
	if _, err := s.List(ctx, model.UserPins, u, model.Page{Cursor: l.NextCursor, Desc: true}); !model.IsCode(err, model.EInvalid) {
		t.Fatalf("cursor of another list accepted: %v", err)
	}
}

func TestMove(t *testing.T) {
	s, _ := openTest(t)
	u := mustUser(t, s, "mover")
	b := mustBoard(t, s, u)
	var pins []uint64
	for range 6 {
		pins = append(pins, mustPin(t, s, b))
	}
	order := func() []uint64 { return all(t, s, model.BoardPins, b, 100, true) }
	// Display order is newest first: p5 p4 p3 p2 p1 p0.
	steps := []struct {
		name          string
		item          uint64
		before, after uint64
		want          []int
	}{
		{"oldest before newest", pins[0], pins[5], 0, []int{0, 5, 4, 3, 2, 1}},
		{"after the last", pins[4], 0, pins[1], []int{0, 5, 3, 2, 1, 4}},
		{"between neighbours", pins[1], pins[3], 0, []int{0, 5, 1, 3, 2, 4}},
		{"before itself's neighbour", pins[2], pins[0], 0, []int{2, 0, 5, 1, 3, 4}},
		{"after the top", pins[4], 0, pins[2], []int{2, 4, 0, 5, 1, 3}},
	}
	for _, st := range steps {
		if err := s.Move(ctx, model.BoardPins, b, st.item, st.before, st.after); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		var want []uint64
		for _, i := range st.want {
			want = append(want, pins[i])
		}
		if got := order(); !slices.Equal(got, want) {
			t.Fatalf("%s:\n got %v\nwant %v", st.name, got, want)
		}
	}
	if err := s.Move(ctx, model.BoardPins, b, pins[0], pins[0], 0); !model.IsCode(err, model.EInvalid) {
		t.Fatalf("move next to itself: %v", err)
	}
	other := mustPin(t, s, mustBoard(t, s, u))
	if err := s.Move(ctx, model.BoardPins, b, other, pins[0], 0); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("move a pin of another board: %v", err)
	}
	// A new pin still lands on top of a hand-ordered board.
	p := mustPin(t, s, b)
	if got := order(); got[0] != p {
		t.Fatalf("new pin not first: %v", got)
	}
}

// Owners (or a team of editors) reordering one board's pins, or its
// sections, at once while new ones are added each get their move done:
// none is refused as a conflict to retry, and the list keeps every entry
// once.
func TestConcurrentMoves(t *testing.T) {
	s, _ := openTest(t)
	b := mustBoard(t, s, mustUser(t, s, "reorderer"))
	t.Run("pins", func(t *testing.T) {
		concurrentMoves(t, s, model.BoardPins, b, func() (model.Object, error) {
			return s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(b), Link: "https://example.com/x"}, 0)
		})
	})
	t.Run("sections", func(t *testing.T) {
		concurrentMoves(t, s, model.BoardSections, b, func() (model.Object, error) {
			return s.Create(ctx, idcodec.TypeSection, &model.SectionDoc{BoardID: model.ID(b), Name: "s"}, 0)
		})
	})
}

// concurrentMoves makes 12 entries on from's list m with add, then moves
// them with six editors while one more adds 30 entries.
func concurrentMoves(t *testing.T, s *Store, m model.Mapping, from uint64, add func() (model.Object, error)) {
	var items []uint64
	for range 12 {
		o, err := add()
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, o.ID)
	}
	const editors, moves = 6, 30
	var wg sync.WaitGroup
	errs := make(chan error, editors*moves+moves)
	var added []uint64
	wg.Go(func() {
		for range moves {
			o, err := add()
			if err != nil {
				errs <- fmt.Errorf("add: %w", err)
				continue
			}
			added = append(added, o.ID)
		}
	})
	for e := range editors {
		wg.Go(func() {
			for i := range moves {
				item := items[(e*7+i*5)%len(items)]
				anchor := items[(e*3+i*11+1)%len(items)]
				if anchor == item {
					anchor = items[(slices.Index(items, item)+1)%len(items)]
				}
				before, after := anchor, uint64(0)
				if i%2 == 1 {
					before, after = 0, anchor
				}
				if err := s.Move(ctx, m, from, item, before, after); err != nil {
					errs <- fmt.Errorf("editor %d, move %d: %w", e, i, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	items = append(items, added...)
	got := all(t, s, m, from, 100, true)
	if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(items))) {
		t.Fatalf("%s after the moves holds %v, want each of %v once", m, got, items)
	}
	if n := count(t, s, m, from); n != int64(len(items)) {
		t.Fatalf("count %d after the moves, want %d", n, len(items))
	}
}

func TestUpdateVersion(t *testing.T) {
	s, _ := openTest(t)
	u := mustUser(t, s, "editor")
	set := func(name string) func([]byte) ([]byte, error) {
		return func(doc []byte) ([]byte, error) {
			var d model.UserDoc
			json.Unmarshal(doc, &d)
			d.DisplayName = name
			return json.Marshal(d)
		}
	}
	o, err := s.Update(ctx, u, idcodec.TypeUser, 1, set("A"))
	if err != nil || o.Version != 2 {
		t.Fatalf("update: %+v %v", o, err)
	}
	if _, err := s.Update(ctx, u, idcodec.TypeUser, 1, set("B")); !model.IsCode(err, model.EVersion) {
		t.Fatalf("stale version: %v", err)
	}
	got, _ := s.Get(ctx, u, idcodec.TypeUser)
	if !bytes.Contains(got.Doc, []byte(`"display_name":"A"`)) || got.Version != 2 {
		t.Fatalf("after stale update: %s v%d", got.Doc, got.Version)
	}
	for name, mut := range map[string]func([]byte) ([]byte, error){
		"not an object": func([]byte) ([]byte, error) { return []byte(`[1]`), nil },
		"deactivate":    func([]byte) ([]byte, error) { return []byte(`{"username":"editor","active":false}`), nil },
		"unknown field": func([]byte) ([]byte, error) { return []byte(`{"username":"editor","active":true,"x":1}`), nil },
		"bad username":  func([]byte) ([]byte, error) { return []byte(`{"username":"a b","active":true}`), nil },
		"too large": func([]byte) ([]byte, error) {
			return []byte(`{"username":"editor","active":true,"data":{"x":"` + strings.Repeat("x", 9000) + `"}}`), nil
		},
	} {
		_, err := s.Update(ctx, u, idcodec.TypeUser, 0, mut)
		if code := model.ErrorCode(err); code != model.EInvalid && code != model.ETooLarge {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if after, _ := s.Get(ctx, u, idcodec.TypeUser); after.Version != 2 || !bytes.Equal(after.Doc, got.Doc) {
		t.Fatalf("a refused update wrote: %s v%d", after.Doc, after.Version)
	}
	b := mustBoard(t, s, u)
	other := mustUser(t, s, "other")
	_, err = s.Update(ctx, b, idcodec.TypeBoard, 0, func(doc []byte) ([]byte, error) {
		return bytes.Replace(doc, []byte(idcodec.Append(nil, u)), []byte(idcodec.Append(nil, other)), 1), nil
	})
	if !model.IsCode(err, model.EInvalid) {
		t.Fatalf("changing a board's owner: %v", err)
	}
}

func TestFollowLikeDeleteAndRepair(t *testing.T) {
	s, _ := openTest(t)
	a, c := mustUser(t, s, "a"), mustUser(t, s, "c")
	pin := mustPin(t, s, mustBoard(t, s, c))
	for range 2 { // idempotent
		if err := s.AddMapping(ctx, model.UserFollowing, a, c); err != nil {
			t.Fatal(err)
		}
		if err := s.AddMapping(ctx, model.UserLikes, a, pin); err != nil {
			t.Fatal(err)
		}
	}
	if count(t, s, model.UserFollowing, a) != 1 || count(t, s, model.UserFollowers, c) != 1 || count(t, s, model.PinLikers, pin) != 1 {
		t.Fatal("counts after idempotent adds are not 1")
	}
	if got := all(t, s, model.UserFollowers, c, 10, true); !slices.Equal(got, []uint64{a}) {
		t.Fatalf("followers %v", got)
	}
	if err := s.AddMapping(ctx, model.UserFollowing, a, a); !model.IsCode(err, model.EInvalid) {
		t.Fatalf("self follow: %v", err)
	}
	if err := s.AddMapping(ctx, model.UserLikes, a, pin+99); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("like unknown pin: %v", err)
	}
	if err := s.AddMapping(ctx, model.BoardPins, idcodec.MustEncode(0, idcodec.TypeBoard, 1), pin); !model.IsCode(err, model.EInvalid) {
		t.Fatalf("writing board_pins directly: %v", err)
	}
	// Feed: a follows c.
	f, err := s.Feed(ctx, a, model.Page{Limit: 10})
	if err != nil || !slices.Equal(ids(f), []uint64{pin}) {
		t.Fatalf("feed %v %v", ids(f), err)
	}
	// Deleting the pin takes it out of every list.
	if err := s.Delete(ctx, pin, idcodec.TypePin, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, pin, idcodec.TypePin); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("deleted pin: %v", err)
	}
	if count(t, s, model.UserLikes, a) != 0 || count(t, s, model.UserPins, c) != 0 || len(all(t, s, model.UserLikes, a, 10, true)) != 0 {
		t.Fatal("deleted pin still listed")
	}
	if err := s.Delete(ctx, pin, idcodec.TypePin, 0); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("second delete: %v", err)
	}

	// Break the pair both ways behind the store's back, then repair.
	shC, _, _ := s.route("", c, idcodec.TypeUser)
	if _, err := shC.Host.DB.Exec("DELETE FROM "+shC.Name+".user_followers WHERE from_id = ?", c); err != nil {
		t.Fatal(err)
	}
	d := mustUser(t, s, "d")
	shD, _, _ := s.route("", d, idcodec.TypeUser)
	if _, err := shD.Host.DB.Exec("INSERT INTO "+shD.Name+".user_followers (from_id, to_id, sequence) VALUES (?, ?, 1)", d, a); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Repair(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep[0].Mapping != "user_following" || rep[0].MissingInverse != 1 || rep[0].OrphanInverse != 1 {
		t.Fatalf("repair report %+v", rep)
	}
	if got := all(t, s, model.UserFollowers, c, 10, true); !slices.Equal(got, []uint64{a}) {
		t.Fatalf("followers after repair %v", got)
	}
	if got := all(t, s, model.UserFollowers, d, 10, true); len(got) != 0 {
		t.Fatalf("orphan after repair %v", got)
	}
	rep, _ = s.Repair(ctx, false, nil)
	if rep[0].MissingInverse != 0 || rep[0].OrphanInverse != 0 {
		t.Fatalf("second repair still finds %+v", rep)
	}
}

// A like whose inverse was never written (the server died between its two
// transactions), then the pin's delete: the delete cannot see the like
// through pin_likers, so repair must remove it rather than restore the
// inverse of a deleted pin. Found by bench/chaos.
func TestRepairRemovesPairsWithADeletedEnd(t *testing.T) {
	s, _ := openTest(t)
	a, c := mustUser(t, s, "a"), mustUser(t, s, "c")
	pin := mustPin(t, s, mustBoard(t, s, c))
	if err := s.AddMapping(ctx, model.UserLikes, a, pin); err != nil {
		t.Fatal(err)
	}
	shP, _, _ := s.route("", pin, idcodec.TypePin)
	if _, err := shP.Host.DB.Exec("DELETE FROM "+shP.Name+".pin_likers WHERE from_id = ?", pin); err != nil {
		t.Fatal(err)
	}
	if _, err := shP.Host.DB.Exec("UPDATE "+shP.Name+".mapping_counts SET n = n - 1 WHERE from_id = ? AND mapping = ?", pin, uint8(model.PinLikers)); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, pin, idcodec.TypePin, 0); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, model.UserLikes, a); n != 1 {
		t.Fatalf("setup: likes count %d, want the stale 1", n)
	}
	rep, err := s.Repair(ctx, true, nil)
	if err != nil || rep[1].Mapping != "user_likes" || rep[1].DeadEndpoint != 1 || rep[1].MissingInverse != 0 {
		t.Fatalf("dry run %+v %v", rep, err)
	}
	if rep, err = s.Repair(ctx, false, nil); err != nil || rep[1].DeadEndpoint != 1 {
		t.Fatalf("repair %+v %v", rep, err)
	}
	if n := count(t, s, model.UserLikes, a); n != 0 {
		t.Fatalf("likes count after repair %d", n)
	}
	if n := count(t, s, model.PinLikers, pin); n != 0 {
		t.Fatalf("likers count after repair %d", n)
	}
	if rep, _ = s.Repair(ctx, false, nil); rep[1].DeadEndpoint+rep[1].MissingInverse+rep[1].OrphanInverse != 0 {
		t.Fatalf("second repair still finds %+v", rep)
	}
}

// Likes racing the pin's delete never leave a like of a deleted pin
// behind: each either lands before the delete (and is drained by it) or
// is refused with ENotFound. Found by bench/chaos.
func TestLikesRacingADelete(t *testing.T) {
	s, _ := openTest(t)
	owner := mustUser(t, s, "o")
	pin := mustPin(t, s, mustBoard(t, s, owner))
	var users []uint64
	for i := 0; i < 16; i++ {
		users = append(users, mustUser(t, s, fmt.Sprint("u", i)))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(users))
	for i, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.AddMapping(ctx, model.UserLikes, u, pin)
		}()
	}
	if err := s.Delete(ctx, pin, idcodec.TypePin, 0); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, u := range users {
		if errs[i] != nil && !model.IsCode(errs[i], model.ENotFound) {
			t.Fatalf("like %d: %v", i, errs[i])
		}
		if n := count(t, s, model.UserLikes, u); n != 0 {
			t.Fatalf("user %d likes count %d after the pin's delete (like err %v)", i, n, errs[i])
		}
	}
	if n := count(t, s, model.PinLikers, pin); n != 0 {
		t.Fatalf("likers count %d after delete", n)
	}
}

func TestShardFullLeavesNothing(t *testing.T) {
	s, _ := openTest(t)
	u := mustUser(t, s, "full")
	b := mustBoard(t, s, u)
	sh, _, _ := s.route("", b, idcodec.TypeBoard)
	if _, err := sh.Host.DB.Exec("ALTER TABLE " + sh.Name + ".pins AUTO_INCREMENT = 68719476736"); err != nil {
		t.Fatal(err)
	}
	_, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(b)}, 0)
	if !model.IsCode(err, model.EShardFull) {
		t.Fatalf("create past 2^36: %v", err)
	}
	var pins, maps int
	sh.Host.DB.QueryRow("SELECT COUNT(*) FROM " + sh.Name + ".pins").Scan(&pins)
	sh.Host.DB.QueryRow("SELECT COUNT(*) FROM " + sh.Name + ".board_pins").Scan(&maps)
	if pins != 0 || maps != 0 || count(t, s, model.BoardPins, b) != 0 {
		t.Fatalf("a failed create left %d pins, %d board_pins rows", pins, maps)
	}
}

func TestBadCreatesWriteNothing(t *testing.T) {
	s, _ := openTest(t)
	u := mustUser(t, s, "bad")
	b := mustBoard(t, s, u)
	big := json.RawMessage(`{"x":"` + strings.Repeat("y", 9000) + `"}`)
	cases := []struct {
		name string
		fn   func() error
		code string
	}{
		{"empty username", func() error { _, err := s.CreateUser(ctx, model.UserDoc{}); return err }, model.EInvalid},
		{"data not an object", func() error {
			_, err := s.CreateUser(ctx, model.UserDoc{Username: "x", Data: json.RawMessage(`[1]`)})
			return err
		}, model.EInvalid},
		{"data too large", func() error { _, err := s.CreateUser(ctx, model.UserDoc{Username: "x", Data: big}); return err }, model.ETooLarge},
		{"board of a pin id", func() error {
			_, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(idcodec.MustEncode(0, idcodec.TypePin, 1))}, 0)
			return err
		}, model.EInvalid},
		{"unknown board", func() error { _, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(b + 77)}, 0); return err }, model.ENotFound},
		{"another user's board", func() error { _, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(b)}, u+1); return err }, model.EForbidden},
		{"unknown owner", func() error {
			_, err := s.Create(ctx, idcodec.TypeBoard, &model.BoardDoc{OwnerID: model.ID(u + 77), Name: "x"}, 0)
			return err
		}, model.ENotFound},
		{"comment by unknown author", func() error {
			_, err := s.Create(ctx, idcodec.TypeComment, &model.CommentDoc{PinID: model.ID(idcodec.MustEncode(0, idcodec.TypePin, 1)), AuthorID: model.ID(u + 77), Text: "hi"}, 0)
			return err
		}, model.ENotFound},
	}
	for _, c := range cases {
		if err := c.fn(); !model.IsCode(err, c.code) {
			t.Fatalf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	sh, _, _ := s.route("", u, idcodec.TypeUser)
	var n int
	sh.Host.DB.QueryRow("SELECT (SELECT COUNT(*) FROM " + sh.Name + ".pins) + (SELECT COUNT(*) FROM " + sh.Name + ".boards) + (SELECT COUNT(*) FROM " + sh.Name + ".board_pins)").Scan(&n)
	if n != 1 { // the one board
		t.Fatalf("bad creates left rows: %d", n)
	}
}

func TestMigrateResumes(t *testing.T) {
	s, m := openTest(t)
	sh3, _ := s.router.Current().Shard(3)
	h := sh3.Host
	// Simulate an interruption: shard 3 lost a table and its version row.
	if _, err := h.DB.Exec("DROP TABLE " + m.DBName(3) + ".pin_comments"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.DB.Exec("DELETE FROM " + m.DBName(3) + ".schema_migrations"); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := s.Migrate(ctx, MigrateOptions{Progress: &out}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "migrate: 8/8 shards") {
		t.Fatalf("progress %q", out.String())
	}
	var v int
	if err := h.DB.QueryRow("SELECT COUNT(*) FROM " + m.DBName(3) + ".pin_comments").Scan(&v); err != nil {
		t.Fatalf("table not restored: %v", err)
	}
}

func TestHostDownFailsOnlyItsShards(t *testing.T) {
	second := testenv.StartHost(t, "store-down")
	s, _ := openTest(t, testenv.MySQLDSN(t), second.DSN())
	var up, down uint64
	for i := 0; (up == 0 || down == 0) && i < 200; i++ {
		u := mustUser(t, s, "x")
		if idcodec.ShardOf(u) < testShards/2 {
			up = u
		} else {
			down = u
		}
	}
	second.Stop(t)
	start := time.Now()
	_, err := s.Get(ctx, down, idcodec.TypeUser)
	if !model.IsCode(err, model.EUnavailable) || !strings.Contains(model.ErrorMessage(err), `"h1"`) {
		t.Fatalf("get on the stopped host: %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("failure took %v", el)
	}
	if strings.Contains(model.ErrorMessage(err), "127.0.0.1") {
		t.Fatalf("client message names the address: %q", model.ErrorMessage(err))
	}
	if _, err := s.Get(ctx, up, idcodec.TypeUser); err != nil {
		t.Fatalf("get on the live host: %v", err)
	}
	if _, err := s.GetMany(ctx, []uint64{up, down}, idcodec.TypeUser); !model.IsCode(err, model.EUnavailable) {
		t.Fatalf("multi-get touching the stopped host: %v", err)
	}
	ready := map[string]bool{}
	for _, h := range s.Ready(ctx) {
		ready[h.Name] = h.OK
	}
	if !ready["mysql:h0"] || ready["mysql:h1"] {
		t.Fatalf("ready %v", ready)
	}
	second.Start(t)
	if _, err := s.Get(ctx, down, idcodec.TypeUser); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

// TestMigrateShowsProgress: while migrate runs, its progress lines say
// the shards done, the rate and the time left at that rate.
func TestMigrateShowsProgress(t *testing.T) {
	s, m := openTest(t)
	sh0, _ := s.router.Current().Shard(0)
	for n := range testShards { // as new: every shard to create again
		if _, err := sh0.Host.DB.Exec("DROP DATABASE " + m.DBName(n)); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	if err := s.Migrate(ctx, MigrateOptions{PerHost: 1, Progress: w, Every: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	re := regexp.MustCompile(`(?m)^migrate: [1-7]/8 shards, [0-9.]+ shards/s, about \S+ left$`)
	if !re.MatchString(out.String()) || !strings.Contains(out.String(), "migrate: 8/8 shards in ") {
		t.Fatalf("progress:\n%s", out.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
