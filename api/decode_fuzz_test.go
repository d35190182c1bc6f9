package api

// Fuzz targets for request-body decoding: the create, patch, owners and
// position bodies. Each target feeds arbitrary bytes two ways: straight
// to decodeStrict, as every body decoder does, and through the real
// Server, whose handlers decode and then call a store that, like the real
// one, validates a new document first and records what it was given
// only when the document is valid. The promises checked:
//
//   - Nothing panics, and the server never answers 5xx to a body.
//   - A refused body is a *model.Error with code invalid_argument,
//     ambiguous_json or too_large, answered 400 or 413 with that code, and
//     the store is not called.
//   - An accepted body reaches the store as a document that validates,
//     whose ids are of the right type, whose data is a JSON object within
//     its limit, and which re-encodes to what a shard can store: valid
//     UTF-8, nested at most MaxJSONDepth deep, no lone surrogate escapes
//     (checked here independently of checkJSON), and stable under
//     decode and re-encode.
//   - An accepted body is one every JSON parser reads alike (checked with
//     encoding/json's tokenizer, independently of checkJSON): no member
//     name twice in an object, none holding NUL, no number beyond a
//     double, no integer beyond ±(2^53−1).
//
// The seed corpus is in testdata/fuzz/<FuzzName>/; run one target with
//
//	go test -run='^$' -fuzz='^FuzzDecodeCreate$' -fuzztime=60s ./api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// fuzzComment is a comment ID (shard 3429, local 42), to patch.
var fuzzComment = strconv.FormatUint(idcodec.MustEncode(3429, idcodec.TypeComment, 42), 10)

// fuzzCall records what a handler handed the store. It travels in the
// request's context, so a recording belongs to one request.
type fuzzCall struct {
	op      string
	doc     model.Doc // a create's document
	patched []byte    // what an Update's mutate returned
	from    uint64    // the object or list the call was about
	ids     []uint64  // Owners' pins
	item    uint64    // Move's pin
	before  uint64    // Move's anchors
	after   uint64
}

type fuzzCallKey struct{}

// fuzzStore is a Store that records each call in the request's fuzzCall
// and succeeds; calls no body route makes fail as internal errors. Its
// creates validate the document with the default limits first, as the
// real store does before any I/O, and record nothing for a refused one.
type fuzzStore struct{}

var _ Store = fuzzStore{}

func record(ctx context.Context, op string) *fuzzCall {
	c := ctx.Value(fuzzCallKey{}).(*fuzzCall)
	if c.op != "" {
		panic("fuzzStore: " + op + " after " + c.op)
	}
	c.op = op
	return c
}

