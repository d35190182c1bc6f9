package main

// End-to-end tests of board sections on the real server: the owner's
// order, pins into, between and out of sections, counts, secrecy with
// the board, deletes, idempotent creates, and bad input.

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

func TestSectionsE2E(t *testing.T) {
	s := startServer(t)
	ann := s.create("/v1/users", map[string]any{"username": "ann"})
	board := s.create("/v1/boards", map[string]any{"owner_id": ann.ID, "name": "trips"})
	other := s.create("/v1/boards", map[string]any{"owner_id": ann.ID, "name": "food"})
	sec := func(name string) object {
		t.Helper()
		o := s.create("/v1/boards/"+board.ID+"/sections", map[string]any{"name": name})
		if o.Type != "section" || o.BoardID != board.ID || o.OwnerID != ann.ID || o.Name != name || o.Secret || o.Counts["pins"] != 0 {
			t.Fatalf("created section %+v", o)
		}
		return o
	}
	a, b, c := sec("a"), sec("b"), sec("c")
	order := func() []string {
		t.Helper()
		ids, n := s.all("/v1/boards/"+board.ID+"/sections", 2)
		if int(n) != len(ids) {
			t.Fatalf("sections count %d, listed %d", n, len(ids))
		}
		return ids
	}
	if got := order(); !slices.Equal(got, []string{a.ID, b.ID, c.ID}) {
		t.Fatalf("sections %v, want a, b, c", got)
	}
	s.must(http.StatusNoContent, http.MethodPut, "/v1/boards/"+board.ID+"/sections/"+c.ID+"/position", map[string]any{"before": a.ID})
	s.must(http.StatusNoContent, http.MethodPut, "/v1/boards/"+board.ID+"/sections/"+a.ID+"/position", map[string]any{"after": b.ID})
	if got := order(); !slices.Equal(got, []string{c.ID, b.ID, a.ID}) {
		t.Fatalf("after moves: %v, want c, b, a", got)
	}
	d := sec("d")
	if got := order(); !slices.Equal(got, []string{c.ID, b.ID, a.ID, d.ID}) {
		t.Fatalf("a new section after moves: %v, want it last", got)
	}
	if g := s.get("/v1/boards/" + board.ID); g.Counts["sections"] != 4 || g.Counts["pins"] != 0 {
		t.Fatalf("board counts %v", g.Counts)
	}

	// Pins into, between and out of sections.
	p := s.create("/v1/pins", map[string]any{"board_id": board.ID, "description": "p", "section_id": a.ID})
	q := s.create("/v1/pins", map[string]any{"board_id": board.ID, "description": "q"})
	if p.SectionID == nil || *p.SectionID != a.ID || q.SectionID != nil {
		t.Fatalf("pins made: p in %v, q in %v", p.SectionID, q.SectionID)
	}
	if got := s.get("/v1/pins/" + p.ID); got.SectionID == nil || *got.SectionID != a.ID {
		t.Fatalf("GET pin: section %v", got.SectionID)
	}
	put := func(pin string, section any) object {
		t.Helper()
		var o object
		s.must(http.StatusOK, http.MethodPut, "/v1/pins/"+pin+"/section", map[string]any{"section_id": section}).decode(t, &o)
		return o
	}
	pinsOf := func(section string) ([]string, int64) {
		t.Helper()
		return s.all("/v1/sections/"+section+"/pins", 1)
	}
	moved := put(p.ID, b.ID)
	if moved.SectionID == nil || *moved.SectionID != b.ID || moved.Version != 2 {
		t.Fatalf("moved to b: %+v", moved)
	}
	if again := put(p.ID, b.ID); again.Version != 2 {
		t.Fatalf("putting the pin where it is: version %d", again.Version)
	}
	put(q.ID, b.ID)
	if ids, n := pinsOf(b.ID); !slices.Equal(ids, []string{q.ID, p.ID}) || n != 2 {
		t.Fatalf("b's pins %v (count %d), want q, p", ids, n)
	}
	if ids, n := pinsOf(a.ID); len(ids) != 0 || n != 0 {
		t.Fatalf("a still holds %v (count %d)", ids, n)
	}
	if g := s.get("/v1/sections/" + b.ID); g.Counts["pins"] != 2 {
		t.Fatalf("section b counts %v", g.Counts)
	}
	if l := s.page("/v1/boards/" + board.ID + "/sections?limit=250"); l.Items[1].ID != b.ID || l.Items[1].Counts["pins"] != 2 {
		t.Fatalf("listed sections carry counts %+v", l.Items)
	}
	if out := put(q.ID, nil); out.SectionID != nil {
		t.Fatalf("taken out of its section: %v", out.SectionID)
	}
	if ids, _ := s.all("/v1/boards/"+board.ID+"/pins", 10); len(ids) != 2 {
		t.Fatalf("the board's pins %v, whatever their sections", ids)
	}

	// Rename; read-only fields refused.
	var renamed object
	s.must(http.StatusOK, http.MethodPatch, "/v1/sections/"+b.ID, map[string]any{"name": "beaches"}).decode(t, &renamed)
	if renamed.Name != "beaches" || renamed.BoardID != board.ID {
		t.Fatalf("renamed %+v", renamed)
	}

	// Bad input: a clear 4xx and nothing changed.
	foreign := s.create("/v1/boards/"+other.ID+"/sections", map[string]any{"name": "x"})
	before := s.settledDB()
	for _, tc := range []struct {
		status       int
		code         string
		method, path string
		body         any
		detail       string
	}{
		{400, "invalid_argument", "PUT", "/v1/pins/" + p.ID + "/section", map[string]any{"section_id": foreign.ID}, "not a section of the pin's board"},
		{400, "invalid_argument", "PUT", "/v1/pins/" + p.ID + "/section", map[string]any{"section_id": q.ID}, "section_id must be a section id"},
		{404, "not_found", "PUT", "/v1/pins/" + p.ID + "/section", map[string]any{"section_id": unknownSibling(t, a.ID)}, "section not found"},
		{400, "invalid_argument", "POST", "/v1/pins", map[string]any{"board_id": board.ID, "section_id": foreign.ID}, "not a section of the pin's board"},
		{404, "not_found", "POST", "/v1/pins", map[string]any{"board_id": board.ID, "section_id": unknownSibling(t, a.ID)}, "section not found"},
		{400, "invalid_argument", "POST", "/v1/boards/" + board.ID + "/sections", map[string]any{"name": strings.Repeat("x", 201)}, "name is longer than 200 bytes"},
		{400, "invalid_argument", "POST", "/v1/boards/" + board.ID + "/sections", map[string]any{"name": ""}, "name is required"},
		{404, "not_found", "POST", "/v1/boards/" + unknownSibling(t, board.ID) + "/sections", map[string]any{"name": "x"}, "board not found"},
		{400, "invalid_argument", "PATCH", "/v1/sections/" + b.ID, map[string]any{"board_id": other.ID}, "board_id is read-only"},
		{400, "invalid_argument", "PATCH", "/v1/sections/" + b.ID, map[string]any{"name": strings.Repeat("x", 201)}, "name is longer than 200 bytes"},
		{400, "invalid_argument", "PATCH", "/v1/pins/" + p.ID, map[string]any{"section_id": a.ID}, "section_id is read-only"},
		{404, "not_found", "PUT", "/v1/boards/" + board.ID + "/sections/" + foreign.ID + "/position", map[string]any{"before": a.ID}, ""},
		{400, "invalid_argument", "PUT", "/v1/boards/" + board.ID + "/sections/" + a.ID + "/position", map[string]any{"before": a.ID}, "next to itself"},
		{400, "invalid_argument", "GET", "/v1/boards/" + board.ID + "/sections?since=2020-01-01T00:00:00Z", nil, "order chosen by hand"},
		{404, "not_found", "GET", "/v1/sections/" + unknownSibling(t, a.ID), nil, "section not found"},
	} {
		pr := s.fail(tc.status, tc.code, tc.method, tc.path, tc.body)
		if !strings.Contains(pr.Detail, tc.detail) {
			t.Fatalf("%s %s: detail %q, want it to say %q", tc.method, tc.path, pr.Detail, tc.detail)
		}
	}
	s.requireSameDB(before, s.dbState())

	// Deleting a pin takes it out of its section.
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/pins/"+q.ID, nil)
	put(p.ID, a.ID)
	r := s.create("/v1/pins", map[string]any{"board_id": board.ID, "section_id": a.ID})
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/pins/"+r.ID, nil)
	if ids, n := pinsOf(a.ID); !slices.Equal(ids, []string{p.ID}) || n != 1 {
		t.Fatalf("a's pins after a delete: %v (count %d)", ids, n)
	}

	// Deleting a section keeps its pins on the board, in no section.
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/sections/"+a.ID, nil)
	s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/sections/"+a.ID, nil)
	s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/sections/"+a.ID+"/pins", nil)
	if got := s.get("/v1/pins/" + p.ID); got.SectionID != nil {
		t.Fatalf("a pin of a deleted section still names it: %v", *got.SectionID)
	}
	if got := order(); !slices.Equal(got, []string{c.ID, b.ID, d.ID}) {
		t.Fatalf("sections after a delete: %v", got)
	}
	if g := s.get("/v1/boards/" + board.ID); g.Counts["sections"] != 3 || g.Counts["pins"] != 1 {
		t.Fatalf("board counts after deleting a section: %v", g.Counts)
	}

	// Deleting the board deletes its sections.
	put(p.ID, b.ID)
	s.must(http.StatusNoContent, http.MethodDelete, "/v1/boards/"+board.ID, nil)
	for _, id := range []string{b.ID, c.ID, d.ID} {
		s.fail(http.StatusNotFound, "not_found", http.MethodGet, "/v1/sections/"+id, nil)
	}
	s.get("/v1/sections/" + foreign.ID) // another board's stays
}

