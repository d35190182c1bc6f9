package store

import (
	"fmt"
	"slices"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// objectsOf describes objects for comparison: id, version, times, document.
func objectsOf(objs []model.Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = fmt.Sprintf("%d %d %d %s %s %s", o.ID, o.Type, o.Version, o.CreatedAt, o.UpdatedAt, o.Doc)
	}
	return out
}

// ListObjects answers every page, by cursor in both orders and by offset,
// exactly as List followed by GetMany of its entries: on a board's pins
// (read with one joined statement), with a pin whose row is gone and an
// entry the join cannot serve, and on a list of another shard's objects.
func TestListObjectsAnswersAsListAndGetMany(t *testing.T) {
	// The joined statement, which runs without the object cache; it also
	// changes rows behind the store's back, which no cache could see.
	s, _ := openTestWith(t, func(c *Config) { c.ObjectCache.Disabled = true })
	u := mustUser(t, s, "lister")
	b := mustBoard(t, s, u)
	var pins []uint64
	for range 23 {
		pins = append(pins, mustPin(t, s, b))
	}
	if _, err := s.Update(ctx, pins[4], idcodec.TypePin, 0, func([]byte) ([]byte, error) {
		return []byte(fmt.Sprintf(`{"board_id":"%d","owner_id":"%d","link":"https://example.com/edited","active":true}`, b, u)), nil
	}); err != nil {
		t.Fatal(err)
	}
	var followers []uint64
	for i := range 9 {
		f := mustUser(t, s, fmt.Sprintf("f%d", i))
		if err := s.AddMapping(ctx, model.UserFollowing, f, u); err != nil {
			t.Fatal(err)
		}
		followers = append(followers, f)
	}

	check := func(what string, m model.Mapping, from uint64, p model.Page) {
		t.Helper()
		for {
			l, objs, err := s.ListObjects(ctx, m, from, p)
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			wl, err := s.List(ctx, m, from, p)
			if err != nil {
				t.Fatal(err)
			}
			want, err := s.GetMany(ctx, ids(wl), m.To())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(l), ids(wl)) || l.NextCursor != wl.NextCursor || l.Count != wl.Count {
				t.Fatalf("%s: page %v next %q count %d, List gives %v %q %d", what, ids(l), l.NextCursor, l.Count, ids(wl), wl.NextCursor, wl.Count)
			}
			if got, want := objectsOf(objs), objectsOf(want); !slices.Equal(got, want) {
				t.Fatalf("%s: objects\n got %q\nwant %q", what, got, want)
			}
			if l.NextCursor == "" || p.Offset > 0 {
				return
			}
			p.Cursor = l.NextCursor
		}
	}
	check("board pins, newest first", model.BoardPins, b, model.Page{Limit: 5, Desc: true})
	check("board pins, oldest first", model.BoardPins, b, model.Page{Limit: 7})
	check("board pins at offset 10", model.BoardPins, b, model.Page{Limit: 5, Offset: 10, Desc: true})
	check("followers", model.UserFollowers, u, model.Page{Limit: 4, Desc: true})

	// A pin row gone from under its list entry: skipped, its entry still paged.
	sh, _, _ := s.route("test", b, idcodec.TypeBoard)
	if _, err := sh.Host.DB.Exec("DELETE FROM "+sh.Name+".pins WHERE local_id = ?", idcodec.LocalOf(pins[10])); err != nil {
		t.Fatal(err)
	}
	// An entry naming another shard's pin, which the join cannot read.
	other := mustPin(t, s, mustBoard(t, s, followers[0]))
	for idcodec.ShardOf(other) == idcodec.ShardOf(b) {
		other = mustPin(t, s, mustBoard(t, s, mustUser(t, s, "elsewhere")))
	}
	if _, err := sh.Host.DB.Exec("INSERT INTO "+sh.Name+".board_pins (from_id, to_id, sequence) VALUES (?, ?, 1)", b, other); err != nil {
		t.Fatal(err)
	}
	l, objs, err := s.ListObjects(ctx, model.BoardPins, b, model.Page{Limit: 30, Desc: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Entries) != 24 || len(objs) != 23 || objs[len(objs)-1].ID != other || slices.ContainsFunc(objs, func(o model.Object) bool { return o.ID == pins[10] }) {
		t.Fatalf("%d entries, %d objects, last %d", len(l.Entries), len(objs), objs[len(objs)-1].ID)
	}
	check("board pins with a gone row and a foreign entry", model.BoardPins, b, model.Page{Limit: 6, Desc: true})
}