// fuzzStored are the documents Update patches: valid, active, with data
// nested a few levels.
var fuzzStored = map[idcodec.Type][]byte{
	idcodec.TypeUser:    mustJSON(model.UserDoc{Username: "alice", DisplayName: "Alice", Data: json.RawMessage(`{"a":{"b":[1,2,{"c":null}]},"n":1e300}`), Active: true}),
	idcodec.TypeBoard:   mustJSON(model.BoardDoc{OwnerID: mustID(vecUser), Name: "Recipes", Description: "things", Data: json.RawMessage(`{"x":{"y":{"z":"\u00e9"}}}`), Active: true}),
	idcodec.TypePin:     mustJSON(model.PinDoc{BoardID: mustID(vecBoard), OwnerID: mustID(vecUser), Link: "https://example.org/", Description: "a pin", Data: json.RawMessage(`{"k":"v"}`), Active: true}),
	idcodec.TypeComment: mustJSON(model.CommentDoc{PinID: mustID(vecPin), AuthorID: mustID(vecUser), Text: "looks good", Active: true}),
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func mustID(s string) model.ID {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return model.ID(id)
}

// created answers a create with the document as stored, under an id of
// its type.
func created(typ idcodec.Type, doc model.Doc) (model.Object, error) {
	return model.Object{ID: idcodec.MustEncode(3429, typ, 1), Type: typ, Version: 1, Doc: mustJSON(doc)}, nil
}

func (fuzzStore) CreateUser(ctx context.Context, doc model.UserDoc) (model.Object, error) {
	if err := doc.Validate(model.Limits{}); err != nil {
		return model.Object{}, err
	}
	record(ctx, "CreateUser").doc = &doc
	return created(idcodec.TypeUser, &doc)
}

// Create records the document under the name of the store's create of
// its type ("CreateBoard", …), and answers it as stored: a section owned
// by the board's owner, as the store does.
func (fuzzStore) Create(ctx context.Context, typ idcodec.Type, doc model.Doc, actor uint64) (model.Object, error) {
	switch d := doc.(type) {
	case *model.UserDoc:
		return fuzzStore{}.CreateUser(ctx, *d)
	case *model.PinDoc:
		return fuzzStore{}.CreatePin(ctx, *d, actor)
	}
	if err := doc.Validate(model.Limits{}); err != nil {
		return model.Object{}, err
	}
	name := typ.String()
	record(ctx, "Create"+strings.ToUpper(name[:1])+name[1:]).doc = doc
	if d, ok := doc.(*model.SectionDoc); ok {
		stored := *d
		stored.OwnerID = mustID(vecUser)
		return created(typ, &stored)
	}
	return created(typ, doc)
}
func (fuzzStore) CreatePin(ctx context.Context, doc model.PinDoc, actor uint64) (model.Object, error) {
	if err := doc.Validate(model.Limits{}); err != nil {
		return model.Object{}, err
	}
	record(ctx, "CreatePin").doc = &doc
	stored := doc
	stored.OwnerID = mustID(vecUser) // as the store does: the board's owner
	return created(idcodec.TypePin, &stored)
}
func (fuzzStore) SavePin(ctx context.Context, source, board, actor uint64) (model.Object, bool, error) {
	record(ctx, "SavePin")
	doc := model.PinDoc{BoardID: model.ID(board), OwnerID: mustID(vecUser), SavedFrom: model.ID(source), Active: true}
	o, err := created(idcodec.TypePin, &doc)
	return o, true, err
}
func (fuzzStore) SetPinSection(ctx context.Context, pin, section uint64) (model.Object, error) {
	record(ctx, "SetPinSection").from = pin
	doc := model.PinDoc{BoardID: mustID(vecBoard), OwnerID: mustID(vecUser), SectionID: model.ID(section), Active: true}
	o, err := created(idcodec.TypePin, &doc)
	o.ID = pin
	return o, err
}
func (fuzzStore) Update(ctx context.Context, id uint64, typ idcodec.Type, ifVersion int64, mutate func([]byte) ([]byte, error)) (model.Object, error) {
	c := record(ctx, "Update")
	c.from = id
	out, err := mutate(bytes.Clone(fuzzStored[typ]))
	if err != nil {
		return model.Object{}, err
	}
	c.patched = out
	return model.Object{ID: id, Type: typ, Version: 2, Doc: out}, nil
}
func (fuzzStore) Move(ctx context.Context, m model.Mapping, from, item, before, after uint64) error {
	c := record(ctx, "Move")
	c.from, c.item, c.before, c.after = from, item, before, after
	return nil
}
func (fuzzStore) UseKey(ctx context.Context) error {
	record(ctx, "UseKey")
	return nil
}
func (fuzzStore) Owners(ctx context.Context, pins []uint64) (map[uint64]uint64, error) {
	record(ctx, "Owners").ids = pins
	return map[uint64]uint64{}, nil
}

func fuzzUnexpected(op string) error {
	return model.Wrap(op, model.EInternal, "", errors.New("not a body route"))
}

func (fuzzStore) Get(context.Context, uint64, idcodec.Type) (model.Object, error) {
	return model.Object{}, fuzzUnexpected("Get")
}
func (fuzzStore) GetMany(context.Context, []uint64, idcodec.Type) ([]model.Object, error) {
	return nil, fuzzUnexpected("GetMany")
}
func (fuzzStore) Delete(context.Context, uint64, idcodec.Type, int64) error {
	return fuzzUnexpected("Delete")
}
func (fuzzStore) AddMapping(context.Context, model.Mapping, uint64, uint64) error {
	return fuzzUnexpected("AddMapping")
}
func (fuzzStore) RemoveMapping(context.Context, model.Mapping, uint64, uint64) error {
	return fuzzUnexpected("RemoveMapping")
}
func (fuzzStore) ListObjects(context.Context, model.Mapping, uint64, model.Page) (model.List, []model.Object, error) {
	return model.List{}, nil, fuzzUnexpected("ListObjects")
}
func (fuzzStore) Feed(context.Context, uint64, model.Page) (model.List, error) {
	return model.List{}, fuzzUnexpected("Feed")
}
func (fuzzStore) GetUserByUsername(context.Context, string) (model.Object, error) {
	return model.Object{}, fuzzUnexpected("GetUserByUsername")
}
func (fuzzStore) HasMany(context.Context, model.Mapping, uint64, []uint64) ([]bool, error) {
	return nil, fuzzUnexpected("HasMany")
}
func (fuzzStore) HasManyLive(context.Context, model.Mapping, uint64, []uint64) ([]bool, []model.Object, error) {
	return nil, nil, fuzzUnexpected("HasManyLive")
}
func (fuzzStore) Ready(context.Context) []fleet.Health { return nil }
func (fuzzStore) ShardMapInfo(context.Context) fleet.ShardMapInfo {
	return fleet.ShardMapInfo{}
}

// newFuzzServer is a Server on a fuzzStore, with default limits and no
// auth.
func newFuzzServer(f *testing.F) *Server {
	f.Helper()
	s, err := New(Config{Store: fuzzStore{}, Logger: discardLogger(), Registry: prometheus.NewRegistry()})
	if err != nil {
		f.Fatal(err)
	}
	return s
}

// serveBody sends body to the server and returns the response and what
// the store was handed.
func serveBody(s *Server, method, path, contentType string, body []byte) (*httptest.ResponseRecorder, *fuzzCall) {
	r := httptest.NewRequest(method, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	c := &fuzzCall{}
	r = r.WithContext(context.WithValue(r.Context(), fuzzCallKey{}, c))
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w, c
}

// checkDecodeError checks decodeStrict's promise about its error.
func checkDecodeError(t *testing.T, err error) {
	t.Helper()
	var me *model.Error
	if !errors.As(err, &me) || me.Code != model.EInvalid && me.Code != EAmbiguousJSON && me.Code != model.ETooLarge {
		t.Fatalf("decodeStrict error %#v is not a *model.Error with code %s, %s or %s", err, model.EInvalid, EAmbiguousJSON, model.ETooLarge)
	}
	if me.Message == "" {
		t.Fatalf("decodeStrict error %v has no client message", err)
	}
}

// checkStrictRoundTrip decodes body into a new value of dst's type with
// decodeStrict, and when it is accepted, checks its encoding decodes
// again to the same encoding. It reports whether body was accepted.
func checkStrictRoundTrip[T any](t *testing.T, body []byte) bool {
	t.Helper()
	return checkStrictRoundTripOf(t, body, reflect.TypeFor[T]())
}

// checkStrictRoundTripOf is checkStrictRoundTrip into a struct of type
// typ (a create's body, made from its type's declaration).
func checkStrictRoundTripOf(t *testing.T, body []byte, typ reflect.Type) bool {
	t.Helper()
	v := reflect.New(typ).Interface()
	err := decodeStrict(body, v)
	if err != nil {
		checkDecodeError(t, err)
		return false
	}
	if !utf8.Valid(body) {
		t.Fatalf("decodeStrict accepted a body that is not UTF-8: %q", body)
	}
	if d := jsonDepth(t, body); d > MaxJSONDepth {
		t.Fatalf("decodeStrict accepted a body nested %d deep: %q", d, body)
	}
	if hasLoneSurrogate(body) {
		t.Fatalf("decodeStrict accepted a lone surrogate escape: %q", body)
	}
	if why := notInteroperable(t, body); why != "" {
		t.Fatalf("decodeStrict accepted a body parsers read differently (%s): %q", why, body)
	}
	enc, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("re-encoding %#v: %v", v, err)
	}
	again := reflect.New(typ).Interface()
	if err := decodeStrict(enc, again); err != nil {
		t.Fatalf("the re-encoding %s of accepted %q is refused: %v", enc, body, err)
	}
	if enc2 := mustJSON(again); !bytes.Equal(enc, enc2) {
		t.Fatalf("re-encoding is unstable: %s then %s", enc, enc2)
	}
	return true
}

// checkRefused checks a refused request: 400 invalid_argument or
// ambiguous_json, or 413 too_large, as a problem document, and nothing handed to the store (a
// patch is refused inside Update, by its mutate, so nothing is written).
func checkRefused(t *testing.T, w *httptest.ResponseRecorder, c *fuzzCall) {
	t.Helper()
	if c.op != "" && (c.op != "Update" || c.patched != nil) {
		t.Fatalf("status %d, yet the store was handed the request (%s)", w.Code, c.op)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("status %d with Content-Type %q: %s", w.Code, ct, w.Body)
	}
	var p Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %q: %v", w.Body, err)
	}
	switch {
	case w.Code == http.StatusBadRequest && (p.Code == model.EInvalid || p.Code == EAmbiguousJSON):
	case w.Code == http.StatusRequestEntityTooLarge && p.Code == model.ETooLarge:
	default:
		t.Fatalf("a body was answered %d %s (%s); want 400 %s or %s, or 413 %s", w.Code, p.Code, p.Detail, model.EInvalid, EAmbiguousJSON, model.ETooLarge)
	}
}