// A create with an Idempotency-Key replays the first section; a reuse of
// the key with another body is 422.
func TestSectionIdempotentCreateE2E(t *testing.T) {
	s := startServer(t)
	ann := s.create("/v1/users", map[string]any{"username": "ann"})
	board := s.create("/v1/boards", map[string]any{"owner_id": ann.ID, "name": "b"})
	path := "/v1/boards/" + board.ID + "/sections"
	var first, again object
	r1 := s.must(http.StatusCreated, http.MethodPost, path, map[string]any{"name": "x"}, keyHdr("sec-1")...)
	r1.decode(t, &first)
	r2 := s.must(http.StatusCreated, http.MethodPost, path, map[string]any{"name": "x"}, keyHdr("sec-1")...)
	r2.decode(t, &again)
	if again.ID != first.ID || r2.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the replay made %s (replayed %q), want %s", again.ID, r2.Header.Get("Idempotent-Replayed"), first.ID)
	}
	s.fail(http.StatusUnprocessableEntity, "idempotency_key_reused", http.MethodPost, path, map[string]any{"name": "y"}, keyHdr("sec-1")...)
	if ids, n := s.all(path, 10); !slices.Equal(ids, []string{first.ID}) || n != 1 {
		t.Fatalf("sections %v (count %d), want the one", ids, n)
	}
}

