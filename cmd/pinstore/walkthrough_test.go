package main

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The end-to-end tests walk what a client does, against the real server,
// MariaDB and Redis. Every response is validated against openapi.yaml by
// the harness's transport (serve_harness_test.go).

// Malformed IDs, by why.
const (
	vecPin       = "241294492511762325" // shard 3429: beyond the e2e shards
	vecBoard     = "241294561224164665"
	idNotDecimal = "abc"
	idOverflow   = "18446744073709551616" // 2^64
	idReserved   = "4611686018427387905"  // 1<<62 | 1
	idBadType    = "618475290625"         // shard 0, type 9, local 1
)

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// fixture is two users, alice's board with n pins, created in order.
type fixture struct {
	alice, bob object
	board      object
	pins       []string // in creation order
}

func newFixture(t *testing.T, s *server, n int) fixture {
	t.Helper()
	f := fixture{
		alice: s.create("/v1/users", map[string]any{"username": "alice", "display_name": "Alice", "data": map[string]any{"lang": "en"}}),
		bob:   s.create("/v1/users", map[string]any{"username": "bob"}),
	}
	f.board = s.create("/v1/boards", map[string]any{"owner_id": f.alice.ID, "name": "Recipes", "description": "things to cook"})
	if f.board.OwnerID != f.alice.ID {
		t.Fatalf("board owner %s, want alice %s", f.board.OwnerID, f.alice.ID)
	}
	for i := range n {
		p := s.create("/v1/pins", map[string]any{"board_id": f.board.ID, "description": fmt.Sprintf("pin %d", i), "link": "https://example.org/" + strconv.Itoa(i)})
		if p.OwnerID != f.alice.ID || p.BoardID != f.board.ID {
			t.Fatalf("pin %d: owner %s board %s; want %s %s", i, p.OwnerID, p.BoardID, f.alice.ID, f.board.ID)
		}
		f.pins = append(f.pins, p.ID)
	}
	return f
}

func equalIDs(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
	}
}