// checkStorable checks a document as a shard would store it: it validates,
// it is active, its encoding is what MariaDB's JSON_VALID accepts (UTF-8,
// nested at most MaxJSONDepth, no lone surrogate escape), it decodes as
// live, and it re-encodes to itself.
func checkStorable(t *testing.T, typ idcodec.Type, doc model.Doc) []byte {
	t.Helper()
	if err := doc.Validate(model.Limits{}); err != nil {
		t.Fatalf("the store was handed a %s that does not validate: %v: %#v", typ, err, doc)
	}
	if !doc.IsActive() {
		t.Fatalf("the store was handed an inactive %s", typ)
	}
	enc, err := json.Marshal(doc)
	if err != nil {
		t.Fatalf("encoding the %s: %v", typ, err)
	}
	if !utf8.Valid(enc) {
		t.Fatalf("the %s encodes to invalid UTF-8: %q", typ, enc)
	}
	if d := jsonDepth(t, enc); d > MaxJSONDepth {
		t.Fatalf("the %s is nested %d deep: %s", typ, d, enc)
	}
	if hasLoneSurrogate(enc) {
		t.Fatalf("the %s holds a lone surrogate escape: %s", typ, enc)
	}
	back, err := model.DecodeDoc(typ, enc)
	if err != nil {
		t.Fatalf("the %s's encoding %s does not decode: %v", typ, enc, err)
	}
	if !model.FlagsOf(back).Active() {
		t.Fatalf("the live %s %s decodes as deleted", typ, enc)
	}
	if enc2 := mustJSON(back); !bytes.Equal(enc, enc2) {
		t.Fatalf("the %s re-encodes unstably: %s then %s", typ, enc, enc2)
	}
	if data := dataOf(doc); len(data) > 0 && !bytes.Equal(data, []byte("null")) {
		if len(data) > model.DefaultMaxData || data[0] != '{' {
			t.Fatalf("the %s's data is not an object within %d bytes: %q", typ, model.DefaultMaxData, data)
		}
	}
	return enc
}

