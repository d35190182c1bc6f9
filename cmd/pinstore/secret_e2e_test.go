package main

// End-to-end tests of saves and secret boards on the real server, with
// user tokens: what the owner sees, what another user sees, both ways
// round (public → secret → public).

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// digits are the ids in a problem's detail, which name the object asked for.
var digits = regexp.MustCompile(`[0-9]+`)

// idsAs walks a list as tok (one page of 250 is enough here).
func (s *server) idsAs(tok, path string) []string {
	s.t.Helper()
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	var l list
	s.as(tok, http.StatusOK, http.MethodGet, path+sep+"limit=250", nil).decode(s.t, &l)
	return l.ids()
}

// eventually polls cond (feed fan-out is written in the background).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSavesE2E(t *testing.T) {
	s := startServer(t)
	ann := s.create("/v1/users", map[string]any{"username": "ann"})
	bob := s.create("/v1/users", map[string]any{"username": "bob"})
	cat := s.create("/v1/users", map[string]any{"username": "cat"})
	annTok, bobTok := mintUserToken(t, ann.ID, "1h"), mintUserToken(t, bob.ID, "1h")
	annBoard := s.create("/v1/boards", map[string]any{"owner_id": ann.ID, "name": "a"})
	bobBoard := s.create("/v1/boards", map[string]any{"owner_id": bob.ID, "name": "b"})
	src := s.create("/v1/pins", map[string]any{"board_id": annBoard.ID, "link": "https://example.com/a", "description": "orig", "data": map[string]any{"k": 1}})
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+cat.ID+"/following/"+bob.ID, nil)

	var saved, again object
	s.as(bobTok, http.StatusCreated, http.MethodPost, "/v1/pins/"+src.ID+"/saves", map[string]any{"board_id": bobBoard.ID}).decode(t, &saved)
	if saved.OwnerID != bob.ID || saved.BoardID != bobBoard.ID || saved.SavedFrom == nil || *saved.SavedFrom != src.ID || saved.Description != "orig" || string(saved.Data) != `{"k":1}` {
		t.Fatalf("saved pin %+v", saved)
	}
	s.as(bobTok, http.StatusOK, http.MethodPost, "/v1/pins/"+src.ID+"/saves", map[string]any{"board_id": bobBoard.ID}).decode(t, &again)
	if again.ID != saved.ID {
		t.Fatalf("the second save made pin %s, want %s", again.ID, saved.ID)
	}
	if src := s.get("/v1/pins/" + src.ID); src.Counts["saves"] != 1 || src.SavedFrom != nil {
		t.Fatalf("source after a save: %+v", src)
	}
	equalIDs(t, "the source's saves", s.idsAs(annTok, "/v1/pins/"+src.ID+"/saves"), []string{saved.ID})
	equalIDs(t, "bob's board", s.idsAs(bobTok, "/v1/boards/"+bobBoard.ID+"/pins"), []string{saved.ID})
	eventually(t, "the save in bob's follower's feed", func() bool {
		return slices.Equal(s.idsAs(e2eAdminToken, "/v1/users/"+cat.ID+"/feed"), []string{saved.ID})
	})

	// Only the board's owner saves to it; bad bodies are 400 and write nothing.
	s.as(annTok, http.StatusForbidden, http.MethodPost, "/v1/pins/"+src.ID+"/saves", map[string]any{"board_id": bobBoard.ID})
	s.fail(http.StatusBadRequest, "invalid_argument", http.MethodPost, "/v1/pins/"+src.ID+"/saves", map[string]any{})
	s.fail(http.StatusBadRequest, "invalid_argument", http.MethodPost, "/v1/pins/"+src.ID+"/saves", map[string]any{"board_id": bobBoard.ID, "owner_id": ann.ID})
	s.fail(http.StatusBadRequest, "invalid_argument", http.MethodPost, "/v1/pins/"+src.ID+"/saves", map[string]any{"board_id": src.ID})

	// Deleting the source keeps the save and its content; the source is 404.
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/pins/"+src.ID, nil)
	if got := s.get("/v1/pins/" + saved.ID); got.SavedFrom == nil || *got.SavedFrom != src.ID || got.Description != "orig" {
		t.Fatalf("the save after its source's delete: %+v", got)
	}
	s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/pins/"+src.ID, nil)
	s.fail(http.StatusNotFound, "not_found", http.MethodPost, "/v1/pins/"+src.ID+"/saves", map[string]any{"board_id": bobBoard.ID})
}