func TestServeWalkthrough(t *testing.T) {
	s := startServer(t)
	f := newFixture(t, s, 60)
	alice, bob, board := f.alice.ID, f.bob.ID, f.board.ID
	newestFirst := reversed(f.pins)

	// The objects come back as created, with their ETag.
	r := s.must(http.StatusOK, http.MethodGet, "/v1/users/"+alice, nil)
	if r.Header.Get("ETag") != `"1"` {
		t.Fatalf("GET user ETag %q", r.Header.Get("ETag"))
	}
	var u object
	r.decode(t, &u)
	if u.Username != "alice" || string(u.Data) != `{"lang":"en"}` || u.Type != "user" {
		t.Fatalf("alice = %+v", u)
	}
	if b := s.get("/v1/users/" + bob); string(b.Data) != "{}" {
		t.Fatalf("bob's data %s, want {}", b.Data)
	}

	// A board's pins, paged by cursor, newest first, whatever the page size.
	for _, limit := range []int{1, 7, 25, 60, 250} {
		ids, count := s.all("/v1/boards/"+board+"/pins", limit)
		equalIDs(t, fmt.Sprintf("board pins by cursor, limit %d", limit), ids, newestFirst)
		if count != 60 {
			t.Fatalf("board pins count %d, want 60", count)
		}
	}
	// The same by offset, and the default page.
	var byOffset []string
	for off := 0; off < 60; off += 25 {
		l := s.page(fmt.Sprintf("/v1/boards/%s/pins?limit=25&offset=%d", board, off))
		if *l.Count != 60 {
			t.Fatalf("count %d at offset %d", *l.Count, off)
		}
		byOffset = append(byOffset, l.ids()...)
	}
	equalIDs(t, "board pins by offset", byOffset, newestFirst)
	if l := s.page("/v1/boards/" + board + "/pins"); len(l.Items) != 25 || l.NextCursor == nil {
		t.Fatalf("default page: %d items, next_cursor %v; want 25 and a cursor", len(l.Items), l.NextCursor)
	}
	if l := s.page("/v1/boards/" + board + "/pins?offset=55&limit=25"); !slices.Equal(l.ids(), newestFirst[55:]) {
		t.Fatalf("last offset page %v, want %v", l.ids(), newestFirst[55:])
	}
	asc, _ := s.all("/v1/boards/"+board+"/pins?order=asc", 11)
	equalIDs(t, "board pins order=asc", asc, f.pins)
	// A cursor belongs to its list and its order.
	next := *s.page("/v1/boards/" + board + "/pins?limit=5").NextCursor
	s.fail(http.StatusBadRequest, "invalid_argument", http.MethodGet, "/v1/users/"+alice+"/pins?cursor="+url.QueryEscape(next), nil)
	s.fail(http.StatusBadRequest, "invalid_argument", http.MethodGet, "/v1/boards/"+board+"/pins?order=asc&cursor="+url.QueryEscape(next), nil)
	s.fail(http.StatusBadRequest, "invalid_argument", http.MethodGet, "/v1/boards/"+board+"/pins?cursor="+url.QueryEscape(next[:len(next)-2]+"xx"), nil)
	userPins, count := s.all("/v1/users/"+alice+"/pins", 50)
	equalIDs(t, "alice's pins", userPins, newestFirst)
	if count != 60 {
		t.Fatalf("alice's pins count %d", count)
	}
	boards, count := s.all("/v1/users/"+alice+"/boards", 10)
	equalIDs(t, "alice's boards", boards, []string{board})
	if count != 1 {
		t.Fatalf("alice's boards count %d", count)
	}

	// Move pin 10 just before pin 50, then pin 0 just after pin 59 (the top).
	order := slices.Clone(newestFirst)
	move := func(pin, anchor, where string) {
		t.Helper()
		s.must(http.StatusNoContent, http.MethodPut, "/v1/boards/"+board+"/pins/"+pin+"/position", map[string]string{where: anchor})
		i := slices.Index(order, pin)
		order = slices.Delete(order, i, i+1)
		j := slices.Index(order, anchor)
		if where == "after" {
			j++
		}
		order = slices.Insert(order, j, pin)
		ids, count := s.all("/v1/boards/"+board+"/pins", 9)
		equalIDs(t, "board pins after moving "+pin+" "+where+" "+anchor, ids, order)
		if count != 60 {
			t.Fatalf("count %d after a move", count)
		}
	}
	move(f.pins[10], f.pins[50], "before")
	move(f.pins[0], f.pins[59], "after")
	move(f.pins[59], f.pins[58], "after") // adjacent entries: forces a renumbering
	move(f.pins[30], f.pins[10], "before")
	// The board's order is its own: alice's pins stay newest first.
	userPins, _ = s.all("/v1/users/"+alice+"/pins", 50)
	equalIDs(t, "alice's pins after moves", userPins, newestFirst)

	// Follow: idempotent, both sides listed, counted.
	for range 2 {
		s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+bob+"/following/"+alice, nil)
	}
	following, n := s.all("/v1/users/"+bob+"/following", 10)
	equalIDs(t, "bob follows", following, []string{alice})
	followers, m := s.all("/v1/users/"+alice+"/followers", 10)
	equalIDs(t, "alice's followers", followers, []string{bob})
	if n != 1 || m != 1 {
		t.Fatalf("following count %d, followers count %d; want 1, 1", n, m)
	}
	// Bob's feed: alice's pins, newest first, by cursor; no count.
	feed, _ := s.all("/v1/users/"+bob+"/feed", 25)
	equalIDs(t, "bob's feed", feed, newestFirst)
	if l := s.page("/v1/users/" + bob + "/feed?limit=5"); l.Count != nil {
		t.Fatalf("the feed has a count: %d", *l.Count)
	}
	if feed, _ := s.all("/v1/users/"+alice+"/feed", 25); len(feed) != 0 {
		t.Fatalf("alice follows nobody, yet her feed holds %v", feed)
	}
	// Unfollow empties the feed, and follow brings it back.
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/users/"+bob+"/following/"+alice, nil)
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/users/"+bob+"/following/"+alice, nil)
	if feed, _ := s.all("/v1/users/"+bob+"/feed", 25); len(feed) != 0 {
		t.Fatalf("feed after unfollow: %v", feed)
	}
	if c := s.count("/v1/users/" + alice + "/followers"); c != 0 {
		t.Fatalf("followers count %d after unfollow", c)
	}
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+bob+"/following/"+alice, nil)

	// Likes, with their counts on both sides.
	p0, p1, p2 := f.pins[0], f.pins[1], f.pins[2]
	for _, p := range []string{p0, p1, p2, p1} { // p1 twice: idempotent
		s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+bob+"/likes/"+p, nil)
	}
	time.Sleep(3 * time.Millisecond) // a list orders by time in ms, then by id: keep the likes apart
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+alice+"/likes/"+p0, nil)
	likes, c := s.all("/v1/users/"+bob+"/likes", 2)
	equalIDs(t, "bob's likes", likes, []string{p2, p1, p0})
	if c != 3 {
		t.Fatalf("bob's likes count %d, want 3", c)
	}
	likers, c := s.all("/v1/pins/"+p0+"/likers", 10)
	equalIDs(t, "p0's likers", likers, []string{alice, bob})
	if c != 2 {
		t.Fatalf("p0's likers count %d, want 2", c)
	}
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/users/"+bob+"/likes/"+p2, nil)
	if c := s.count("/v1/users/" + bob + "/likes"); c != 2 {
		t.Fatalf("bob's likes count %d after an unlike, want 2", c)
	}
	if c := s.count("/v1/pins/" + p2 + "/likers"); c != 0 {
		t.Fatalf("p2's likers count %d after an unlike, want 0", c)
	}

	// Comments.
	cm := s.create("/v1/pins/"+p1+"/comments", map[string]any{"author_id": bob, "text": "looks good"})
	if cm.PinID != p1 || cm.AuthorID != bob || cm.Text != "looks good" {
		t.Fatalf("comment %+v", cm)
	}
	comments, c := s.all("/v1/pins/"+p1+"/comments", 10)
	equalIDs(t, "p1's comments", comments, []string{cm.ID})
	if c != 1 {
		t.Fatalf("comments count %d", c)
	}
	if got := s.get("/v1/comments/" + cm.ID); got.Text != "looks good" {
		t.Fatalf("GET comment: %+v", got)
	}

	// Delete p0: it leaves every list it was in, and is gone.
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/pins/"+p0, nil)
	s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/pins/"+p0, nil)
	s.fail(http.StatusNotFound, "not_found", http.MethodDelete, "/v1/pins/"+p0, nil)
	s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/pins/"+p0+"/likers", nil)
	without := func(ids []string, drop string) []string {
		return slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == drop })
	}
	order = without(order, p0)
	ids, c := s.all("/v1/boards/"+board+"/pins", 25)
	equalIDs(t, "board pins after deleting p0", ids, order)
	if c != 59 {
		t.Fatalf("board pins count %d after a delete, want 59", c)
	}
	ids, c = s.all("/v1/users/"+alice+"/pins", 25)
	equalIDs(t, "alice's pins after deleting p0", ids, without(newestFirst, p0))
	if c != 59 {
		t.Fatalf("alice's pins count %d after a delete, want 59", c)
	}
	ids, c = s.all("/v1/users/"+bob+"/likes", 25)
	equalIDs(t, "bob's likes after deleting p0", ids, []string{p1})
	if c != 1 {
		t.Fatalf("bob's likes count %d after a delete, want 1", c)
	}
	ids, c = s.all("/v1/users/"+alice+"/likes", 25)
	if len(ids) != 0 || c != 0 {
		t.Fatalf("alice's likes after deleting the pin she liked: %v, count %d", ids, c)
	}
	feed, _ = s.all("/v1/users/"+bob+"/feed", 100)
	equalIDs(t, "bob's feed after deleting p0", feed, without(newestFirst, p0))

	// Delete a comment: it leaves the pin's comments.
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/comments/"+cm.ID, nil)
	s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/comments/"+cm.ID, nil)
	if c := s.count("/v1/pins/" + p1 + "/comments"); c != 0 {
		t.Fatalf("comments count %d after a delete", c)
	}

	// Multi-get: request order, duplicates once, not_found for unknown,
	// deleted and wrong-type ids.
	unknownPin := unknownSibling(t, f.pins[5])
	var many struct {
		Items    []object `json:"items"`
		NotFound []string `json:"not_found"`
	}
	s.must(http.StatusOK, http.MethodGet, "/v1/pins?ids="+strings.Join([]string{f.pins[5], p0, board, f.pins[3], f.pins[5], unknownPin, f.pins[40]}, ","), nil).decode(t, &many)
	got := make([]string, len(many.Items))
	for i, o := range many.Items {
		got[i] = o.ID
	}
	equalIDs(t, "multi-get items", got, []string{f.pins[5], f.pins[3], f.pins[40]})
	equalIDs(t, "multi-get not_found", many.NotFound, []string{p0, board, unknownPin})
	s.must(http.StatusOK, http.MethodGet, "/v1/users?ids="+bob+","+alice, nil).decode(t, &many)
	if len(many.Items) != 2 || many.Items[0].ID != bob || many.Items[1].ID != alice || len(many.NotFound) != 0 {
		t.Fatalf("users multi-get: %+v", many)
	}
	s.must(http.StatusOK, http.MethodGet, "/v1/boards?ids="+board+","+alice, nil).decode(t, &many)
	if len(many.Items) != 1 || many.Items[0].ID != board || !slices.Equal(many.NotFound, []string{alice}) {
		t.Fatalf("boards multi-get: %+v", many)
	}

	// Owners, in a batch.
	var owners struct {
		Owners   map[string]string `json:"owners"`
		NotFound []string          `json:"not_found"`
	}
	s.must(http.StatusOK, http.MethodPost, "/v1/pins/owners", map[string]any{"ids": []string{f.pins[5], p0, unknownPin, f.pins[6], f.pins[5]}}).decode(t, &owners)
	if len(owners.Owners) != 2 || owners.Owners[f.pins[5]] != alice || owners.Owners[f.pins[6]] != alice {
		t.Fatalf("owners: %+v", owners)
	}
	equalIDs(t, "owners not_found", owners.NotFound, []string{p0, unknownPin})
	// Twice more: the second answer comes from the cache and must agree.
	for range 2 {
		owners.Owners, owners.NotFound = nil, nil
		s.must(http.StatusOK, http.MethodPost, "/v1/pins/owners", map[string]any{"ids": f.pins[1:]}).decode(t, &owners)
		if len(owners.Owners) != 59 || len(owners.NotFound) != 0 {
			t.Fatalf("owners of 59 live pins: %d owners, not found %v", len(owners.Owners), owners.NotFound)
		}
	}

	// Edits: merge patch, ETag and If-Match.
	p5 := f.pins[5]
	r = s.must(http.StatusOK, http.MethodPatch, "/v1/pins/"+p5, `{"description":"edited","data":{"a":{"b":1}}}`, "Content-Type", "application/merge-patch+json", "If-Match", `"1"`)
	var edited object
	r.decode(t, &edited)
	if r.Header.Get("ETag") != `"2"` || edited.Version != 2 || edited.Description != "edited" || string(edited.Data) != `{"a":{"b":1}}` {
		t.Fatalf("after PATCH: ETag %q, %+v", r.Header.Get("ETag"), edited)
	}
	r = s.must(http.StatusOK, http.MethodPatch, "/v1/pins/"+p5, `{"data":{"a":{"c":2}},"link":null}`)
	r.decode(t, &edited)
	if edited.Version != 3 || string(edited.Data) != `{"a":{"b":1,"c":2}}` {
		t.Fatalf("merge of data: %+v", edited)
	}
	if link := s.get("/v1/pins/" + p5); link.Version != 3 {
		t.Fatalf("GET after PATCH: version %d", link.Version)
	}
	s.fail(http.StatusPreconditionFailed, "version_mismatch", http.MethodPatch, "/v1/pins/"+p5, `{"description":"lost update"}`, "If-Match", `"2"`)
	s.fail(http.StatusPreconditionFailed, "version_mismatch", http.MethodDelete, "/v1/pins/"+p5, nil, "If-Match", `"1"`)
	s.fail(http.StatusPreconditionFailed, "version_mismatch", http.MethodDelete, "/v1/pins/"+p5, nil, "If-Match", `W/"3"`)
	if after := s.get("/v1/pins/" + p5); after.Version != 3 || after.Description != "edited" {
		t.Fatalf("a refused conditional write changed the pin: %+v", after)
	}
	s.must(http.StatusOK, http.MethodPatch, "/v1/users/"+bob, `{"display_name":"Bob"}`, "If-Match", `"1"`)
	s.must(http.StatusOK, http.MethodPatch, "/v1/boards/"+board, `{"name":"Dinners"}`, "If-Match", "*")
	if got := s.get("/v1/boards/" + board); got.Name != "Dinners" || got.Description != "things to cook" {
		t.Fatalf("board after PATCH: %+v", got)
	}
	cm2 := s.create("/v1/pins/"+p5+"/comments", map[string]any{"author_id": alice, "text": "first"})
	s.must(http.StatusOK, http.MethodPatch, "/v1/comments/"+cm2.ID, `{"text":"second"}`)
	if got := s.get("/v1/comments/" + cm2.ID); got.Text != "second" || got.Version != 2 {
		t.Fatalf("comment after PATCH: %+v", got)
	}
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/pins/"+p5, nil, "If-Match", `"3"`)
	s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/pins/"+p5, nil)

	// Deleting the board deletes its pins, which leave every list.
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/boards/"+board, nil)
	s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/boards/"+board+"/pins", nil)
	if c := s.count("/v1/users/" + alice + "/boards"); c != 0 {
		t.Fatalf("alice's boards count %d after deleting her board", c)
	}
	if ids, c := s.all("/v1/users/"+alice+"/pins", 100); len(ids) != 0 || c != 0 {
		t.Fatalf("alice's pins after deleting her board: %v, count %d", ids, c)
	}
	if ids, c := s.all("/v1/users/"+bob+"/likes", 100); len(ids) != 0 || c != 0 {
		t.Fatalf("bob's likes after deleting the board: %v, count %d", ids, c)
	}
	// The owner cache forgets them too.
	owners.Owners, owners.NotFound = nil, nil
	s.must(http.StatusOK, http.MethodPost, "/v1/pins/owners", map[string]any{"ids": f.pins}).decode(t, &owners)
	if len(owners.Owners) != 0 || len(owners.NotFound) != 60 {
		t.Fatalf("owners of the deleted board's pins: %d owners, %d not found", len(owners.Owners), len(owners.NotFound))
	}
	s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/pins/"+f.pins[7], nil)
	if feed, _ := s.all("/v1/users/"+bob+"/feed", 100); len(feed) != 0 {
		t.Fatalf("bob's feed after the board's deletion: %v", feed)
	}

	// Deleting a user.
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/users/"+bob, nil)
	s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/users/"+bob, nil)
	if c := s.count("/v1/users/" + alice + "/followers"); c != 0 {
		t.Fatalf("alice's followers count %d after deleting her follower", c)
	}
}