func dataOf(doc model.Doc) json.RawMessage {
	switch d := doc.(type) {
	case *model.UserDoc:
		return d.Data
	case *model.BoardDoc:
		return d.Data
	case *model.PinDoc:
		return d.Data
	case *model.CommentDoc:
		return d.Data
	}
	return nil
}

// checkIDOf checks that id is an assignable id of type want.
func checkIDOf(t *testing.T, field string, id uint64, want idcodec.Type) {
	t.Helper()
	p, err := idcodec.Decode(id)
	if err != nil || p.Type != want || p.Local == 0 {
		t.Fatalf("%s %d is not a %s id (%+v, %v)", field, id, want, p, err)
	}
}

// jsonDepth is how deeply the valid JSON text b nests, counted with the
// tokenizer of encoding/json rather than checkJSON's scanner.
func jsonDepth(t *testing.T, b []byte) int {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // 1e400 is JSON, if no float64
	depth, max := 0, 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return max
		}
		if err != nil {
			t.Fatalf("accepted JSON %q does not tokenize: %v", b, err)
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			if depth++; depth > max {
				max = depth
			}
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
	}
}

// notInteroperable says why parsers would read the valid JSON text b
// differently ("" when they would not), found with the tokenizer of
// encoding/json rather than checkJSON's scanner.
func notInteroperable(t *testing.T, b []byte) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	type frame struct {
		obj     bool
		wantKey bool
		names   map[string]bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return ""
		}
		if err != nil {
			t.Fatalf("accepted JSON %q does not tokenize: %v", b, err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.wantKey {
			if tok == json.Delim('}') {
				stack = stack[:len(stack)-1]
				continue
			}
			name := tok.(string)
			if top.names[name] {
				return "member name " + strconv.Quote(name) + " twice"
			}
			if strings.ContainsRune(name, 0) {
				return "NUL in a member name"
			}
			top.names[name] = true
			top.wantKey = false
			continue
		}
		if top != nil && top.obj {
			top.wantKey = true // after this value, a name
		}
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{':
				stack = append(stack, &frame{obj: true, wantKey: true, names: map[string]bool{}})
			case '[':
				stack = append(stack, &frame{})
			case ']':
				stack = stack[:len(stack)-1]
			}
		case json.Number:
			if f, err := tok.Float64(); err != nil || math.IsInf(f, 0) {
				return "number " + tok.String() + " beyond a double"
			}
			if !strings.ContainsAny(tok.String(), ".eE") {
				if n, err := tok.Int64(); err != nil || n > 1<<53-1 || n < -(1<<53-1) {
					return "integer " + tok.String() + " beyond 2^53-1"
				}
			}
		}
	}
}

