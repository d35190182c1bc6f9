package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/auth"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// countingBody is a request body that counts the bytes read from it.
type countingBody struct {
	r     io.Reader
	bytes int
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.bytes += n
	return n, err
}
func (b *countingBody) Close() error { return nil }

func TestPatchRunsInsideUpdate(t *testing.T) {
	stored := []byte(`{"board_id":"` + vecBoard + `","owner_id":"` + vecUser + `","description":"old","active":true}`)
	var gotVersion int64
	st := &fakeStore{update: func(_ context.Context, id uint64, typ idcodec.Type, ifVersion int64, mutate func([]byte) ([]byte, error)) (model.Object, error) {
		gotVersion = ifVersion
		doc, err := mutate(stored)
		if err != nil {
			return model.Object{}, err
		}
		return model.Object{ID: id, Type: typ, Version: 4, Doc: doc, CreatedAt: time.Unix(0, 0), UpdatedAt: time.Unix(1, 0)}, nil
	}}
	s, _, _ := newTestServer(t, st)
	w := do(s, "PATCH", "/v1/pins/"+vecPin, `{"description":"new","data":{"k":1}}`, "Content-Type", "application/merge-patch+json", "If-Match", `"3"`)
	if w.Code != 200 || w.Header().Get("ETag") != `"4"` || gotVersion != 3 {
		t.Fatalf("%d ETag %q ifVersion %d: %s", w.Code, w.Header().Get("ETag"), gotVersion, w.Body)
	}
	var p Pin
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if p.Description != "new" || string(p.Data) != `{"k":1}` || p.OwnerID != vecUser || p.UpdatedAt != "1970-01-01T00:00:01Z" {
		t.Fatalf("%+v", p)
	}
	if strings.Contains(w.Body.String(), "active") {
		t.Fatalf("active exposed: %s", w.Body)
	}
	// A patch that fails validation inside the transaction is a 400.
	w = do(s, "PATCH", "/v1/pins/"+vecPin, `{"link":"`+strings.Repeat("x", 3000)+`"}`)
	if w.Code != 400 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

// TestCreatePinReadsBodyAndBoardOnce: with a user token, POST /v1/pins
// reads its body once, from the client's own reader (nothing puts a copy
// back for a second decode), makes no Get of the board, and hands the
// store the acting user, which checks the board on the row it reads.
// A service token, and auth off, act as no one (0).
func TestCreatePinReadsBodyAndBoardOnce(t *testing.T) {
	const body = `{"board_id":"` + vecBoard + `","link":"https://example.org/"}`
	for _, c := range []struct {
		name  string
		p     *auth.Principal // nil: auth off
		actor uint64
	}{
		{"user token", &userTok, userTok.UserID},
		{"service token", &writeTok, 0},
		{"auth off", nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got uint64
			st := &fakeStore{createP: func(_ context.Context, doc model.PinDoc, actor uint64) (model.Object, error) {
				got = actor
				doc.OwnerID = mustID(vecUser)
				return created(idcodec.TypePin, &doc)
			}}
			var seen *http.Request // the request the permission and the handler get
			var mods []func(*Config)
			if c.p != nil {
				mods = append(mods, asPrincipal(*c.p), func(cfg *Config) {
					inner := cfg.Auth
					cfg.Auth = func(next http.Handler) http.Handler {
						return inner(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
							seen = r
							next.ServeHTTP(w, r)
						}))
					}
				})
			}
			s, _, _ := newTestServer(t, st, mods...)
			rb := &countingBody{r: strings.NewReader(body)}
			r := httptest.NewRequest("POST", "/v1/pins", rb)
			r.Header.Set("Content-Type", "application/json")
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			if w.Code != http.StatusCreated {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if rb.bytes != len(body) {
				t.Fatalf("read %d bytes of a %d-byte body", rb.bytes, len(body))
			}
			if seen != nil && seen.Body != io.ReadCloser(rb) {
				t.Fatalf("the body was replaced by %T: read once, then again", seen.Body)
			}
			if want := []string{"CreatePin"}; !slices.Equal(st.calls, want) {
				t.Fatalf("store calls %v, want %v (no Get of the board)", st.calls, want)
			}
			if got != c.actor {
				t.Fatalf("CreatePin acted as %d, want %d", got, c.actor)
			}
		})
	}
}