// Sections are secret as their board is, from the start and when the
// board turns secret after they exist: to another user they are the 404
// of a missing section, on reads and writes; only the owner changes them.
func TestSectionsSecrecyE2E(t *testing.T) {
	s := startServer(t)
	ann := s.create("/v1/users", map[string]any{"username": "ann"})
	bob := s.create("/v1/users", map[string]any{"username": "bob"})
	annTok, bobTok := mintUserToken(t, ann.ID, "1h"), mintUserToken(t, bob.ID, "1h")
	board := s.create("/v1/boards", map[string]any{"owner_id": ann.ID, "name": "b"})
	var a object
	s.as(annTok, http.StatusCreated, http.MethodPost, "/v1/boards/"+board.ID+"/sections", map[string]any{"name": "a"}).decode(t, &a)
	var p object
	s.as(annTok, http.StatusCreated, http.MethodPost, "/v1/pins", map[string]any{"board_id": board.ID, "section_id": a.ID}).decode(t, &p)

	// Public: bob reads but may not change.
	s.as(bobTok, http.StatusOK, http.MethodGet, "/v1/sections/"+a.ID, nil)
	if ids := s.idsAs(bobTok, "/v1/sections/"+a.ID+"/pins"); !slices.Equal(ids, []string{p.ID}) {
		t.Fatalf("bob sees a public section's pins %v", ids)
	}
	s.as(bobTok, http.StatusForbidden, http.MethodPost, "/v1/boards/"+board.ID+"/sections", map[string]any{"name": "x"})
	s.as(bobTok, http.StatusForbidden, http.MethodPatch, "/v1/sections/"+a.ID, map[string]any{"name": "x"})
	s.as(bobTok, http.StatusForbidden, http.MethodDelete, "/v1/sections/"+a.ID, nil)
	s.as(bobTok, http.StatusForbidden, http.MethodPut, "/v1/pins/"+p.ID+"/section", map[string]any{"section_id": nil})

	// The board turns secret after its section exists.
	s.as(annTok, http.StatusOK, http.MethodPatch, "/v1/boards/"+board.ID, map[string]any{"secret": true})
	var got object
	s.as(annTok, http.StatusOK, http.MethodGet, "/v1/sections/"+a.ID, nil).decode(t, &got)
	if !got.Secret {
		t.Fatal("a section of a board made secret is not secret")
	}
	missing := unknownSibling(t, a.ID)
	before := s.settledDB()
	for _, r := range []struct{ method, path string }{
		{"GET", "/v1/sections/{s}"}, {"GET", "/v1/sections/{s}/pins"}, {"PATCH", "/v1/sections/{s}"}, {"DELETE", "/v1/sections/{s}"},
	} {
		var body any
		if r.method == "PATCH" {
			body = map[string]any{"name": "x"}
		}
		hid := s.as(bobTok, http.StatusNotFound, r.method, strings.ReplaceAll(r.path, "{s}", a.ID), body).problem(t)
		gone := s.as(bobTok, http.StatusNotFound, r.method, strings.ReplaceAll(r.path, "{s}", missing), body).problem(t)
		if digits.ReplaceAllString(hid.Detail, "N") != digits.ReplaceAllString(gone.Detail, "N") || hid.Code != gone.Code {
			t.Fatalf("%s %s: a secret section answers %q, a missing one %q", r.method, r.path, hid.Detail, gone.Detail)
		}
	}
	s.as(bobTok, http.StatusNotFound, http.MethodGet, "/v1/boards/"+board.ID+"/sections", nil)
	s.as(bobTok, http.StatusNotFound, http.MethodPost, "/v1/boards/"+board.ID+"/sections", map[string]any{"name": "x"})
	s.requireSameDB(before, s.dbState())
	if ids := s.idsAs(annTok, "/v1/boards/"+board.ID+"/sections"); !slices.Equal(ids, []string{a.ID}) {
		t.Fatalf("ann's own secret sections %v", ids)
	}
	var b object
	s.as(annTok, http.StatusCreated, http.MethodPost, "/v1/boards/"+board.ID+"/sections", map[string]any{"name": "b"}).decode(t, &b)
	if !b.Secret {
		t.Fatal("a new section of a secret board is not secret")
	}

	// Public again: bob sees them both.
	s.as(annTok, http.StatusOK, http.MethodPatch, "/v1/boards/"+board.ID, map[string]any{"secret": false})
	if ids := s.idsAs(bobTok, "/v1/boards/"+board.ID+"/sections"); !slices.Equal(ids, []string{a.ID, b.ID}) {
		t.Fatalf("bob sees the sections of a board made public: %v", ids)
	}
	s.as(bobTok, http.StatusOK, http.MethodGet, "/v1/sections/"+b.ID, nil).decode(t, &got)
	if got.Secret {
		t.Fatal("a section of a board made public is secret")
	}
}