var (
	jsonStringRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	jsonEscapeRE = regexp.MustCompile(`\\(?:u([0-9a-fA-F]{4})|.)`)
)

// hasLoneSurrogate reports whether the valid JSON text b has a \u escape
// of a UTF-16 surrogate that is not a high one directly followed by a low
// one, which MariaDB's JSON_VALID refuses (and encoding/json turns into
// U+FFFD).
func hasLoneSurrogate(b []byte) bool {
	for _, s := range jsonStringRE.FindAll(b, -1) {
		high, end := false, -1 // a high surrogate awaits its low one; where the last escape ended
		for _, m := range jsonEscapeRE.FindAllSubmatchIndex(s, -1) {
			r := rune(-1)
			if m[2] >= 0 {
				v, _ := strconv.ParseUint(string(s[m[2]:m[3]]), 16, 32)
				r = rune(v)
			}
			low := r >= 0xdc00 && r <= 0xdfff
			switch {
			case high && (m[0] != end || !low):
				return true
			case high:
				high = false
			case r >= 0xd800 && r <= 0xdbff:
				high = true
			case low:
				return true
			}
			end = m[1]
		}
		if high {
			return true
		}
	}
	return false
}

// createRoutes are the create routes a fuzz input's route byte picks.
var createRoutes = []struct {
	path string
	typ  idcodec.Type
	op   string
}{
	{"/v1/users", idcodec.TypeUser, "CreateUser"},
	{"/v1/boards", idcodec.TypeBoard, "CreateBoard"},
	{"/v1/pins", idcodec.TypePin, "CreatePin"},
	{"/v1/pins/" + vecPin + "/comments", idcodec.TypeComment, "CreateComment"},
}