func TestSecretBoardsE2E(t *testing.T) {
	s := startServer(t)
	ann := s.create("/v1/users", map[string]any{"username": "ann"})
	bob := s.create("/v1/users", map[string]any{"username": "bob"})
	annTok, bobTok := mintUserToken(t, ann.ID, "1h"), mintUserToken(t, bob.ID, "1h")
	board := s.create("/v1/boards", map[string]any{"owner_id": ann.ID, "name": "hidden later"})
	open := s.create("/v1/boards", map[string]any{"owner_id": ann.ID, "name": "always public"})
	pin := s.create("/v1/pins", map[string]any{"board_id": board.ID, "link": "https://example.com/s"})
	other := s.create("/v1/pins", map[string]any{"board_id": open.ID, "link": "https://example.com/o"})
	s.as(bobTok, http.StatusNoContent, http.MethodPut, "/v1/users/"+bob.ID+"/following/"+ann.ID, nil)
	s.as(bobTok, http.StatusNoContent, http.MethodPut, "/v1/users/"+bob.ID+"/likes/"+pin.ID, nil)
	bobBoard := s.create("/v1/boards", map[string]any{"owner_id": bob.ID, "name": "b"})
	// ann saves bob's... no: bob saves ann's public pin; ann saves her other pin to the board that becomes secret.
	var annSave object
	s.as(annTok, http.StatusCreated, http.MethodPost, "/v1/pins/"+other.ID+"/saves", map[string]any{"board_id": board.ID}).decode(t, &annSave)
	gone := s.create("/v1/pins", map[string]any{"board_id": open.ID})
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/pins/"+gone.ID, nil)
	goneBoard := s.create("/v1/boards", map[string]any{"owner_id": ann.ID, "name": "gone"})
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/boards/"+goneBoard.ID, nil)

	both := []string{pin.ID, other.ID, annSave.ID}
	publicView := func(what string) {
		t.Helper()
		eventually(t, what+": bob's feed", func() bool {
			f := s.idsAs(bobTok, "/v1/users/"+bob.ID+"/feed")
			return len(f) == 3
		})
		for _, p := range both {
			s.as(bobTok, http.StatusOK, http.MethodGet, "/v1/pins/"+p, nil)
		}
		s.as(bobTok, http.StatusOK, http.MethodGet, "/v1/boards/"+board.ID+"/pins", nil)
		if got := s.idsAs(bobTok, "/v1/users/"+ann.ID+"/boards"); len(got) != 2 {
			t.Fatalf("%s: ann's boards as bob %v", what, got)
		}
		equalIDs(t, what+": bob's likes", s.idsAs(bobTok, "/v1/users/"+bob.ID+"/likes"), []string{pin.ID})
		s.as(bobTok, http.StatusNoContent, http.MethodGet, "/v1/users/"+bob.ID+"/likes/"+pin.ID, nil)
		equalIDs(t, what+": saves of the other pin", s.idsAs(bobTok, "/v1/pins/"+other.ID+"/saves"), []string{annSave.ID})
	}
	publicView("public")

	// Secret: ann's PATCH; bob may not (404, as for a board that is gone).
	var patched object
	s.as(annTok, http.StatusOK, http.MethodPatch, "/v1/boards/"+board.ID, map[string]any{"secret": true}).decode(t, &patched)
	if !patched.Secret {
		t.Fatal("the board is not secret")
	}
	s.as(bobTok, http.StatusForbidden, http.MethodPatch, "/v1/boards/"+open.ID, map[string]any{"secret": true})
	// To bob the secret board and its pins are exactly as absent as
	// objects that are gone: the same status, code, title and detail.
	same := func(path, missing string, method string, body any) {
		t.Helper()
		a := s.as(bobTok, http.StatusNotFound, method, path, body).problem(t)
		b := s.as(bobTok, http.StatusNotFound, method, missing, body).problem(t)
		if a.Code != b.Code || a.Title != b.Title || digits.ReplaceAllString(a.Detail, "N") != digits.ReplaceAllString(b.Detail, "N") || a.Type != b.Type {
			t.Fatalf("%s %s answers %+v; a missing object %+v", method, path, a, b)
		}
	}
	same("/v1/pins/"+pin.ID, "/v1/pins/"+gone.ID, http.MethodGet, nil)
	same("/v1/pins/"+annSave.ID, "/v1/pins/"+gone.ID, http.MethodGet, nil)
	same("/v1/boards/"+board.ID, "/v1/boards/"+goneBoard.ID, http.MethodGet, nil)
	same("/v1/boards/"+board.ID+"/pins", "/v1/boards/"+goneBoard.ID+"/pins", http.MethodGet, nil)
	same("/v1/pins/"+pin.ID+"/likers", "/v1/pins/"+gone.ID+"/likers", http.MethodGet, nil)
	same("/v1/pins/"+pin.ID+"/saves", "/v1/pins/"+gone.ID+"/saves", http.MethodGet, nil)
	same("/v1/pins/"+pin.ID+"/comments", "/v1/pins/"+gone.ID+"/comments", http.MethodGet, nil)
	same("/v1/boards/"+board.ID, "/v1/boards/"+goneBoard.ID, http.MethodPatch, map[string]any{"secret": false})
	same("/v1/boards/"+board.ID, "/v1/boards/"+goneBoard.ID, http.MethodDelete, nil)
	same("/v1/pins/"+pin.ID, "/v1/pins/"+gone.ID, http.MethodPatch, map[string]any{"description": "x"})
	same("/v1/users/"+bob.ID+"/likes/"+pin.ID, "/v1/users/"+bob.ID+"/likes/"+gone.ID, http.MethodPut, nil)
	same("/v1/pins/"+pin.ID+"/saves", "/v1/pins/"+gone.ID+"/saves", http.MethodPost, map[string]any{"board_id": bobBoard.ID})
	same("/v1/pins/"+pin.ID+"/comments", "/v1/pins/"+gone.ID+"/comments", http.MethodPost, map[string]any{"author_id": bob.ID, "text": "hi"})
	s.as(bobTok, http.StatusNotFound, http.MethodGet, "/v1/users/"+bob.ID+"/likes/"+pin.ID, nil)
	// A write-scope service token saving for bob meets the same 404.
	s.fail(http.StatusNotFound, "not_found", http.MethodPost, "/v1/pins/"+pin.ID+"/saves", map[string]any{"board_id": bobBoard.ID})

	// Every list bob reads leaves them out.
	eventually(t, "the secret pins leave bob's feed", func() bool {
		return slices.Equal(s.idsAs(bobTok, "/v1/users/"+bob.ID+"/feed"), []string{other.ID})
	})
	// …whoever reads the feed: it shows what its user may see.
	equalIDs(t, "bob's feed read by a service token", s.idsAs(e2eAdminToken, "/v1/users/"+bob.ID+"/feed"), []string{other.ID})
	equalIDs(t, "ann's pins as bob", s.idsAs(bobTok, "/v1/users/"+ann.ID+"/pins"), []string{other.ID})
	equalIDs(t, "ann's boards as bob", s.idsAs(bobTok, "/v1/users/"+ann.ID+"/boards"), []string{open.ID})
	equalIDs(t, "bob's likes as bob", s.idsAs(bobTok, "/v1/users/"+bob.ID+"/likes"), nil)
	equalIDs(t, "saves of the public pin as bob", s.idsAs(bobTok, "/v1/pins/"+other.ID+"/saves"), nil)
	var many struct {
		Items    []object `json:"items"`
		NotFound []string `json:"not_found"`
	}
	s.as(bobTok, http.StatusOK, http.MethodGet, "/v1/pins?ids="+pin.ID+","+other.ID, nil).decode(t, &many)
	if len(many.Items) != 1 || many.Items[0].ID != other.ID || !slices.Equal(many.NotFound, []string{pin.ID}) {
		t.Fatalf("multi-get as bob: %+v", many)
	}
	var boards struct {
		NotFound []string `json:"not_found"`
	}
	s.as(bobTok, http.StatusOK, http.MethodGet, "/v1/boards?ids="+board.ID, nil).decode(t, &boards)
	if !slices.Equal(boards.NotFound, []string{board.ID}) {
		t.Fatalf("board multi-get as bob: %+v", boards)
	}
	var owners struct {
		Owners   map[string]string `json:"owners"`
		NotFound []string          `json:"not_found"`
	}
	s.as(bobTok, http.StatusOK, http.MethodPost, "/v1/pins/owners", map[string]any{"ids": []string{pin.ID, other.ID}}).decode(t, &owners)
	if len(owners.Owners) != 1 || owners.Owners[other.ID] != ann.ID || !slices.Equal(owners.NotFound, []string{pin.ID}) {
		t.Fatalf("owners as bob: %+v", owners)
	}
	var contains struct {
		Items []struct {
			ID    string `json:"id"`
			Liked bool   `json:"liked"`
		} `json:"items"`
	}
	s.as(bobTok, http.StatusOK, http.MethodGet, "/v1/users/"+bob.ID+"/likes/contains?ids="+pin.ID, nil).decode(t, &contains)
	if len(contains.Items) != 1 || contains.Items[0].Liked {
		t.Fatalf("likes/contains as bob: %+v", contains)
	}

	// Ann, and service tokens, see everything, flagged secret.
	for _, tok := range []string{annTok, e2eReadToken} {
		var p object
		s.as(tok, http.StatusOK, http.MethodGet, "/v1/pins/"+pin.ID, nil).decode(t, &p)
		if !p.Secret || p.Version != 2 {
			t.Fatalf("the pin of a secret board: %+v", p)
		}
		if got := s.idsAs(tok, "/v1/users/"+ann.ID+"/pins"); len(got) != 3 {
			t.Fatalf("ann's pins: %v", got)
		}
		equalIDs(t, "the secret board", s.idsAs(tok, "/v1/boards/"+board.ID+"/pins"), []string{annSave.ID, pin.ID})
	}
	// A pin created on a secret board is secret too.
	if p := s.create("/v1/pins", map[string]any{"board_id": board.ID}); !p.Secret {
		t.Fatal("a new pin on a secret board is not secret")
	} else {
		s.as(bobTok, http.StatusNotFound, http.MethodGet, "/v1/pins/"+p.ID, nil)
		s.must(http.StatusNoContent, http.MethodDelete, "/v1/pins/"+p.ID, nil)
	}
	// Bob cannot pin on it: 404, not 403.
	s.as(bobTok, http.StatusNotFound, http.MethodPost, "/v1/pins", map[string]any{"board_id": board.ID})

	// Public again: everything is back where it was.
	s.as(annTok, http.StatusOK, http.MethodPatch, "/v1/boards/"+board.ID, map[string]any{"secret": false})
	if p := s.get("/v1/pins/" + pin.ID); p.Secret {
		t.Fatal("the pin is still secret")
	}
	publicView("public again")
}

