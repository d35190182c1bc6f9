package store

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// countsOf is an object's counts by name.
func countsOf(o model.Object) map[string]int64 {
	out := map[string]int64{}
	for i, m := range model.Counted(o.Type) {
		out[m.CountName()] = o.Counts[i]
	}
	return out
}

// Objects carry the lengths of their lists, read with them: from Get, from
// a multi-get, from a list page (joined or not), and zero on create.
func TestObjectsCarryTheirCounts(t *testing.T) {
	s, _ := openTest(t)
	a, b, c := mustUser(t, s, "a"), mustUser(t, s, "b"), mustUser(t, s, "c")
	board := mustBoard(t, s, a)
	pin := mustPin(t, s, board)
	mustPin(t, s, board)
	for _, u := range []uint64{b, c} {
		if err := s.AddMapping(ctx, model.UserLikes, u, pin); err != nil {
			t.Fatal(err)
		}
		if err := s.AddMapping(ctx, model.UserFollowing, u, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddMapping(ctx, model.UserFollowing, a, b); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, idcodec.TypeComment, &model.CommentDoc{PinID: model.ID(pin), AuthorID: model.ID(b), Text: "hi"}, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SavePin(ctx, pin, mustBoard(t, s, mustUser(t, s, "d")), 0); err != nil {
		t.Fatal(err)
	}
	wantPin := map[string]int64{"likes": 2, "comments": 1, "saves": 1}
	wantA := map[string]int64{"followers": 2, "following": 1, "boards": 1, "pins": 2}
	check := func(how string, o model.Object, want map[string]int64) {
		t.Helper()
		if got := countsOf(o); !mapsEqual(got, want) {
			t.Fatalf("%s: counts %v, want %v", how, got, want)
		}
	}
	p, err := s.Get(ctx, pin, idcodec.TypePin)
	if err != nil {
		t.Fatal(err)
	}
	check("Get pin", p, wantPin)
	u, _ := s.Get(ctx, a, idcodec.TypeUser)
	check("Get user", u, wantA)
	bo, _ := s.Get(ctx, board, idcodec.TypeBoard)
	check("Get board", bo, map[string]int64{"pins": 2, "sections": 0})
	many, err := s.GetMany(ctx, []uint64{pin}, idcodec.TypePin)
	if err != nil || len(many) != 1 {
		t.Fatal(err)
	}
	check("GetMany", many[0], wantPin)
	_, objs, err := s.ListObjects(ctx, model.BoardPins, board, model.Page{Limit: 10})
	if err != nil || len(objs) != 2 {
		t.Fatal(err)
	}
	i := slices.IndexFunc(objs, func(o model.Object) bool { return o.ID == pin })
	check("a board page (joined)", objs[i], wantPin)
	_, objs, err = s.ListObjects(ctx, model.PinLikers, pin, model.Page{Limit: 10})
	if err != nil || len(objs) != 2 {
		t.Fatal(err)
	}
	check("a likers page (multi-get): b, whom a follows", objs[0], map[string]int64{"followers": 1, "following": 1, "boards": 0, "pins": 0})
	// Concurrent reads batched into one statement carry them too.
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if o, err := s.Get(ctx, pin, idcodec.TypePin); err != nil || !mapsEqual(countsOf(o), wantPin) {
				t.Errorf("concurrent Get: %v %v", countsOf(o), err)
			}
		})
	}
	wg.Wait()
	np, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(board)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	check("a new pin", np, map[string]int64{"likes": 0, "comments": 0, "saves": 0})
	up, err := s.Update(ctx, pin, idcodec.TypePin, 0, func(doc []byte) ([]byte, error) { return doc, nil })
	if err != nil {
		t.Fatal(err)
	}
	check("Update", up, wantPin)
	if l, err := s.List(ctx, model.UserLikes, b, model.Page{}); err != nil || l.Count != 1 {
		t.Fatalf("a list's count not among its owner's (likes of a user): %d %v", l.Count, err)
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Likes of one viral pin by many users at once keep its count exact.
func TestViralPinCountIsExact(t *testing.T) {
	s, _ := openTest(t)
	pin := mustPin(t, s, mustBoard(t, s, mustUser(t, s, "star")))
	var users []uint64
	for range 40 {
		users = append(users, mustUser(t, s, "fan"))
	}
	var wg sync.WaitGroup
	for _, u := range users {
		wg.Go(func() {
			for range 3 { // idempotent: liked once however often
				if err := s.AddMapping(ctx, model.UserLikes, u, pin); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	p, err := s.Get(ctx, pin, idcodec.TypePin)
	if err != nil || countsOf(p)["likes"] != 40 {
		t.Fatalf("likes %v, want 40 (%v)", countsOf(p), err)
	}
	if got := all(t, s, model.PinLikers, pin, 100, true); len(got) != 40 {
		t.Fatalf("%d likers listed", len(got))
	}
	for _, u := range users[:15] {
		if err := s.RemoveMapping(ctx, model.UserLikes, u, pin); err != nil {
			t.Fatal(err)
		}
	}
	if p, _ := s.Get(ctx, pin, idcodec.TypePin); countsOf(p)["likes"] != 25 {
		t.Fatalf("likes after 15 unlikes %v", countsOf(p))
	}
}

// Does a user like these pins, follow these users: in request order,
// from one statement on their shard.
func TestHasMany(t *testing.T) {
	s, _ := openTest(t)
	u, v, w := mustUser(t, s, "u"), mustUser(t, s, "v"), mustUser(t, s, "w")
	board := mustBoard(t, s, v)
	p1, p2, p3 := mustPin(t, s, board), mustPin(t, s, board), mustPin(t, s, board)
	for _, p := range []uint64{p1, p3} {
		if err := s.AddMapping(ctx, model.UserLikes, u, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddMapping(ctx, model.UserFollowing, u, w); err != nil {
		t.Fatal(err)
	}
	got, err := s.HasMany(ctx, model.UserLikes, u, []uint64{p3, p2, p1, p3 + 1000})
	if err != nil || !slices.Equal(got, []bool{true, false, true, false}) {
		t.Fatalf("likes %v %v", got, err)
	}
	got, err = s.HasMany(ctx, model.UserFollowing, u, []uint64{v, w})
	if err != nil || !slices.Equal(got, []bool{false, true}) {
		t.Fatalf("following %v %v", got, err)
	}
	if _, err := s.HasMany(ctx, model.UserLikes, u+1000, []uint64{p1}); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("an unknown user: %v", err)
	}
	if _, err := s.HasMany(ctx, model.UserLikes, u, make([]uint64, MaxHasMany+1)); !model.IsCode(err, model.EInvalid) {
		t.Fatalf("too many ids: %v", err)
	}
}

// HasMany reads that its user is live as any read by id does: from the
// object cache when it is on (a hit, no read on MySQL), never older than a
// write acknowledged before it began; from MySQL when the cache is off.
func TestHasManyReadsItsUserFromTheCache(t *testing.T) {
	for _, cached := range []bool{true, false} {
		t.Run(fmt.Sprintf("cache=%v", cached), func(t *testing.T) {
			s, _ := openTestWith(t, func(c *Config) { c.ObjectCache.Disabled = !cached })
			u, v := mustUser(t, s, "u"), mustUser(t, s, "v")
			if err := s.AddMapping(ctx, model.UserFollowing, u, v); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(ctx, u, idcodec.TypeUser); err != nil { // fills the cache
				t.Fatal(err)
			}
			reads0 := testutil.ToFloat64(s.readStats.Jobs)
			var hits0 int64
			if cached {
				hits0 = s.objects.cache.Stats().Hits.Load()
			}
			const n = 5
			for range n {
				got, err := s.HasMany(ctx, model.UserFollowing, u, []uint64{v, u})
				if err != nil || !slices.Equal(got, []bool{true, false}) {
					t.Fatalf("following %v %v", got, err)
				}
			}
			reads := testutil.ToFloat64(s.readStats.Jobs) - reads0
			if cached {
				if hits := s.objects.cache.Stats().Hits.Load() - hits0; reads != 0 || hits != n {
					t.Fatalf("%d checks: %v reads by id on MySQL, %d cache hits; want 0 and %d", n, reads, hits, n)
				}
			} else if reads != n {
				t.Fatalf("%d checks without the cache: %v reads by id, want %d", n, reads, n)
			}
			if err := s.Delete(ctx, u, idcodec.TypeUser, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := s.HasMany(ctx, model.UserFollowing, u, []uint64{v}); !model.IsCode(err, model.ENotFound) {
				t.Fatalf("the user just deleted: %v", err)
			}
		})
	}
}

// Lists in time order take a time range and page within it by cursor; a
// board ordered by hand refuses one.
func TestTimeRanges(t *testing.T) {
	s, _ := openTest(t)
	u := mustUser(t, s, "u")
	board := mustBoard(t, s, u)
	var pins []uint64
	var marks []time.Time
	for range 6 {
		marks = append(marks, time.Now())
		time.Sleep(3 * time.Millisecond)
		pins = append(pins, mustPin(t, s, board))
		time.Sleep(3 * time.Millisecond)
	}
	since, until := marks[1], marks[4] // pins 1, 2, 3
	got := pageAll(t, model.Page{Limit: 2, Desc: true, Since: since, Until: until}, func(p model.Page) (model.List, error) {
		return s.List(ctx, model.UserPins, u, p)
	})
	if !slices.Equal(got, []uint64{pins[3], pins[2], pins[1]}) {
		t.Fatalf("user pins in [since, until) by pages of 2: %v, want %v", got, pins[1:4])
	}
	got = pageAll(t, model.Page{Limit: 2, Since: since}, func(p model.Page) (model.List, error) {
		return s.List(ctx, model.BoardPins, board, p)
	})
	if !slices.Equal(got, pins[1:]) {
		t.Fatalf("board pins since, oldest first: %v", got)
	}
	if _, err := s.List(ctx, model.UserPins, u, model.Page{Since: until, Until: since}); !model.IsCode(err, model.EInvalid) {
		t.Fatalf("since after until: %v", err)
	}
	// Ordered by hand: its sequences are no longer times.
	if err := s.Move(ctx, model.BoardPins, board, pins[0], pins[5], 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(ctx, model.BoardPins, board, model.Page{Since: since}); !model.IsCode(err, model.EInvalid) {
		t.Fatalf("a time range on a board ordered by hand: %v", err)
	}
	if _, err := s.List(ctx, model.UserPins, u, model.Page{Since: since}); err != nil {
		t.Fatalf("the user's own pins stay in time order: %v", err)
	}
	// The feed is in time order too.
	f := mustUser(t, s, "f")
	if err := s.AddMapping(ctx, model.UserFollowing, f, u); err != nil {
		t.Fatal(err)
	}
	waitFeed(t, s)
	fl, err := s.Feed(ctx, f, model.Page{Limit: 10, Since: since, Until: until})
	if err != nil || !slices.Equal(ids(fl), []uint64{pins[3], pins[2], pins[1]}) {
		t.Fatalf("feed in range %v %v", ids(fl), err)
	}
}