// FuzzDecodeCreate: the body of POST /v1/users, /v1/boards, /v1/pins and
// /v1/pins/{id}/comments (route picks one).
func FuzzDecodeCreate(f *testing.F) {
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		rt := createRoutes[int(route)%len(createRoutes)]
		decl, _ := model.TypeOf(rt.typ)
		accepted := checkStrictRoundTripOf(t, body, newCreateBody(decl).typ)
		w, c := serveBody(s, http.MethodPost, rt.path, "application/json", body)
		if w.Code != http.StatusCreated {
			checkRefused(t, w, c)
			if !accepted && w.Code != http.StatusBadRequest && len(body) <= DefaultMaxBodyBytes {
				t.Fatalf("decodeStrict refuses the body, yet the server answered %d", w.Code)
			}
			return
		}
		if !accepted {
			t.Fatalf("decodeStrict refuses the body, yet the server created a %s", rt.typ)
		}
		if c.op != rt.op || c.doc == nil {
			t.Fatalf("created (%d), yet the store saw %q", w.Code, c.op)
		}
		checkStorable(t, rt.typ, c.doc)
		switch d := c.doc.(type) {
		case *model.BoardDoc:
			checkIDOf(t, "owner_id", uint64(d.OwnerID), idcodec.TypeUser)
		case *model.PinDoc:
			checkIDOf(t, "board_id", uint64(d.BoardID), idcodec.TypeBoard)
			if d.OwnerID != 0 {
				t.Fatalf("the client set a pin's owner_id %d", d.OwnerID)
			}
		case *model.CommentDoc:
			checkIDOf(t, "author_id", uint64(d.AuthorID), idcodec.TypeUser)
			if d.PinID != mustID(vecPin) {
				t.Fatalf("comment on pin %d, want the path's %s", d.PinID, vecPin)
			}
		}
		if !json.Valid(w.Body.Bytes()) {
			t.Fatalf("201 with a body that is not JSON: %q", w.Body)
		}
	})
}

// patchRoutes are the objects a fuzz input's typ byte picks to patch.
var patchRoutes = []struct {
	path string
	typ  idcodec.Type
}{
	{"/v1/users/" + vecUser, idcodec.TypeUser},
	{"/v1/boards/" + vecBoard, idcodec.TypeBoard},
	{"/v1/pins/" + vecPin, idcodec.TypePin},
	{"/v1/comments/" + fuzzComment, idcodec.TypeComment},
}

// FuzzDecodePatch: the merge patch of PATCH /v1/{users,boards,pins,
// comments}/{id} (typ picks one), applied to a stored document.
func FuzzDecodePatch(f *testing.F) {
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, typ uint8, body []byte) {
		rt := patchRoutes[int(typ)%len(patchRoutes)]
		accepted := checkStrictRoundTrip[map[string]json.RawMessage](t, body)
		ct := "application/merge-patch+json"
		if typ&0x80 != 0 {
			ct = "application/json"
		}
		w, c := serveBody(s, http.MethodPatch, rt.path, ct, body)
		if w.Code != http.StatusOK {
			checkRefused(t, w, c)
			if !accepted && w.Code != http.StatusBadRequest && len(body) <= DefaultMaxBodyBytes {
				t.Fatalf("decodeStrict refuses the patch, yet the server answered %d", w.Code)
			}
			return
		}
		if !accepted {
			t.Fatalf("decodeStrict refuses the patch, yet the server applied it")
		}
		if c.op != "Update" || c.patched == nil {
			t.Fatalf("patched (200), yet the store saw %q", c.op)
		}
		doc, err := model.DecodeDoc(rt.typ, c.patched)
		if err != nil {
			t.Fatalf("the patched %s %s does not decode: %v", rt.typ, c.patched, err)
		}
		if enc := checkStorable(t, rt.typ, doc); !bytes.Equal(enc, c.patched) {
			t.Fatalf("the patched %s is not in its canonical encoding:\n%s\n%s", rt.typ, c.patched, enc)
		}
		orig, err := model.DecodeDoc(rt.typ, fuzzStored[rt.typ])
		if err != nil {
			t.Fatal(err)
		}
		if !model.SameRefs(doc, orig) {
			t.Fatalf("a patch moved the %s: refs %v, were %v", rt.typ, model.RefsOf(doc), model.RefsOf(orig))
		}
	})
}