// Counts as others see them (docs/api.md, Secret boards): a user's boards and
// pins, on the user and on their lists, leave out the secret ones for
// anyone but the user and service tokens, exactly through a flip both
// ways. Two counts cross shards and stay whole, by choice: a user's likes
// list counts likes of pins on others' secret boards, and a pin's saves
// count saves onto secret boards; their lists leave the items out.
func TestSecretCountsE2E(t *testing.T) {
	s := startServer(t)
	ann := s.create("/v1/users", map[string]any{"username": "ann"})
	bob := s.create("/v1/users", map[string]any{"username": "bob"})
	annTok, bobTok := mintUserToken(t, ann.ID, "1h"), mintUserToken(t, bob.ID, "1h")
	open := s.create("/v1/boards", map[string]any{"owner_id": ann.ID, "name": "open"})
	hidden := s.create("/v1/boards", map[string]any{"owner_id": ann.ID, "name": "later secret"})
	src := s.create("/v1/pins", map[string]any{"board_id": open.ID})
	pin := s.create("/v1/pins", map[string]any{"board_id": hidden.ID})
	s.create("/v1/pins", map[string]any{"board_id": hidden.ID})
	s.as(annTok, http.StatusCreated, http.MethodPost, "/v1/pins/"+src.ID+"/saves", map[string]any{"board_id": hidden.ID})
	s.as(bobTok, http.StatusNoContent, http.MethodPut, "/v1/users/"+bob.ID+"/likes/"+pin.ID, nil)

	type seen struct{ boards, pins, boardsList, pinsList int64 }
	view := func(tok string) seen {
		t.Helper()
		var u object
		s.as(tok, http.StatusOK, http.MethodGet, "/v1/users/"+ann.ID, nil).decode(t, &u)
		var b, p list
		s.as(tok, http.StatusOK, http.MethodGet, "/v1/users/"+ann.ID+"/boards?limit=1", nil).decode(t, &b)
		s.as(tok, http.StatusOK, http.MethodGet, "/v1/users/"+ann.ID+"/pins?limit=1", nil).decode(t, &p)
		return seen{int64(u.Counts["boards"]), int64(u.Counts["pins"]), *b.Count, *p.Count}
	}
	all := seen{2, 4, 2, 4}
	for round, secret := range []bool{true, false, true} {
		s.as(annTok, http.StatusOK, http.MethodPatch, "/v1/boards/"+hidden.ID, map[string]any{"secret": secret})
		others := all
		if secret {
			others = seen{1, 1, 1, 1}
		}
		for name, c := range map[string]struct {
			tok  string
			want seen
		}{"ann": {annTok, all}, "a service token": {e2eReadToken, all}, "bob": {bobTok, others}} {
			if got := c.tok; view(got) != c.want {
				t.Fatalf("round %d (secret %v): %s sees ann's counts %+v, want %+v", round, secret, name, view(got), c.want)
			}
		}
	}
	// The board is secret now. Bob's likes list: the item is hidden, the
	// count is not. The source's saves: likewise.
	var likes list
	s.as(bobTok, http.StatusOK, http.MethodGet, "/v1/users/"+bob.ID+"/likes", nil).decode(t, &likes)
	if len(likes.Items) != 0 || *likes.Count != 1 {
		t.Fatalf("bob's likes as bob: %d items, count %d; want 0 and 1 (a like of a secret pin is counted)", len(likes.Items), *likes.Count)
	}
	var saves list
	s.as(bobTok, http.StatusOK, http.MethodGet, "/v1/pins/"+src.ID+"/saves", nil).decode(t, &saves)
	var source object
	s.as(bobTok, http.StatusOK, http.MethodGet, "/v1/pins/"+src.ID, nil).decode(t, &source)
	if len(saves.Items) != 0 || *saves.Count != 1 || source.Counts["saves"] != 1 {
		t.Fatalf("the source's saves as bob: %d items, count %d, counts.saves %d; want 0, 1, 1 (a save onto a secret board is counted)", len(saves.Items), *saves.Count, source.Counts["saves"])
	}
}
