package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	pinstore "github.com/pinstore/pinstore"
	"github.com/pinstore/pinstore/model"
)

func TestStatusOf(t *testing.T) {
	want := map[string]int{
		model.EInvalid:        400,
		model.EUnauthorized:   401,
		model.EForbidden:      403,
		model.ENotFound:       404,
		EMethodNotAllowed:     405,
		model.EConflict:       409,
		model.EUsernameTaken:  409,
		model.EVersion:        412,
		model.ETooLarge:       413,
		EUnsupportedMediaType: 415,
		EAmbiguousJSON:        400,
		model.ERateLimited:    429,
		model.EInternal:       500,
		model.EUnavailable:    503,
		model.EMoving:         503,
		model.EShardFull:      503,
		model.EKeyInUse:       409,
		model.EKeyReused:      422,
		EMalformedRequest:     400,
		ERequestTimeout:       408,
		EHeadersTooLarge:      431,
		"no_such_code":        500,
	}
	for code, status := range want {
		if got := StatusOf(code); got != status {
			t.Errorf("StatusOf(%q) = %d, want %d", code, got, status)
		}
	}
	// Every code the map knows is tested above.
	for code := range errorStatus {
		if _, ok := want[code]; !ok {
			t.Errorf("code %q has no test", code)
		}
	}
}

// A request the connection loop refused is answered as the API answers:
// the status's code, the detail given, the client's request id when its
// headers were read, the path when it was, the no-store header.
func TestRefuse(t *testing.T) {
	s, _, _ := newTestServer(t, &fakeStore{})
	for _, c := range []struct {
		status     int
		code, path string
		id         string
	}{
		{413, model.ETooLarge, "/v1/pins", "client-id-1"},
		{431, EHeadersTooLarge, "", ""},
		{400, EMalformedRequest, "", ""},
		{408, ERequestTimeout, "", ""},
	} {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.URL.Path = c.path
		if c.id != "" {
			r.Header.Set(RequestIDHeader, c.id)
		}
		w := httptest.NewRecorder()
		s.Refuse(w, r, c.status, "what went wrong")
		var p Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatalf("%d: %s: %v", c.status, w.Body, err)
		}
		if w.Code != c.status || w.Header().Get("Content-Type") != "application/problem+json" || w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%d: answered %d %q", c.status, w.Code, w.Header())
		}
		if p.Code != c.code || p.Type != ProblemType(c.code) || p.Status != c.status || p.Detail != "what went wrong" ||
			p.Instance != c.path || p.RequestID == "" || p.RequestID != w.Header().Get(RequestIDHeader) || (c.id != "" && p.RequestID != c.id) {
			t.Errorf("%d: problem %+v", c.status, p)
		}
	}
}

func TestProblemFor(t *testing.T) {
	sqlCause := errors.New("Error 1146 (42S02): Table 'db00001.pins' doesn't exist; dsn root:secret@tcp(10.0.0.1:3306)/")
	cases := []struct {
		name       string
		err        error
		status     int
		code       string
		detail     string
		retryAfter string
	}{
		{"invalid", model.Errorf(model.EInvalid, "limit must be between 1 and 250"), 400, model.EInvalid, "limit must be between 1 and 250", ""},
		{"wrapped not found", fmt.Errorf("x: %w", model.Errorf(model.ENotFound, "pin not found")), 404, model.ENotFound, "pin not found", ""},
		{"bare error", sqlCause, 500, model.EInternal, "internal error", ""},
		{"internal with cause", model.Wrap("store.Get", model.EInternal, "", sqlCause), 500, model.EInternal, "internal error", ""},
		{"unavailable with cause", model.Wrap("store.Get", model.EUnavailable, "a database host is unavailable", sqlCause), 503, model.EUnavailable, "a database host is unavailable", "1"},
		{"moving", model.Errorf(model.EMoving, "shard 3 is moving"), 503, model.EMoving, "shard 3 is moving", "2"},
		{"full", model.Errorf(model.EShardFull, "shard 3 is full"), 503, model.EShardFull, "shard 3 is full", ""},
		{"rate limited", model.Errorf(model.ERateLimited, "slow down"), 429, model.ERateLimited, "slow down", "1"},
		{"unknown code", model.Errorf("bogus", "x"), 500, model.EInternal, "x", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/v1/pins/1", nil)
			p, retry := problemFor(r, c.err)
			if p.Status != c.status || p.Code != c.code || p.Detail != c.detail || retry != c.retryAfter {
				t.Fatalf("problemFor = %+v, Retry-After %q", p, retry)
			}
			if p.Type != "/docs#tag/errors/"+c.code || p.Instance != "/v1/pins/1" || p.Title == "" {
				t.Fatalf("problem %+v", p)
			}
		})
	}
}