// FuzzDecodeOwners: the body of POST /v1/pins/owners.
func FuzzDecodeOwners(f *testing.F) {
	s := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		accepted := checkStrictRoundTrip[ownersRequest](t, body)
		w, c := serveBody(s, http.MethodPost, "/v1/pins/owners", "application/json", body)
		if w.Code != http.StatusOK {
			checkRefused(t, w, c)
			if !accepted && w.Code != http.StatusBadRequest && len(body) <= DefaultMaxBodyBytes {
				t.Fatalf("decodeStrict refuses the body, yet the server answered %d", w.Code)
			}
			return
		}
		if !accepted {
			t.Fatalf("decodeStrict refuses the body, yet the server answered 200")
		}
		var resp OwnersResponse
		if err := json.Unmarshal(w.Body.Bytes(), &resp); err != nil {
			t.Fatalf("200 with body %q: %v", w.Body, err)
		}
		if c.op != "Owners" {
			// No ids at all: nothing to look up.
			if c.op != "" || len(resp.NotFound) != 0 {
				t.Fatalf("200 without looking up %v (store saw %q)", resp.NotFound, c.op)
			}
			return
		}
		if len(c.ids) == 0 || len(c.ids) > MaxOwners || len(resp.NotFound) != len(c.ids) {
			t.Fatalf("looked up %d pins, answered %d not found", len(c.ids), len(resp.NotFound))
		}
		seen := map[uint64]bool{}
		for i, id := range c.ids {
			checkIDOf(t, "ids", id, idcodec.TypePin)
			if seen[id] {
				t.Fatalf("pin %d looked up twice", id)
			}
			seen[id] = true
			if resp.NotFound[i] != strconv.FormatUint(id, 10) {
				t.Fatalf("not_found[%d] = %q, looked up %d", i, resp.NotFound[i], id)
			}
		}
	})
}

// FuzzDecodePosition: the body of PUT /v1/boards/{id}/pins/{pin_id}/position.
func FuzzDecodePosition(f *testing.F) {
	s := newFuzzServer(f)
	path := "/v1/boards/" + vecBoard + "/pins/" + vecPin + "/position"
	f.Fuzz(func(t *testing.T, body []byte) {
		accepted := checkStrictRoundTrip[moveRequest](t, body)
		w, c := serveBody(s, http.MethodPut, path, "application/json", body)
		if w.Code != http.StatusNoContent {
			checkRefused(t, w, c)
			if !accepted && w.Code != http.StatusBadRequest && len(body) <= DefaultMaxBodyBytes {
				t.Fatalf("decodeStrict refuses the body, yet the server answered %d", w.Code)
			}
			return
		}
		if !accepted {
			t.Fatalf("decodeStrict refuses the body, yet the server moved the pin")
		}
		if c.op != "Move" || c.from != uint64(mustID(vecBoard)) || c.item != uint64(mustID(vecPin)) {
			t.Fatalf("moved (204), yet the store saw %q %d %d", c.op, c.from, c.item)
		}
		if (c.before == 0) == (c.after == 0) {
			t.Fatalf("a move with before %d and after %d", c.before, c.after)
		}
		anchor := c.before | c.after
		checkIDOf(t, "anchor", anchor, idcodec.TypePin)
		if anchor == c.item {
			t.Fatalf("pin %d moved next to itself", anchor)
		}
	})
}