// TestCreateAsTheBodyUser: a user token creates boards and comments only
// as the user the body names, compared in the handler on the body it
// decodes once; a malformed body is 400 before any write; refusals reach
// no store write. A comment's pin, named in its path, is read first (the
// route's pathObjects check: a pin the user may not see is 404 whatever
// the body). The pin's board is the store's to check: a refusal there is
// its 403, passed through.
func TestCreateAsTheBodyUser(t *testing.T) {
	comments := "/v1/pins/" + vecPin + "/comments"
	cases := []struct {
		name, path, body string
		p                auth.Principal
		status           int
		detail           string
		calls            []string
	}{
		{"own board", "/v1/boards", `{"owner_id":"` + vecUser + `","name":"mine"}`, userTok, 201, "", []string{"CreateBoard"}},
		{"board for another", "/v1/boards", `{"owner_id":"` + otherUser + `","name":"theirs"}`, userTok, 403, "a user token may only create boards for its own user", nil},
		{"board for another, by a service", "/v1/boards", `{"owner_id":"` + otherUser + `","name":"theirs"}`, writeTok, 201, "", []string{"CreateBoard"}},
		{"board, malformed body", "/v1/boards", `{"owner_id":"` + otherUser + `",`, userTok, 400, "invalid JSON", nil},
		{"board, no owner", "/v1/boards", `{"name":"x"}`, userTok, 400, "owner_id is required", nil},
		{"board, invalid document", "/v1/boards", `{"owner_id":"` + vecUser + `"}`, userTok, 400, "", nil},
		{"own comment", comments, `{"author_id":"` + vecUser + `","text":"nice"}`, userTok, 201, "", []string{"Get", "CreateComment"}},
		{"comment as another", comments, `{"author_id":"` + otherUser + `","text":"forged"}`, userTok, 403, "a user token may only comment as its own user", []string{"Get"}},
		{"comment, malformed body", comments, `{"author_id":1}`, userTok, 400, "author_id has the wrong JSON type", []string{"Get"}},
		{"comment on a board id", "/v1/pins/" + vecBoard + "/comments", `{`, userTok, 404, "", nil},
		{"pin on another's board", "/v1/pins", `{"board_id":"` + vecBoard + `"}`, userTok, 403, "a user token may only pin on its own user's boards", []string{"CreatePin"}},
		{"pin, malformed body", "/v1/pins", `{"board_id":"` + vecBoard + `"} x`, userTok, 400, "trailing data", nil},
		{"pin, invalid document", "/v1/pins", `{"board_id":"` + vecBoard + `","link":"` + strings.Repeat("x", 3000) + `"}`, userTok, 400, "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &fakeStore{
				get: func(_ context.Context, id uint64, typ idcodec.Type) (model.Object, error) {
					return model.Object{ID: id, Type: typ, Version: 1, Doc: otherPin}, nil // a public pin
				},
				createB: func(_ context.Context, doc model.BoardDoc) (model.Object, error) {
					return created(idcodec.TypeBoard, &doc)
				},
				createC: func(_ context.Context, doc model.CommentDoc) (model.Object, error) {
					return created(idcodec.TypeComment, &doc)
				},
				createP: func(_ context.Context, doc model.PinDoc, actor uint64) (model.Object, error) {
					if actor != 0 && actor != uint64(mustID(otherUser)) { // the board is otherUser's
						return model.Object{}, model.Wrap("store.CreatePin", model.EForbidden, "a user token may only pin on its own user's boards", nil)
					}
					return created(idcodec.TypePin, &doc)
				},
			}
			s, _, _ := newTestServer(t, st, asPrincipal(c.p))
			w := do(s, "POST", c.path, c.body)
			if w.Code != c.status {
				t.Fatalf("status %d, want %d: %s", w.Code, c.status, w.Body)
			}
			if c.status >= 400 {
				if p := problemOf(t, w); !strings.Contains(p.Detail, c.detail) {
					t.Fatalf("detail %q, want %q", p.Detail, c.detail)
				}
			}
			if !slices.Equal(st.calls, c.calls) {
				t.Fatalf("store calls %v, want %v", st.calls, c.calls)
			}
		})
	}
}

// TestPatchNamesReadOnlyFields: a PATCH naming a member of the type's
// wire form that it may not set is a 400 that says the member is
// read-only, for every member the declaration leaves read-only (a pin's
// owner_id, board_id, saved_from, section_id, secret and every object's
// id, version, counts …); one the wire form lacks (creator_id) is an
// unknown field. Neither reaches the store.
func TestPatchNamesReadOnlyFields(t *testing.T) {
	for _, typ := range model.ObjectTypes() {
		path := "/v1/" + collection(typ) + "/" + idString(idcodec.MustEncode(3429, typ, 7))
		ro := model.ReadOnlyFields(typ)
		if typ == typePin && !slices.Contains(ro, "owner_id") {
			t.Fatalf("a pin's owner_id is not read-only: %v", ro)
		}
		for _, f := range append(ro, "creator_id") {
			st := &fakeStore{}
			s, _, _ := newTestServer(t, st)
			w := do(s, "PATCH", path, `{"`+f+`":"1"}`)
			want := f + " is read-only"
			if f == "creator_id" {
				want = `unknown field "creator_id"`
			}
			if p := problemOf(t, w); w.Code != 400 || p.Code != model.EInvalid || p.Detail != want {
				t.Errorf("PATCH %s {%q}: %d %s %q, want 400 %s %q", path, f, w.Code, p.Code, p.Detail, model.EInvalid, want)
			}
			if len(st.calls) > 0 {
				t.Errorf("PATCH %s {%q} called the store: %v", path, f, st.calls)
			}
		}
	}
}
