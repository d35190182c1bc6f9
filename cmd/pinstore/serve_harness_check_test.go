package main

import (
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"
)

// The harness's check of responses after the spec opened its response
// schemas: a field the spec does not name passes (that is what a client
// generated today must accept), but a response that lacks a required
// field or carries one of the wrong type still fails, at the top and in
// nested objects, and so does a problem that breaks its schema or sends a
// code the spec does not document.
func TestHarnessCatchesBadResponses(t *testing.T) {
	const base = "http://127.0.0.1:1"
	s := newSpecTransport(t, base)

	user := func(edit func(u map[string]any)) []byte {
		u := map[string]any{
			"id": "241294629943640797", "type": "user", "username": "ann", "display_name": "",
			"data": map[string]any{}, "created_at": "2024-05-01T12:00:00.123Z", "updated_at": "2024-05-01T12:00:00.123Z",
			"version": 1, "counts": map[string]any{"followers": 0, "following": 0, "boards": 0, "pins": 0},
		}
		if edit != nil {
			edit(u)
		}
		b, err := json.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	counts := func(u map[string]any) map[string]any { return u["counts"].(map[string]any) }
	problemBody := func(edit func(p map[string]any)) []byte {
		p := map[string]any{"type": "/docs#tag/errors/not_found", "title": "Not found", "status": 404, "code": "not_found", "detail": "user not found", "instance": "/v1/users/241294629943640797", "request_id": "r1"}
		if edit != nil {
			edit(p)
		}
		b, _ := json.Marshal(p)
		return b
	}

	cases := []struct {
		name   string
		status int
		body   []byte
		want   string // "" = no finding; else a part of the finding
	}{
		{"as served", 200, user(nil), ""},
		{"a field the spec does not name", 200, user(func(u map[string]any) { u["badges"] = []string{"new"} }), ""},
		{"a nested field the spec does not name", 200, user(func(u map[string]any) { counts(u)["likes"] = 3 }), ""},
		{"a viewer with a field the spec does not name", 200, user(func(u map[string]any) { u["viewer"] = map[string]any{"following": true, "muted": false} }), ""},
		{"no counts", 200, user(func(u map[string]any) { delete(u, "counts") }), `property "counts" is missing`},
		{"no username", 200, user(func(u map[string]any) { delete(u, "username") }), `property "username" is missing`},
		{"counts without followers", 200, user(func(u map[string]any) { delete(counts(u), "followers") }), `property "followers" is missing`},
		{"a numeric id", 200, user(func(u map[string]any) { u["id"] = 241294629943640797 }), "id"},
		{"a version as a string", 200, user(func(u map[string]any) { u["version"] = "1" }), "version"},
		{"a count as a string", 200, user(func(u map[string]any) { counts(u)["pins"] = "0" }), "pins"},
		{"a negative count", 200, user(func(u map[string]any) { counts(u)["boards"] = -1 }), "boards"},
		{"an ID that cannot be one", 200, user(func(u map[string]any) { u["id"] = "0" }), "id"},
		{"an ID with reserved bits set", 200, user(func(u map[string]any) { u["id"] = "4611686018427387904" }), "id"},
		{"viewer.following as a string", 200, user(func(u map[string]any) { u["viewer"] = map[string]any{"following": "yes"} }), "following"},
		{"a problem", 404, problemBody(nil), ""},
		{"a problem without a code", 404, problemBody(func(p map[string]any) { delete(p, "code") }), `property "code" is missing`},
		{"a problem with a numeric status", 404, problemBody(func(p map[string]any) { p["status"] = "404" }), "status"},
		{"a problem whose type is not its code's link", 404, problemBody(func(p map[string]any) { p["type"] = "urn:pinstore:problem:not_found" }), "inconsistent problem"},
		{"a problem with an undocumented code", 404, problemBody(func(p map[string]any) { p["code"] = "gone_fishing"; p["type"] = "/docs#tag/errors/gone_fishing" }), `code "gone_fishing" is not among`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, base+"/v1/users/241294629943640797", nil)
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{"X-Request-Id": {"r1"}}
			if c.status < 400 {
				h.Set("Content-Type", "application/json")
				h.Set("ETag", `"1"`)
			} else {
				h.Set("Content-Type", "application/problem+json")
			}
			resp := &http.Response{StatusCode: c.status, Header: maps.Clone(h), Request: req}
			got := s.findings(req, nil, resp, c.body)
			switch {
			case c.want == "" && len(got) > 0:
				t.Fatalf("findings on a good response: %v", got)
			case c.want != "" && len(got) == 0:
				t.Fatalf("no finding, want one about %q", c.want)
			case c.want != "" && !strings.Contains(strings.Join(got, "\n"), c.want):
				t.Fatalf("findings %v, want one about %q", got, c.want)
			}
		})
	}

	// The Problem schema itself is open: a client generated today must
	// accept a code added tomorrow. Only the harness, which knows what
	// this server may send, refuses an undocumented one.
	var p any
	_ = json.Unmarshal(problemBody(func(p map[string]any) { p["code"] = "gone_fishing"; p["hint"] = "x" }), &p)
	if err := s.problem.VisitJSON(p); err != nil {
		t.Fatalf("the Problem schema refuses a new code or field: %v", err)
	}
}
