package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	pinstore "github.com/pinstore/pinstore"
	"github.com/pinstore/pinstore/api"
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

// unknownSibling returns a pin ID on the same shard as pin that no object
// has (a local id far beyond any assigned).
func unknownSibling(t *testing.T, pin string) string {
	t.Helper()
	id, err := strconv.ParseUint(pin, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatUint(id&^(1<<36-1)|(1<<36-2), 10)
}

// snapshot is what a refused request must leave unchanged.
type snapshot struct {
	boardPins, userPins, boards, likes, likers, followers, comments int64
	pinVersion, boardVersion, userVersion                           int64
	boardPinIDs                                                     string
}

func (f fixture) snapshot(s *server) snapshot {
	s.t.Helper()
	ids, _ := s.all("/v1/boards/"+f.board.ID+"/pins", 250)
	return snapshot{
		boardPins:    s.count("/v1/boards/" + f.board.ID + "/pins"),
		userPins:     s.count("/v1/users/" + f.alice.ID + "/pins"),
		boards:       s.count("/v1/users/" + f.alice.ID + "/boards"),
		likes:        s.count("/v1/users/" + f.bob.ID + "/likes"),
		likers:       s.count("/v1/pins/" + f.pins[0] + "/likers"),
		followers:    s.count("/v1/users/" + f.alice.ID + "/followers"),
		comments:     s.count("/v1/pins/" + f.pins[0] + "/comments"),
		pinVersion:   s.get("/v1/pins/" + f.pins[0]).Version,
		boardVersion: s.get("/v1/boards/" + f.board.ID).Version,
		userVersion:  s.get("/v1/users/" + f.alice.ID).Version,
		boardPinIDs:  strings.Join(ids, ","),
	}
}

func TestServeErrorsWriteNothing(t *testing.T) {
	s := startServer(t)
	f := newFixture(t, s, 3)
	alice, bob, board, pin := f.alice.ID, f.bob.ID, f.board.ID, f.pins[0]
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+bob+"/likes/"+pin, nil)
	// Two followers of alice and a second board, so that real cursors of
	// one list can be tried on another.
	carol := s.create("/v1/users", map[string]any{"username": "carol"}).ID
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+bob+"/following/"+alice, nil)
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+carol+"/following/"+alice, nil)
	board2 := s.create("/v1/boards", map[string]any{"owner_id": alice, "name": "Other"}).ID
	boardCursor := *s.page("/v1/boards/" + board + "/pins?limit=1").NextCursor
	followersCursor := *s.page("/v1/users/" + alice + "/followers?limit=1").NextCursor
	// A secret board of alice with a pin, and bob's own board and token:
	// to bob the secret ones are as absent as missing ones.
	secretBoard := s.create("/v1/boards", map[string]any{"owner_id": alice, "name": "Secret", "secret": true}).ID
	secretPin := s.create("/v1/pins", map[string]any{"board_id": secretBoard}).ID
	bobBoard := s.create("/v1/boards", map[string]any{"owner_id": bob, "name": "Bob's"}).ID
	asBob := bearerHdr(mintUserToken(t, bob, "1h"))
	before := f.snapshot(s)
	beforeDB := s.dbState()

	big := strings.Repeat("x", 70<<10)
	bigData := map[string]any{"board_id": board, "data": map[string]string{"blob": strings.Repeat("y", 9<<10)}}
	// Nesting: 10000 levels (far beyond any limit), and 40 levels (small,
	// within the data limit, but deeper than MariaDB's JSON_VALID accepts).
	deepArrays := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObjects := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	pinBody := func(rest string) string { return `{"board_id":"` + board + `",` + rest + `}` }
	reservedPin := func(bit uint) string {
		id, _ := strconv.ParseUint(pin, 10, 64)
		return strconv.FormatUint(id|1<<bit, 10)
	}
	idMaxUint64 := "18446744073709551615"
	idHuge := strings.Repeat("9", 1000)
	position := "/v1/boards/" + board + "/pins/" + pin + "/position"
	cases := []hostileCase{
		// Malformed ids: 400. Well-formed ids of the wrong type: 404.
		{"id not decimal", 400, "invalid_argument", "GET", "/v1/pins/" + idNotDecimal, nil, nil, "not a decimal"},
		{"id overflows", 400, "invalid_argument", "GET", "/v1/pins/" + idOverflow, nil, nil, "not a decimal"},
		{"id with reserved bits", 400, "invalid_argument", "GET", "/v1/pins/" + idReserved, nil, nil, "reserved"},
		{"id of unknown type", 400, "invalid_argument", "GET", "/v1/pins/" + idBadType, nil, nil, "unknown type"},
		{"id on an unconfigured shard", 400, "invalid_argument", "GET", "/v1/pins/" + vecPin, nil, nil, ""},
		{"list of an unconfigured shard", 400, "invalid_argument", "GET", "/v1/boards/" + vecBoard + "/pins", nil, nil, ""},
		{"like a pin on an unconfigured shard", 400, "invalid_argument", "PUT", "/v1/users/" + bob + "/likes/" + vecPin, nil, nil, ""},
		{"multi-get on an unconfigured shard", 400, "invalid_argument", "GET", "/v1/pins?ids=" + pin + "," + vecPin, nil, nil, ""},
		{"owners on an unconfigured shard", 400, "invalid_argument", "POST", "/v1/pins/owners", map[string]any{"ids": []string{pin, vecPin}}, nil, ""},
		{"pin on a board of an unconfigured shard", 400, "invalid_argument", "POST", "/v1/pins", map[string]any{"board_id": vecBoard}, nil, ""},
		{"id with a sign", 400, "invalid_argument", "GET", "/v1/users/+" + alice, nil, nil, ""},
		{"id with leading zero", 400, "invalid_argument", "GET", "/v1/users/0" + alice, nil, nil, ""},
		{"like a malformed pin", 400, "invalid_argument", "PUT", "/v1/users/" + bob + "/likes/" + idNotDecimal, nil, nil, "pin_id"},
		{"follow a malformed user", 400, "invalid_argument", "PUT", "/v1/users/" + bob + "/following/" + idReserved, nil, nil, "target_id"},
		{"follow oneself", 400, "invalid_argument", "PUT", "/v1/users/" + bob + "/following/" + bob, nil, nil, ""},
		{"board id as pin", 404, "not_found", "GET", "/v1/pins/" + board, nil, nil, ""},
		{"pin id as user", 404, "not_found", "GET", "/v1/users/" + pin, nil, nil, ""},
		{"delete a board id as pin", 404, "not_found", "DELETE", "/v1/pins/" + board, nil, nil, ""},
		{"patch a user id as board", 404, "not_found", "PATCH", "/v1/boards/" + alice, `{"name":"x"}`, nil, ""},
		{"like a board", 404, "not_found", "PUT", "/v1/users/" + bob + "/likes/" + board, nil, nil, ""},
		{"unlike a board", 404, "not_found", "DELETE", "/v1/users/" + bob + "/likes/" + board, nil, nil, ""},
		{"like an unknown pin", 404, "not_found", "PUT", "/v1/users/" + bob + "/likes/" + unknownSibling(t, pin), nil, nil, ""},
		{"list pins of a pin id as board", 404, "not_found", "GET", "/v1/boards/" + pin + "/pins", nil, nil, ""},
		{"comment on a board", 404, "not_found", "POST", "/v1/pins/" + board + "/comments", map[string]any{"author_id": bob, "text": "x"}, nil, ""},
		{"board of an unknown owner", 404, "not_found", "POST", "/v1/boards", map[string]any{"owner_id": unknownSibling(t, alice), "name": "x"}, nil, ""},
		{"pin on an unknown board", 404, "not_found", "POST", "/v1/pins", map[string]any{"board_id": unknownSibling(t, board)}, nil, ""},

		// Bodies.
		{"body over 64 KiB", 413, "too_large", "POST", "/v1/pins", `{"board_id":"` + board + `","description":"` + big + `"}`, nil, ""},
		{"data over its limit", 413, "too_large", "POST", "/v1/pins", bigData, nil, "data"},
		{"patch data over its limit", 413, "too_large", "PATCH", "/v1/pins/" + pin, map[string]any{"data": map[string]string{"blob": strings.Repeat("y", 9<<10)}}, nil, ""},
		{"text/plain body", 415, "unsupported_media_type", "POST", "/v1/pins", `{"board_id":"` + board + `"}`, []string{"Content-Type", "text/plain"}, ""},
		{"no content type", 415, "unsupported_media_type", "POST", "/v1/boards", `{"owner_id":"` + alice + `","name":"x"}`, []string{"Content-Type", ""}, ""},
		{"patch as text/plain", 415, "unsupported_media_type", "PATCH", "/v1/pins/" + pin, `{"description":"x"}`, []string{"Content-Type", "text/plain"}, ""},
		{"merge-patch to a create", 415, "unsupported_media_type", "POST", "/v1/users", `{"username":"carol"}`, []string{"Content-Type", "application/merge-patch+json"}, ""},
		{"invalid JSON", 400, "invalid_argument", "POST", "/v1/pins", `{"board_id":`, nil, "JSON"},
		{"invalid JSON in a patch", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, `{"description":}`, nil, "JSON"},
		{"trailing data", 400, "invalid_argument", "POST", "/v1/pins", `{"board_id":"` + board + `"} {}`, nil, "trailing"},
		{"trailing data in a patch", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, `{"description":"x"}]`, nil, ""},
		{"unknown field", 400, "invalid_argument", "POST", "/v1/pins", map[string]any{"board_id": board, "color": "red"}, nil, "color"},
		{"owner_id on a pin", 400, "invalid_argument", "POST", "/v1/pins", map[string]any{"board_id": board, "owner_id": bob}, nil, "owner_id"},
		{"empty body", 400, "invalid_argument", "POST", "/v1/pins", "", nil, ""},
		{"array body", 400, "invalid_argument", "POST", "/v1/pins", `[]`, nil, ""},
		{"wrong JSON type", 400, "invalid_argument", "POST", "/v1/pins", `{"board_id":12}`, nil, "board_id"},
		{"board_id of a user", 400, "invalid_argument", "POST", "/v1/pins", map[string]any{"board_id": alice}, nil, "board_id"},
		{"missing board_id", 400, "invalid_argument", "POST", "/v1/pins", map[string]any{"description": "x"}, nil, "board_id"},
		{"bad username", 400, "invalid_argument", "POST", "/v1/users", map[string]any{"username": "no spaces"}, nil, "username"},
		{"data not an object", 400, "invalid_argument", "POST", "/v1/users", map[string]any{"username": "carol", "data": []int{1}}, nil, "data"},

		// Patches.
		{"patch owner_id", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, map[string]any{"owner_id": bob}, nil, "owner_id"},
		{"patch board_id", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, map[string]any{"board_id": board}, nil, "board_id"},
		{"patch id", 400, "invalid_argument", "PATCH", "/v1/users/" + alice, map[string]any{"id": alice}, nil, "read-only"},
		{"patch version", 400, "invalid_argument", "PATCH", "/v1/users/" + alice, map[string]any{"version": 7}, nil, "read-only"},
		{"patch created_at", 400, "invalid_argument", "PATCH", "/v1/boards/" + board, map[string]any{"created_at": "2020-01-01T00:00:00Z"}, nil, "read-only"},
		{"patch active", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, map[string]any{"active": false}, nil, "active"},
		{"patch an unknown field", 400, "invalid_argument", "PATCH", "/v1/users/" + alice, map[string]any{"bio": "x"}, nil, "bio"},
		{"patch removes a required field", 400, "invalid_argument", "PATCH", "/v1/users/" + alice, `{"username":null}`, nil, "username"},
		{"patch a wrong JSON type", 400, "invalid_argument", "PATCH", "/v1/boards/" + board, `{"name":5}`, nil, "name"},
		{"patch that is not an object", 400, "invalid_argument", "PATCH", "/v1/boards/" + board, `"name"`, nil, ""},
		{"If-Match not an entity tag", 400, "invalid_argument", "PATCH", "/v1/boards/" + board, `{"name":"x"}`, []string{"If-Match", "1"}, ""},
		{"If-Match stale", 412, "version_mismatch", "PATCH", "/v1/boards/" + board, `{"name":"x"}`, []string{"If-Match", `"9"`}, ""},
		{"If-Match stale on delete", 412, "version_mismatch", "DELETE", "/v1/boards/" + board, nil, []string{"If-Match", `"9"`}, ""},

		// Moves.
		{"move with both anchors", 400, "invalid_argument", "PUT", "/v1/boards/" + board + "/pins/" + pin + "/position", map[string]any{"before": f.pins[1], "after": f.pins[2]}, nil, ""},
		{"move with no anchor", 400, "invalid_argument", "PUT", "/v1/boards/" + board + "/pins/" + pin + "/position", map[string]any{}, nil, ""},
		{"move next to itself", 400, "invalid_argument", "PUT", "/v1/boards/" + board + "/pins/" + pin + "/position", map[string]any{"before": pin}, nil, ""},
		{"move before a board", 400, "invalid_argument", "PUT", "/v1/boards/" + board + "/pins/" + pin + "/position", map[string]any{"before": board}, nil, "before"},
		{"move before an unknown pin", 404, "not_found", "PUT", "/v1/boards/" + board + "/pins/" + pin + "/position", map[string]any{"before": unknownSibling(t, pin)}, nil, ""},

		// Paging.
		{"limit 0", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?limit=0", nil, nil, "limit"},
		{"limit negative", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?limit=-1", nil, nil, "limit"},
		{"limit 251", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?limit=251", nil, nil, "limit"},
		{"limit not a number", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?limit=ten", nil, nil, "limit"},
		{"limit empty", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?limit=", nil, nil, "limit"},
		{"limit twice", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?limit=1&limit=2", nil, nil, "limit"},
		{"offset negative", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?offset=-1", nil, nil, "offset"},
		{"offset too deep", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?offset=1000001", nil, nil, "offset"},
		{"order sideways", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?order=sideways", nil, nil, "order"},
		{"bad cursor", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?cursor=garbage", nil, nil, ""},
		{"cursor and offset", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?cursor=abc&offset=1", nil, nil, ""},
		{"feed with offset", 400, "invalid_argument", "GET", "/v1/users/" + bob + "/feed?offset=0", nil, nil, "offset"},
		{"feed with order", 400, "invalid_argument", "GET", "/v1/users/" + bob + "/feed?order=asc", nil, nil, "order"},
		{"feed bad limit", 400, "invalid_argument", "GET", "/v1/users/" + bob + "/feed?limit=0", nil, nil, "limit"},
		{"feed bad cursor", 400, "invalid_argument", "GET", "/v1/users/" + bob + "/feed?cursor=garbage", nil, nil, ""},

		// Multi-get and owners.
		{"multi-get without ids", 400, "invalid_argument", "GET", "/v1/pins", nil, nil, "ids"},
		{"multi-get malformed id", 400, "invalid_argument", "GET", "/v1/pins?ids=" + pin + "," + idNotDecimal, nil, nil, "ids[1]"},
		{"multi-get over 100", 400, "invalid_argument", "GET", "/v1/pins?ids=" + strings.TrimSuffix(strings.Repeat(pin+",", 101), ","), nil, nil, "100"},
		{"owners malformed", 400, "invalid_argument", "POST", "/v1/pins/owners", map[string]any{"ids": []string{pin, "x1"}}, nil, `ids[1] "x1"`},
		{"owners of a board", 400, "invalid_argument", "POST", "/v1/pins/owners", map[string]any{"ids": []string{pin, pin, board}}, nil, "ids[2] \"" + board + "\""},
		{"owners number", 400, "invalid_argument", "POST", "/v1/pins/owners", `{"ids":[12]}`, nil, "ids[0]"},
		{"owners over 1000", 400, "invalid_argument", "POST", "/v1/pins/owners", map[string]any{"ids": slices.Repeat([]string{pin}, 1001)}, nil, "1000"},
		{"owners without ids", 400, "invalid_argument", "POST", "/v1/pins/owners", `{}`, nil, "ids"},
		{"owners as text/plain", 415, "unsupported_media_type", "POST", "/v1/pins/owners", `{"ids":[]}`, []string{"Content-Type", "text/plain"}, ""},

		// JSON nested thousands deep, at the top level and in data.
		{"top level nested 10000 arrays", 400, "invalid_argument", "POST", "/v1/pins", deepArrays(10000), nil, ""},
		{"top level nested 10000 objects", 400, "invalid_argument", "POST", "/v1/pins", deepObjects(10000), nil, ""},
		{"data nested 10000 arrays", 400, "invalid_argument", "POST", "/v1/pins", pinBody(`"data":{"a":` + deepArrays(10000) + `}`), nil, ""},
		{"data nested 10000 objects", 400, "invalid_argument", "POST", "/v1/pins", pinBody(`"data":` + deepObjects(10000)), nil, ""},
		{"data nested 40 objects", 400, "invalid_argument", "POST", "/v1/pins", pinBody(`"data":` + deepObjects(40)), nil, "nested"},
		{"user data nested 40 arrays", 400, "invalid_argument", "POST", "/v1/users", `{"username":"deep","data":{"a":` + deepArrays(40) + `}}`, nil, "nested"},
		{"patch nested 10000 arrays", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, deepArrays(10000), nil, ""},
		{"patch data nested 10000 objects", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, `{"data":` + deepObjects(10000) + `}`, nil, ""},
		{"patch data nested 40 objects", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, `{"data":` + deepObjects(40) + `}`, nil, "nested"},
		{"owners nested 10000 arrays", 400, "invalid_argument", "POST", "/v1/pins/owners", `{"ids":` + deepArrays(10000) + `}`, nil, ""},
		{"move nested 10000 objects", 400, "invalid_argument", "PUT", position, deepObjects(10000), nil, ""},

		// Invalid UTF-8 (raw bytes, not escapes) and lone surrogate escapes.
		{"invalid UTF-8 in a pin description", 400, "invalid_argument", "POST", "/v1/pins", pinBody("\"description\":\"bad \xff\xfe\""), nil, "UTF-8"},
		{"invalid UTF-8 in a username", 400, "invalid_argument", "POST", "/v1/users", "{\"username\":\"a\xff\xfe\"}", nil, ""},
		{"invalid UTF-8 in a display_name", 400, "invalid_argument", "POST", "/v1/users", "{\"username\":\"dora\",\"display_name\":\"\xff\xfe\"}", nil, "UTF-8"},
		{"invalid UTF-8 in a board name", 400, "invalid_argument", "POST", "/v1/boards", "{\"owner_id\":\"" + alice + "\",\"name\":\"\xff\xfe\"}", nil, "UTF-8"},
		{"invalid UTF-8 in a comment", 400, "invalid_argument", "POST", "/v1/pins/" + pin + "/comments", "{\"author_id\":\"" + bob + "\",\"text\":\"\xff\xfe\"}", nil, "UTF-8"},
		{"invalid UTF-8 in data", 400, "invalid_argument", "POST", "/v1/pins", pinBody("\"data\":{\"k\":\"\xff\xfe\"}"), nil, "UTF-8"},
		{"invalid UTF-8 in a data key", 400, "invalid_argument", "POST", "/v1/pins", pinBody("\"data\":{\"\xff\xfe\":1}"), nil, "UTF-8"},
		{"invalid UTF-8 in an owners id", 400, "invalid_argument", "POST", "/v1/pins/owners", "{\"ids\":[\"\xff\xfe\"]}", nil, ""},
		{"UTF-8 encoded surrogate", 400, "invalid_argument", "POST", "/v1/pins", pinBody("\"description\":\"\xed\xa0\x80\""), nil, "UTF-8"},
		{"overlong UTF-8", 400, "invalid_argument", "POST", "/v1/pins", pinBody("\"description\":\"\xc0\xaf\""), nil, "UTF-8"},
		{"patch invalid UTF-8 in a description", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, "{\"description\":\"bad \xff\xfe\"}", nil, "UTF-8"},
		{"patch invalid UTF-8 in data", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, "{\"data\":{\"k\":\"\xff\xfe\"}}", nil, "UTF-8"},
		{"patch invalid UTF-8 in a field name", 400, "invalid_argument", "PATCH", "/v1/users/" + alice, "{\"\xff\xfe\":1}", nil, ""},
		{"lone surrogate escape in data", 400, "invalid_argument", "POST", "/v1/pins", pinBody(`"data":{"k":"\ud800"}`), nil, "surrogate"},
		{"reversed surrogate escapes in data", 400, "invalid_argument", "POST", "/v1/pins", pinBody(`"data":{"k":"\udc00\ud800"}`), nil, "surrogate"},
		{"lone surrogate escape in a description", 400, "invalid_argument", "POST", "/v1/pins", pinBody(`"description":"\ud83d"`), nil, "surrogate"},
		{"patch lone surrogate escape in data", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, `{"data":{"\udfff":1}}`, nil, "surrogate"},

		// IDs: negative, beyond 2^64, with reserved bits, in every place an
		// id goes.
		{"negative id", 400, "invalid_argument", "GET", "/v1/pins/-5", nil, nil, "not a decimal"},
		{"negative id of a list", 400, "invalid_argument", "GET", "/v1/users/-5/followers", nil, nil, "not a decimal"},
		{"negative like target", 400, "invalid_argument", "PUT", "/v1/users/" + bob + "/likes/-5", nil, nil, "pin_id"},
		{"negative follow target", 400, "invalid_argument", "DELETE", "/v1/users/" + bob + "/following/-5", nil, nil, "target_id"},
		{"negative pin to move", 400, "invalid_argument", "PUT", "/v1/boards/" + board + "/pins/-5/position", map[string]any{"before": f.pins[1]}, nil, "pin_id"},
		{"negative board_id", 400, "invalid_argument", "POST", "/v1/pins", map[string]any{"board_id": "-5"}, nil, "board_id"},
		{"negative owner_id", 400, "invalid_argument", "POST", "/v1/boards", map[string]any{"owner_id": "-5", "name": "x"}, nil, "owner_id"},
		{"negative author_id", 400, "invalid_argument", "POST", "/v1/pins/" + pin + "/comments", map[string]any{"author_id": "-5", "text": "x"}, nil, "author_id"},
		{"negative anchor", 400, "invalid_argument", "PUT", position, map[string]any{"after": "-5"}, nil, "after"},
		{"negative id in a multi-get", 400, "invalid_argument", "GET", "/v1/pins?ids=" + pin + ",-5", nil, nil, "ids[1]"},
		{"negative id in owners", 400, "invalid_argument", "POST", "/v1/pins/owners", map[string]any{"ids": []string{"-5"}}, nil, "ids[0]"},
		{"negative number in owners", 400, "invalid_argument", "POST", "/v1/pins/owners", `{"ids":[-5]}`, nil, "ids[0]"},
		{"id of 2^64 in a list path", 400, "invalid_argument", "GET", "/v1/boards/" + idOverflow + "/pins", nil, nil, "not a decimal"},
		{"id of 1000 digits", 400, "invalid_argument", "GET", "/v1/users/" + idHuge, nil, nil, "not a decimal"},
		{"like target of 2^64", 400, "invalid_argument", "PUT", "/v1/users/" + bob + "/likes/" + idOverflow, nil, nil, "pin_id"},
		{"board_id of 2^64", 400, "invalid_argument", "POST", "/v1/pins", map[string]any{"board_id": idOverflow}, nil, "board_id"},
		{"owner_id of 1000 digits", 400, "invalid_argument", "POST", "/v1/boards", map[string]any{"owner_id": idHuge, "name": "x"}, nil, "owner_id"},
		{"anchor of 2^64", 400, "invalid_argument", "PUT", position, map[string]any{"before": idOverflow}, nil, "before"},
		{"id of 2^64 in a multi-get", 400, "invalid_argument", "GET", "/v1/users?ids=" + alice + "," + idOverflow, nil, nil, "ids[1]"},
		{"id of 2^64 in owners", 400, "invalid_argument", "POST", "/v1/pins/owners", map[string]any{"ids": []string{pin, idOverflow}}, nil, "ids[1]"},
		{"id with bit 63 set", 400, "invalid_argument", "GET", "/v1/pins/" + reservedPin(63), nil, nil, "reserved"},
		{"id with bit 62 set", 400, "invalid_argument", "DELETE", "/v1/pins/" + reservedPin(62), nil, nil, "reserved"},
		{"max uint64 id", 400, "invalid_argument", "PATCH", "/v1/pins/" + idMaxUint64, `{"description":"x"}`, nil, "reserved"},
		{"reserved bits in a list path", 400, "invalid_argument", "GET", "/v1/pins/" + reservedPin(63) + "/likers", nil, nil, "reserved"},
		{"reserved bits in a like target", 400, "invalid_argument", "PUT", "/v1/users/" + bob + "/likes/" + reservedPin(62), nil, nil, "reserved"},
		{"reserved bits in board_id", 400, "invalid_argument", "POST", "/v1/pins", map[string]any{"board_id": idReserved}, nil, "board_id"},
		{"reserved bits in author_id", 400, "invalid_argument", "POST", "/v1/pins/" + pin + "/comments", map[string]any{"author_id": idMaxUint64, "text": "x"}, nil, "author_id"},
		{"reserved bits in an anchor", 400, "invalid_argument", "PUT", position, map[string]any{"before": reservedPin(63)}, nil, "before"},
		{"reserved bits in a multi-get", 400, "invalid_argument", "GET", "/v1/pins?ids=" + reservedPin(62), nil, nil, "reserved"},
		{"reserved bits in owners", 400, "invalid_argument", "POST", "/v1/pins/owners", map[string]any{"ids": []string{pin, reservedPin(63)}}, nil, "reserved"},
		{"id as a float", 400, "invalid_argument", "GET", "/v1/pins/1e5", nil, nil, "not a decimal"},
		{"id in hex", 400, "invalid_argument", "GET", "/v1/pins/0x10", nil, nil, "not a decimal"},
		{"id in Arabic-Indic digits", 400, "invalid_argument", "GET", "/v1/pins/" + url.PathEscape("١٢٣"), nil, nil, "not a decimal"},

		// Secret boards, to another user: 404 as for a missing object, and
		// their flag is the owner's to change; saves: strict bodies.
		{"stranger reads a secret pin", 404, "not_found", "GET", "/v1/pins/" + secretPin, nil, asBob, "pin not found"},
		{"stranger lists a secret board", 404, "not_found", "GET", "/v1/boards/" + secretBoard + "/pins", nil, asBob, "board not found"},
		{"stranger makes a secret board public", 404, "not_found", "PATCH", "/v1/boards/" + secretBoard, `{"secret":false}`, asBob, "board not found"},
		{"stranger makes a board secret", 403, "forbidden", "PATCH", "/v1/boards/" + board, `{"secret":true}`, asBob, "another user"},
		{"stranger deletes a secret pin", 404, "not_found", "DELETE", "/v1/pins/" + secretPin, nil, asBob, "not found"},
		{"stranger pins on a secret board", 404, "not_found", "POST", "/v1/pins", map[string]any{"board_id": secretBoard}, asBob, "board not found"},
		{"stranger likes a secret pin", 404, "not_found", "PUT", "/v1/users/" + bob + "/likes/" + secretPin, nil, asBob, "pin not found"},
		{"stranger comments on a secret pin", 404, "not_found", "POST", "/v1/pins/" + secretPin + "/comments", map[string]any{"author_id": bob, "text": "hi"}, asBob, "pin not found"},
		{"stranger saves a secret pin", 404, "not_found", "POST", "/v1/pins/" + secretPin + "/saves", map[string]any{"board_id": bobBoard}, asBob, "pin not found"},
		{"service token saves a secret pin for a stranger", 404, "not_found", "POST", "/v1/pins/" + secretPin + "/saves", map[string]any{"board_id": bobBoard}, nil, "pin not found"},
		{"save to another's board", 403, "forbidden", "POST", "/v1/pins/" + pin + "/saves", map[string]any{"board_id": board}, asBob, ""},
		{"save without a board", 400, "invalid_argument", "POST", "/v1/pins/" + pin + "/saves", map[string]any{}, nil, "board_id"},
		{"save with an unknown field", 400, "invalid_argument", "POST", "/v1/pins/" + pin + "/saves", map[string]any{"board_id": bobBoard, "secret": true}, nil, ""},
		{"save of an unknown pin", 404, "not_found", "POST", "/v1/pins/" + unknownSibling(t, pin) + "/saves", map[string]any{"board_id": bobBoard}, nil, ""},
		{"save to an unknown board", 404, "not_found", "POST", "/v1/pins/" + pin + "/saves", map[string]any{"board_id": unknownSibling(t, board)}, nil, ""},
		{"secret that is no boolean", 400, "invalid_argument", "POST", "/v1/boards", map[string]any{"owner_id": alice, "name": "x", "secret": "yes"}, nil, ""},
		{"patch a board's secret with a string", 400, "invalid_argument", "PATCH", "/v1/boards/" + board, `{"secret":"yes"}`, nil, ""},
		{"patch a pin's secret", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, `{"secret":true}`, nil, "read-only"},
		{"patch a pin's saved_from", 400, "invalid_argument", "PATCH", "/v1/pins/" + pin, `{"saved_from":"` + f.pins[1] + `"}`, nil, "read-only"},

		// Cursors: tampered, foreign, duplicated.
		{"tampered cursor", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?cursor=" + url.QueryEscape(flipMiddle(boardCursor)), nil, nil, "cursor"},
		{"truncated cursor", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?cursor=" + url.QueryEscape(boardCursor[:len(boardCursor)-1]), nil, nil, "cursor"},
		{"cursor with padding", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?cursor=" + url.QueryEscape(boardCursor+"="), nil, nil, "cursor"},
		{"cursor of another board", 400, "invalid_argument", "GET", "/v1/boards/" + board2 + "/pins?cursor=" + url.QueryEscape(boardCursor), nil, nil, "cursor"},
		{"cursor of the other order", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?order=asc&cursor=" + url.QueryEscape(boardCursor), nil, nil, "cursor"},
		{"board cursor on a user's pins", 400, "invalid_argument", "GET", "/v1/users/" + alice + "/pins?cursor=" + url.QueryEscape(boardCursor), nil, nil, "cursor"},
		{"followers cursor on following", 400, "invalid_argument", "GET", "/v1/users/" + alice + "/following?cursor=" + url.QueryEscape(followersCursor), nil, nil, "cursor"},
		{"followers cursor of another user", 400, "invalid_argument", "GET", "/v1/users/" + bob + "/followers?cursor=" + url.QueryEscape(followersCursor), nil, nil, "cursor"},
		{"followers cursor on the feed", 400, "invalid_argument", "GET", "/v1/users/" + alice + "/feed?cursor=" + url.QueryEscape(followersCursor), nil, nil, "cursor"},
		{"cursor twice", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?cursor=" + url.QueryEscape(boardCursor) + "&cursor=" + url.QueryEscape(boardCursor), nil, nil, "cursor"},
		{"feed cursor twice", 400, "invalid_argument", "GET", "/v1/users/" + bob + "/feed?cursor=a&cursor=b", nil, nil, "cursor"},

		// Paging parameters out of range or given twice.
		{"limit 1000000", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?limit=1000000", nil, nil, "limit"},
		{"limit beyond int64", 400, "invalid_argument", "GET", "/v1/users/" + alice + "/followers?limit=99999999999999999999", nil, nil, "limit"},
		{"feed limit 1000000", 400, "invalid_argument", "GET", "/v1/users/" + bob + "/feed?limit=1000000", nil, nil, "limit"},
		{"offset beyond int64", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?offset=99999999999999999999", nil, nil, "offset"},
		{"offset twice", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?offset=0&offset=1", nil, nil, "offset"},
		{"order twice", 400, "invalid_argument", "GET", "/v1/boards/" + board + "/pins?order=asc&order=desc", nil, nil, "order"},
		{"ids twice", 400, "invalid_argument", "GET", "/v1/pins?ids=" + pin + "&ids=" + f.pins[1], nil, nil, "ids"},
		{"users ids twice", 400, "invalid_argument", "GET", "/v1/users?ids=" + alice + "&ids=" + bob, nil, nil, "ids"},
		{"boards ids twice", 400, "invalid_argument", "GET", "/v1/boards?ids=" + board + "&ids=" + board, nil, nil, "ids"},

		// Multi-gets over the maximum, and bodies over the limit, on every
		// route that takes them.
		{"users multi-get over 100", 400, "invalid_argument", "GET", "/v1/users?ids=" + strings.TrimSuffix(strings.Repeat(alice+",", 101), ","), nil, nil, "100"},
		{"boards multi-get over 100", 400, "invalid_argument", "GET", "/v1/boards?ids=" + strings.TrimSuffix(strings.Repeat(board+",", 101), ","), nil, nil, "100"},
		{"multi-get of 1000 ids", 400, "invalid_argument", "GET", "/v1/pins?ids=" + strings.TrimSuffix(strings.Repeat(pin+",", 1000), ","), nil, nil, "100"},
		{"user body over 64 KiB", 413, "too_large", "POST", "/v1/users", `{"username":"dora","display_name":"` + big + `"}`, nil, ""},
		{"board body over 64 KiB", 413, "too_large", "POST", "/v1/boards", `{"owner_id":"` + alice + `","name":"` + big + `"}`, nil, ""},
		{"comment body over 64 KiB", 413, "too_large", "POST", "/v1/pins/" + pin + "/comments", `{"author_id":"` + bob + `","text":"` + big + `"}`, nil, ""},
		{"patch body over 64 KiB", 413, "too_large", "PATCH", "/v1/pins/" + pin, `{"description":"` + big + `"}`, nil, ""},
		{"owners body over 64 KiB", 413, "too_large", "POST", "/v1/pins/owners", `{"ids":["` + big + `"]}`, nil, ""},
		{"move body over 64 KiB", 413, "too_large", "PUT", position, `{"before":"` + big + `"}`, nil, ""},
		{"body of 1 MiB", 413, "too_large", "POST", "/v1/pins", pinBody(`"description":"` + strings.Repeat("z", 1<<20) + `"`), nil, ""},
		{"body over 64 KiB of whitespace", 413, "too_large", "POST", "/v1/pins", pinBody(strings.Repeat(" ", 70<<10) + `"link":""`), nil, ""},
	}
	cases = append(cases, sqlInjectionCases(f, board2)...)
	cases = append(cases, ambiguousJSONCases(f)...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := &server{t: t, base: s.base, client: s.client, logs: s.logs}
			s.client = &http.Client{Timeout: s.client.Timeout, Transport: retarget(s.client.Transport, t)}
			p := s.fail(c.status, c.code, c.method, c.path, c.body, c.headers...)
			if !strings.Contains(p.Detail, c.detail) {
				t.Errorf("detail %q does not mention %q", p.Detail, c.detail)
			}
			u, err := url.Parse(c.path)
			if err != nil {
				t.Fatal(err)
			}
			if p.Instance != u.Path {
				t.Errorf("instance %q, want %q", p.Instance, u.Path)
			}
		})
	}
	if after := f.snapshot(s); after != before {
		t.Fatalf("refused requests changed state:\nbefore %+v\nafter  %+v", before, after)
	}
	s.requireSameDB(beforeDB, s.dbState())
	t.Logf("%d hostile requests refused; %d tables unchanged", len(cases), len(beforeDB))
}

// hostileCase is one request TestServeErrorsWriteNothing expects refused.
type hostileCase struct {
	name    string
	status  int
	code    string
	method  string
	path    string
	body    any
	headers []string
	detail  string // a substring the detail must hold
}

// flipMiddle returns s with its middle character changed (to another
// character of the base64url alphabet).
func flipMiddle(s string) string {
	b := []byte(s)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// sqlInjection are classic injection strings. Where a field or parameter
// has a syntax (ids, usernames, limits, cursors), they must be refused
// before any query; free text stores them verbatim (see
// TestServeStoresInjectionVerbatim).
var sqlInjection = []string{
	`'; DROP TABLE objects; --`,
	`" OR 1=1 --`,
	`1 UNION SELECT local_id, doc FROM pins --`,
	`1; DROP DATABASE db00000`,
	`1' OR '1'='1`,
	`1)) OR SLEEP(5)#`,
	`\'; DELETE FROM users WHERE 1=1; --`,
}

// sqlInjectionCases puts every injection string in every path parameter,
// query parameter and syntactic body field.
func sqlInjectionCases(f fixture, board2 string) []hostileCase {
	alice, bob, board, pin := f.alice.ID, f.bob.ID, f.board.ID, f.pins[0]
	var cases []hostileCase
	for i, inj := range sqlInjection {
		p, q := url.PathEscape(inj), url.QueryEscape(inj)
		j, err := json.Marshal(inj)
		if err != nil {
			panic(err)
		}
		js := string(j)
		add := func(name string, status int, code, method, path string, body any, detail string, headers ...string) {
			cases = append(cases, hostileCase{fmt.Sprintf("sqli %d %s", i, name), status, code, method, path, body, headers, detail})
		}
		const bad = "invalid_argument"
		// Path parameters.
		add("in a pin id", 400, bad, "GET", "/v1/pins/"+p, nil, "id")
		add("in a comment id", 400, bad, "GET", "/v1/comments/"+p, nil, "id")
		add("in a patched board id", 400, bad, "PATCH", "/v1/boards/"+p, `{"name":"x"}`, "id")
		add("in a deleted user id", 400, bad, "DELETE", "/v1/users/"+p, nil, "id")
		add("in an id to decode", 400, bad, "GET", "/v1/ids/"+p, nil, "id")
		add("in a list owner", 400, bad, "GET", "/v1/users/"+p+"/followers", nil, "id")
		add("in a board of a list", 400, bad, "GET", "/v1/boards/"+p+"/pins", nil, "id")
		add("in a feed owner", 400, bad, "GET", "/v1/users/"+p+"/feed", nil, "id")
		add("in a like target", 400, bad, "PUT", "/v1/users/"+bob+"/likes/"+p, nil, "pin_id")
		add("in an unlike target", 400, bad, "DELETE", "/v1/users/"+bob+"/likes/"+p, nil, "pin_id")
		add("in a follow target", 400, bad, "PUT", "/v1/users/"+bob+"/following/"+p, nil, "target_id")
		add("in a liker", 400, bad, "PUT", "/v1/users/"+p+"/likes/"+pin, nil, "id")
		add("in a pin to move", 400, bad, "PUT", "/v1/boards/"+board+"/pins/"+p+"/position", map[string]any{"before": f.pins[1]}, "pin_id")
		add("in a pin to comment", 400, bad, "POST", "/v1/pins/"+p+"/comments", map[string]any{"author_id": bob, "text": "x"}, "id")
		// Query parameters.
		add("in ids", 400, bad, "GET", "/v1/pins?ids="+q, nil, "ids[0]")
		add("in users ids", 400, bad, "GET", "/v1/users?ids="+alice+","+q, nil, "ids[1]")
		add("in boards ids", 400, bad, "GET", "/v1/boards?ids="+q+","+board2, nil, "ids[0]")
		add("in a cursor", 400, bad, "GET", "/v1/boards/"+board+"/pins?cursor="+q, nil, "cursor")
		add("in a feed cursor", 400, bad, "GET", "/v1/users/"+bob+"/feed?cursor="+q, nil, "cursor")
		add("in limit", 400, bad, "GET", "/v1/boards/"+board+"/pins?limit="+q, nil, "limit")
		add("in offset", 400, bad, "GET", "/v1/users/"+alice+"/followers?offset="+q, nil, "offset")
		add("in order", 400, bad, "GET", "/v1/boards/"+board+"/pins?order="+q, nil, "order")
		add("as a query parameter name", 400, bad, "GET", "/v1/pins?"+q+"=1", nil, "ids")
		// Body fields with a syntax, and field names.
		add("in username", 400, bad, "POST", "/v1/users", `{"username":`+js+`}`, "username")
		add("in a patched username", 400, bad, "PATCH", "/v1/users/"+alice, `{"username":`+js+`}`, "username")
		add("in owner_id", 400, bad, "POST", "/v1/boards", `{"owner_id":`+js+`,"name":"x"}`, "owner_id")
		add("in board_id", 400, bad, "POST", "/v1/pins", `{"board_id":`+js+`}`, "board_id")
		add("in author_id", 400, bad, "POST", "/v1/pins/"+pin+"/comments", `{"author_id":`+js+`,"text":"x"}`, "author_id")
		add("in before", 400, bad, "PUT", "/v1/boards/"+board+"/pins/"+pin+"/position", `{"before":`+js+`}`, "before")
		add("in after", 400, bad, "PUT", "/v1/boards/"+board+"/pins/"+pin+"/position", `{"after":`+js+`}`, "after")
		add("in owners ids", 400, bad, "POST", "/v1/pins/owners", `{"ids":["`+pin+`",`+js+`]}`, "ids[1]")
		add("as a create field name", 400, bad, "POST", "/v1/pins", `{"board_id":"`+board+`",`+js+`:"x"}`, "")
		add("as a patch field name", 400, bad, "PATCH", "/v1/pins/"+pin, `{`+js+`:"x"}`, "")
		// Headers.
		add("in If-Match", 400, bad, "PATCH", "/v1/boards/"+board, `{"name":"x"}`, "If-Match", "If-Match", inj)
		if strings.Contains(inj, ",") { // a list of entity tags
			add("in a quoted If-Match", 400, bad, "DELETE", "/v1/pins/"+pin, nil, "If-Match", "If-Match", js)
		} else { // an entity tag no version has
			add("in a quoted If-Match", 412, "version_mismatch", "DELETE", "/v1/pins/"+pin, nil, "If-Match", "If-Match", js)
		}
	}
	return cases
}

// retarget returns the spec-validating transport reporting to t.
func retarget(rt http.RoundTripper, t *testing.T) http.RoundTripper {
	st := *rt.(*specTransport)
	st.t = t
	return &st
}

// TestServeStoresInjectionVerbatim: SQL injection strings in free-text
// fields (and in the keys and values of data) are ordinary text: they are
// accepted, stored verbatim (as the shard row shows), read back byte for
// byte through every read path, and no table is harmed. So are data nested
// to the deepest level a body may have, one level short of what MariaDB's
// JSON_VALID refuses.
func TestServeStoresInjectionVerbatim(t *testing.T) {
	s := startServer(t)
	tablesBefore := s.dbState()
	texts := append(slices.Clone(sqlInjection),
		"Robert'); DROP TABLE students;--",
		"`; SHOW DATABASES; `",
		`%_\% LIKE wildcards and a backslash \`,
		"/* comment */ SELECT 1; -- ",
		`0x27 CHAR(39) \x27 \' \\`,
		"NUL \x00 inside, a line\nbreak, a\ttab",
		"emoji \U0001F600, U+2028 \u2028 and U+FFFE \ufffe",
	)
	type stored struct {
		id, board string
		text      string
	}
	var all []stored
	// verify reads an object back by GET and multi-get and checks its
	// text fields and data hold exactly what was sent.
	verify := func(coll, id string, want map[string]string, data map[string]string) {
		t.Helper()
		bodies := [][]byte{s.must(http.StatusOK, http.MethodGet, "/v1/"+coll+"/"+id, nil).Body}
		if coll != "comments" { // comments have no multi-get
			var many struct {
				Items []json.RawMessage `json:"items"`
			}
			s.must(http.StatusOK, http.MethodGet, "/v1/"+coll+"?ids="+id, nil).decode(t, &many)
			if len(many.Items) != 1 {
				t.Fatalf("multi-get of %s: %d items", id, len(many.Items))
			}
			bodies = append(bodies, many.Items[0])
		}
		for _, body := range bodies {
			var got map[string]json.RawMessage
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			for field, w := range want {
				var v string
				if err := json.Unmarshal(got[field], &v); err != nil || v != w {
					t.Fatalf("%s %s: %s is %q, want %q byte for byte", coll, id, field, v, w)
				}
			}
			var d map[string]string
			if err := json.Unmarshal(got["data"], &d); err != nil || !maps.Equal(d, data) {
				t.Fatalf("%s %s: data %s, want %v", coll, id, got["data"], data)
			}
		}
	}
	owner := s.create("/v1/users", map[string]any{"username": "robert_tables"}).ID
	for i, text := range texts {
		// Each text is also a member name of data, except one holding NUL:
		// a name with NUL is refused (ambiguous_json, see
		// ambiguousJSONCases), a value with NUL is kept.
		data := map[string]string{"k": text}
		if !strings.ContainsRune(text, 0) {
			data[text] = "v"
		}
		u := s.create("/v1/users", map[string]any{"username": fmt.Sprintf("u%d", i), "display_name": text, "data": data}).ID
		verify("users", u, map[string]string{"display_name": text}, data)
		b := s.create("/v1/boards", map[string]any{"owner_id": owner, "name": text, "description": text, "data": data}).ID
		verify("boards", b, map[string]string{"name": text, "description": text}, data)
		p := s.create("/v1/pins", map[string]any{"board_id": b, "description": text, "link": text, "image_url": text, "data": data}).ID
		verify("pins", p, map[string]string{"description": text, "link": text, "image_url": text}, data)
		c := s.create("/v1/pins/"+p+"/comments", map[string]any{"author_id": u, "text": text, "data": data}).ID
		verify("comments", c, map[string]string{"text": text}, data)
		all = append(all, stored{p, b, text})
		// The same through a patch, as JSON and as a merge patch.
		patched := text + " (patched)"
		pdata := maps.Clone(data)
		pdata["k"] = patched
		s.must(http.StatusOK, http.MethodPatch, "/v1/pins/"+p, map[string]any{"description": patched, "data": map[string]any{"k": patched}})
		verify("pins", p, map[string]string{"description": patched, "link": text}, pdata)
		s.must(http.StatusOK, http.MethodPatch, "/v1/comments/"+c, map[string]any{"text": patched}, "Content-Type", "application/merge-patch+json")
		verify("comments", c, map[string]string{"text": patched}, data)
		all[len(all)-1].text = patched
	}
	// The lists hold them too, and the shard rows hold the text itself.
	var l list
	s.must(http.StatusOK, http.MethodGet, "/v1/users/"+owner+"/pins?limit=250&order=asc", nil).decode(t, &l)
	if len(l.Items) != len(all) {
		t.Fatalf("%d pins listed, want %d", len(l.Items), len(all))
	}
	db, err := sqlx.Open("mysql", s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i, st := range all {
		if l.Items[i].ID != st.id || l.Items[i].Description != st.text {
			t.Fatalf("pin %d listed as %s %q, want %s %q", i, l.Items[i].ID, l.Items[i].Description, st.id, st.text)
		}
		id, err := strconv.ParseUint(st.id, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		var doc []byte
		table := quoteIdent(fmt.Sprintf("%s%05d", s.prefix, id>>46&0xffff)) + ".pins"
		if err := db.Get(&doc, "SELECT doc FROM "+table+" WHERE local_id = ?", id&(1<<36-1)); err != nil {
			t.Fatalf("read pin %s from its shard: %v", st.id, err)
		}
		var row struct{ Description string }
		if err := json.Unmarshal(doc, &row); err != nil || row.Description != st.text {
			t.Fatalf("pin %s's row holds description %q (%v), want %q", st.id, row.Description, err, st.text)
		}
	}

	// Data nested as deep as a body may nest: the body's object is level
	// 1, so data holds MaxJSONDepth-1 levels.
	deepest := strings.Repeat(`{"a":`, api.MaxJSONDepth-1) + `"x"` + strings.Repeat("}", api.MaxJSONDepth-1)
	p := s.create("/v1/pins", `{"board_id":"`+s.create("/v1/boards", map[string]any{"owner_id": owner, "name": "deep"}).ID+`","data":`+deepest+`}`)
	if got := s.get("/v1/pins/" + p.ID); string(got.Data) != deepest {
		t.Fatalf("deepest data came back as %s", got.Data)
	}
	s.must(http.StatusOK, http.MethodPatch, "/v1/pins/"+p.ID, `{"data":`+deepest+`}`)
	s.fail(http.StatusBadRequest, "invalid_argument", http.MethodPatch, "/v1/pins/"+p.ID, `{"data":{"b":`+deepest+`}}`)

	// Numbers at the edges of what every parser reads alike are kept as
	// written; beyond them (1e999999, an integer beyond 2^53-1) they are
	// refused (ambiguousJSONCases), since each client would read another
	// number or none.
	edges := `{"m":9007199254740991,"n":-1.7976931348623157e308,"o":1e-400,"p":0.30000000000000004}`
	p = s.create("/v1/pins", `{"board_id":"`+all[0].board+`","data":`+edges+`}`)
	if got := s.get("/v1/pins/" + p.ID); string(got.Data) != edges {
		t.Fatalf("edge numbers came back as %s", got.Data)
	}
	for _, huge := range []string{`{"m":123456789012345678901234567890}`, `{"n":1e999999}`} {
		s.fail(http.StatusBadRequest, "ambiguous_json", http.MethodPost, "/v1/pins", `{"board_id":"`+all[0].board+`","data":`+huge+`}`)
	}

	// Every table of every shard is still there.
	tablesAfter := s.dbState()
	if !slices.Equal(slices.Sorted(maps.Keys(tablesBefore)), slices.Sorted(maps.Keys(tablesAfter))) {
		t.Fatalf("the shard tables changed:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(tablesBefore)), slices.Sorted(maps.Keys(tablesAfter)))
	}
}

func TestServeOperational(t *testing.T) {
	s := startServer(t)

	var health struct{ Status string }
	s.must(http.StatusOK, http.MethodGet, "/healthz", nil).decode(t, &health)
	if health.Status != "ok" {
		t.Fatalf("healthz status %q", health.Status)
	}
	var ready struct {
		Status string
		Checks []struct {
			Name string
			OK   bool
		}
	}
	s.must(http.StatusOK, http.MethodGet, "/readyz", nil).decode(t, &ready)
	names := []string{}
	for _, c := range ready.Checks {
		names = append(names, c.Name)
		if !c.OK {
			t.Errorf("readyz check %s not ok", c.Name)
		}
	}
	if ready.Status != "ok" || !slices.Contains(names, "redis") || !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "mysql:") }) {
		t.Fatalf("readyz: %+v", ready)
	}

	// The spec, as embedded, and its HTML rendering.
	if r := s.must(http.StatusOK, http.MethodGet, "/openapi.yaml", nil); string(r.Body) != string(pinstore.OpenAPI) {
		t.Fatalf("/openapi.yaml differs from the embedded spec")
	}
	// The docs page and its renderer (rendered in a browser by
	// TestDocsInBrowser).
	if docs := string(s.must(http.StatusOK, http.MethodGet, "/docs", nil).Body); !strings.Contains(docs, `<script src="docs/redoc.standalone.js">`) {
		t.Fatalf("/docs does not load the renderer:\n%s", docs)
	}
	s.must(http.StatusOK, http.MethodGet, "/docs/redoc.standalone.js", nil)

	// IDs decode to the published vectors.
	for _, v := range []struct {
		id         string
		shard, typ int
		name       string
		local      uint64
	}{
		{"241294492511762325", 3429, 1, "pin", 7075733},
		{"241294561224164665", 3429, 2, "board", 1337},
		{"241294629943640797", 3429, 3, "user", 733},
	} {
		var info struct {
			ID       string `json:"id"`
			Shard    int    `json:"shard"`
			Type     int    `json:"type"`
			TypeName string `json:"type_name"`
			LocalID  uint64 `json:"local_id"`
		}
		s.must(http.StatusOK, http.MethodGet, "/v1/ids/"+v.id, nil).decode(t, &info)
		if info.ID != v.id || info.Shard != v.shard || info.Type != v.typ || info.TypeName != v.name || info.LocalID != v.local {
			t.Errorf("/v1/ids/%s = %+v", v.id, info)
		}
	}
	for _, bad := range []string{idNotDecimal, idOverflow, idReserved, idBadType, "-1", "01"} {
		s.fail(http.StatusBadRequest, "invalid_argument", http.MethodGet, "/v1/ids/"+bad, nil)
	}

	// Request ids: a sane one is echoed, anything else replaced.
	for _, c := range []struct{ sent, want string }{
		{"abc-123_X.y", "abc-123_X.y"},
		{strings.Repeat("a", 64), strings.Repeat("a", 64)},
		{strings.Repeat("a", 65), ""},
		{"bad id!", ""},
		{"", ""},
	} {
		r := s.must(http.StatusOK, http.MethodGet, "/healthz", nil, "X-Request-Id", c.sent)
		got := r.Header.Get("X-Request-Id")
		if c.want != "" && got != c.want || c.want == "" && (got == c.sent || len(got) != 32) {
			t.Errorf("X-Request-Id %q came back as %q", c.sent, got)
		}
	}
	p := s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/users/241294561224164665", nil, "X-Request-Id", "trace-me")
	if p.RequestID != "trace-me" {
		t.Errorf("problem request_id %q, want trace-me", p.RequestID)
	}

	// Unknown routes and methods are problems too.
	s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/nothing-here", nil)
	s.fail(http.StatusNotFound, "not_found", http.MethodPost, "/v2/users", `{}`)
	r := s.req(http.MethodPut, "/v1/pins/241294492511762325", nil)
	if r.Status != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET, PATCH, DELETE" {
		t.Fatalf("PUT a pin: %d, Allow %q", r.Status, r.Header.Get("Allow"))
	}
	r = s.req(http.MethodGet, "/v1/pins/owners", nil)
	if r.Status != http.StatusMethodNotAllowed && r.Status != http.StatusBadRequest {
		t.Fatalf("GET /v1/pins/owners: %d", r.Status)
	}

	// Metrics: per route pattern, never a raw path.
	metrics := string(s.must(http.StatusOK, http.MethodGet, "/metrics", nil).Body)
	for _, want := range []string{
		`pinstore_http_requests_total{method="GET",route="/v1/ids/{id}",status_class="2xx"} 3`,
		`pinstore_http_requests_total{method="GET",route="/v1/ids/{id}",status_class="4xx"} 6`,
		`pinstore_http_request_duration_seconds_bucket{method="GET",route="/healthz",status_class="2xx",le="+Inf"}`,
		`route="unmatched"`,
		"go_goroutines",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(metrics, "241294492511762325") {
		t.Errorf("/metrics holds a raw ID")
	}

	// Access logs: one JSON line per request, with the route pattern
	// (written in batches, at least every 100ms).
	found := false
	for deadline := time.Now().Add(5 * time.Second); !found && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		found = accessLogged(s.logs.Lines())
	}
	if !found {
		t.Errorf("no access log line for GET /v1/users/{id} 404 with request id trace-me")
	}
}

func accessLogged(lines []string) bool {
	for _, line := range lines {
		var rec struct {
			Msg       string   `json:"msg"`
			Method    string   `json:"method"`
			Route     string   `json:"route"`
			RequestID string   `json:"request_id"`
			Status    int      `json:"status"`
			Duration  *float64 `json:"duration_ms"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "http request" {
			continue
		}
		if rec.Route == "/v1/users/{id}" && rec.Status == 404 && rec.RequestID == "trace-me" && rec.Duration != nil && rec.Method == "GET" {
			return true
		}
	}
	return false
}

// TestServeGracefulShutdown: a request in flight when the server is told
// to stop still completes; then serve returns nil and the port is closed.
func TestServeGracefulShutdown(t *testing.T) {
	s := startServer(t)
	pr, pw := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, s.base+"/v1/users", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e2eAdminToken)
	type result struct {
		status int
		err    error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			res <- result{err: err}
			return
		}
		resp.Body.Close()
		res <- result{status: resp.StatusCode}
	}()
	if _, err := pw.Write([]byte(`{"username":`)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the handler is now reading the body
	stopped := make(chan error, 1)
	go func() { stopped <- s.stop() }()
	time.Sleep(300 * time.Millisecond) // shutdown has begun and is waiting
	select {
	case err := <-stopped:
		t.Fatalf("serve returned (%v) while a request was in flight", err)
	default:
	}
	if _, err := pw.Write([]byte(`"late"}`)); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	r := <-res
	if r.err != nil || r.status != http.StatusCreated {
		t.Fatalf("in-flight request: status %d, err %v; want 201", r.status, r.err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if resp, err := http.Get(s.base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("the server still answers after shutdown")
	}
}

// TestServeFeedMergesFollowees: the feed merges the pins of several
// followed users (on different shards) newest first, across pages.
func TestServeFeedMergesFollowees(t *testing.T) {
	s := startServer(t)
	reader := s.create("/v1/users", map[string]any{"username": "reader"})
	var boards []string
	var followees []string
	for i := range 3 {
		u := s.create("/v1/users", map[string]any{"username": fmt.Sprintf("author%d", i)})
		followees = append(followees, u.ID)
		boards = append(boards, s.create("/v1/boards", map[string]any{"owner_id": u.ID, "name": "b"}).ID)
	}
	stranger := s.create("/v1/users", map[string]any{"username": "stranger"})
	strangerBoard := s.create("/v1/boards", map[string]any{"owner_id": stranger.ID, "name": "b"}).ID
	var pins []string
	for i := range 45 {
		time.Sleep(2 * time.Millisecond) // distinct milliseconds: newest first is creation order
		pins = append(pins, s.create("/v1/pins", map[string]any{"board_id": boards[i%3]}).ID)
		if i%5 == 0 {
			s.create("/v1/pins", map[string]any{"board_id": strangerBoard})
		}
	}
	for _, u := range followees {
		s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+reader.ID+"/following/"+u, nil)
	}
	for _, limit := range []int{1, 4, 10, 45, 250} {
		feed, _ := s.all("/v1/users/"+reader.ID+"/feed", limit)
		equalIDs(t, fmt.Sprintf("feed of 3 followees, limit %d", limit), feed, reversed(pins))
	}
	if c := s.count("/v1/users/" + reader.ID + "/following"); c != 3 {
		t.Fatalf("following count %d", c)
	}
	// Unfollow one: their pins leave the feed.
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/users/"+reader.ID+"/following/"+followees[1], nil)
	var want []string
	for i, p := range pins {
		if i%3 != 1 {
			want = append(want, p)
		}
	}
	feed, _ := s.all("/v1/users/"+reader.ID+"/feed", 7)
	equalIDs(t, "feed after an unfollow", feed, reversed(want))

	// New pins reach followers' feeds (written in the background, within
	// moments); the unfollowed author's do not.
	time.Sleep(2 * time.Millisecond)
	skipped := s.create("/v1/pins", map[string]any{"board_id": boards[1]}).ID
	time.Sleep(2 * time.Millisecond)
	fresh := s.create("/v1/pins", map[string]any{"board_id": boards[0]}).ID
	want = append(want, fresh)
	deadline := time.Now().Add(10 * time.Second)
	for {
		feed, _ = s.all("/v1/users/"+reader.ID+"/feed", 7)
		if slices.Contains(feed, fresh) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	equalIDs(t, "feed after new pins", feed, reversed(want))
	if slices.Contains(feed, skipped) {
		t.Fatalf("the unfollowed author's new pin %s is in the feed", skipped)
	}
}

// TestServeConcurrentEdits: of two edits made from the same version, one
// wins and the other gets 412; none is lost silently.
func TestServeConcurrentEdits(t *testing.T) {
	s := startServer(t)
	u := s.create("/v1/users", map[string]any{"username": "shared"})
	const editors = 8
	statuses := make(chan int, editors)
	for i := range editors {
		go func() {
			req, _ := http.NewRequest(http.MethodPatch, s.base+"/v1/users/"+u.ID, strings.NewReader(fmt.Sprintf(`{"display_name":"editor %d"}`, i)))
			req.Header.Set("Content-Type", "application/merge-patch+json")
			req.Header.Set("If-Match", `"1"`)
			resp, err := s.client.Do(req)
			if err != nil {
				statuses <- 0
				return
			}
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	won := 0
	for range editors {
		switch st := <-statuses; st {
		case http.StatusOK:
			won++
		case http.StatusPreconditionFailed:
		default:
			t.Errorf("concurrent PATCH: status %d", st)
		}
	}
	if won != 1 {
		t.Fatalf("%d concurrent edits of version 1 succeeded, want exactly 1", won)
	}
	if got := s.get("/v1/users/" + u.ID); got.Version != 2 {
		t.Fatalf("version %d after one successful edit", got.Version)
	}
}