func TestWriteErrorHeaders(t *testing.T) {
	w := httptest.NewRecorder()
	w.Header().Set("ETag", `"1"`)
	r := httptest.NewRequest("GET", "/x", nil)
	writeError(w, r, discardLogger(), model.Errorf(model.EUnavailable, "down"))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" ||
		w.Header().Get("Content-Type") != "application/problem+json" || w.Header().Get("ETag") != "" {
		t.Fatalf("status %d, headers %v", w.Code, w.Header())
	}
}

// A problem's type links to its code's section of /docs: the spec's
// "errors" tag has a "## code" heading for every code the server can send
// (Redoc anchors it as tag/errors/<code>), and Problem.code lists the same
// codes as its known values. No code is documented that the server lacks.
func TestProblemTypesAreDocumented(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(pinstore.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	var sections []string
	for _, tag := range doc.Tags {
		if tag.Name != "errors" {
			continue
		}
		if tag.Extensions["x-traitTag"] != true {
			t.Errorf("the errors tag is not marked x-traitTag: no operation belongs to it")
		}
		for _, m := range regexp.MustCompile(`(?m)^## (\S+)\s*$`).FindAllStringSubmatch(tag.Description, -1) {
			sections = append(sections, m[1])
		}
	}
	var listed []string
	if v, ok := doc.Components.Schemas["Problem"].Value.Properties["code"].Value.Extensions["x-extensible-enum"].([]any); ok {
		for _, c := range v {
			listed = append(listed, fmt.Sprint(c))
		}
	}
	var codes []string
	for code := range errorStatus {
		codes = append(codes, code)
		r := httptest.NewRequest("GET", "/v1/pins/1", nil)
		p, _ := problemFor(r, model.Errorf(code, "x"))
		if want := "/docs#tag/errors/" + code; p.Type != want {
			t.Errorf("code %s: type %q, want %q", code, p.Type, want)
		}
	}
	sort.Strings(codes)
	for what, got := range map[string][]string{"## sections of the errors tag": sections, "Problem.code's x-extensible-enum": listed} {
		if slices.Sort(got); !slices.Equal(got, codes) {
			t.Errorf("%s: %s\nthe server's codes: %s", what, strings.Join(got, " "), strings.Join(codes, " "))
		}
	}
}

// A problem document written by hand reads back as the Problem it was
// written from, whatever its strings hold, is encoding/json's bytes when
// they hold nothing it would escape, and ends with a newline as
// json.Encoder's did.
func TestProblemJSON(t *testing.T) {
	plain := Problem{Type: ProblemType(model.ENotFound), Title: "Not found", Status: 404,
		Detail: "user 1 does not like pin 2", Code: model.ENotFound, Instance: "/v1/users/1/likes/2", RequestID: "85357085afc0c8b49dcbb342f276c915"}
	odd := []Problem{
		plain,
		{Type: ProblemType(model.EInternal), Title: "Internal error", Status: 500, Code: model.EInternal}, // optional fields empty
		{Type: "t", Title: "quote \" backslash \\ tab \t nul \x00", Status: 400, Detail: "<b>&</b> é 漢 \u2028 \xff", Code: "c", Instance: "/v1/a b"},
	}
	for _, p := range odd {
		b := p.appendJSON(nil)
		if !bytes.HasSuffix(b, []byte("}\n")) {
			t.Errorf("%q: no closing newline", b)
		}
		var got Problem
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		want := p
		if err := json.Unmarshal(must(json.Marshal(p)), &want); err != nil { // invalid UTF-8 reads back replaced
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%q read back as %+v, want %+v", b, got, want)
		}
	}
	for _, p := range odd[:2] {
		if b, want := p.appendJSON(nil), append(must(json.Marshal(p)), '\n'); !bytes.Equal(b, want) {
			t.Errorf("got  %s\nwant %s", b, want)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
