package api

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	pinstore "github.com/pinstore/pinstore"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// TestPathTablesFollowTheDeclarations: the api's per-type tables, derived
// from model's declarations, are what they were written out by hand: each
// type's collection, the path segments naming objects that can be hidden,
// and the rows, permission and refusal of /v1/{collection}/{id}.
func TestPathTablesFollowTheDeclarations(t *testing.T) {
	wantCollection := map[idcodec.Type]string{
		typeUser: "users", typeBoard: "boards", typePin: "pins", typeComment: "comments", typeSection: "sections",
	}
	for _, typ := range model.ObjectTypes() {
		if got := collection(typ); got != wantCollection[typ] {
			t.Errorf("collection(%s) = %q, want %q", typ, got, wantCollection[typ])
		}
	}
	if len(model.ObjectTypes()) != len(wantCollection) || collection(idcodec.Type(900)) != "" {
		t.Errorf("declared types %v; collection of an undeclared type %q", model.ObjectTypes(), collection(idcodec.Type(900)))
	}
	wantParams := map[string]idcodec.Type{"boards": typeBoard, "pins": typePin, "comments": typeComment, "likes": typePin, "sections": typeSection}
	if !maps.Equal(paramTypes, wantParams) {
		t.Errorf("paramTypes = %v, want %v", paramTypes, wantParams)
	}
	if m, ok := seenThrough(typeComment); !ok || m.List != model.PinComments {
		t.Errorf("a comment is seen through %v, %v; want its pin's pin_comments", m.List, ok)
	}
	for _, typ := range []idcodec.Type{typeUser, typeBoard, typePin, typeSection} {
		if _, ok := seenThrough(typ); ok {
			t.Errorf("a %s is seen through a parent", typ)
		}
	}

	// The rows of /v1/{collection}/{id}, as "method permission visibility".
	wantRows := map[idcodec.Type][]string{
		typeUser:    {"GET readAny filters", "PATCH asPathUser noSecrets", "DELETE asPathUser noSecrets"},
		typeBoard:   {"GET readAny pathObjects", "PATCH asBoardEditor pathObjects", "DELETE asBoardEditor pathObjects"},
		typePin:     {"GET readAny pathObjects", "PATCH asPinEditor pathObjects", "DELETE asPinEditor pathObjects"},
		typeComment: {"GET readAny pathObjects", "PATCH asCommentEditor pathObjects", "DELETE asCommentEditor pathObjects"},
		typeSection: {"GET readAny pathObjects", "PATCH asSectionEditor pathObjects", "DELETE asSectionEditor pathObjects"},
	}
	s := &Server{}
	for typ, want := range wantRows {
		rows := s.objectRoutes(typ)
		var got []string
		for _, rt := range rows {
			if rt.pattern != "/v1/"+wantCollection[typ]+"/{id}" {
				t.Errorf("%s: route %s %s", typ, rt.method, rt.pattern)
			}
			got = append(got, fmt.Sprintf("%s %s %s", rt.method, rt.who.name, rt.see))
		}
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Errorf("objectRoutes(%s) = %v, want %v", typ, got, want)
		}
	}
	if asEditor(idcodec.Type(900)).declared() {
		t.Error("an undeclared type has an editor's permission")
	}
}

// TestEditorOf: the editor of a path's object comes from the object the
// guard read when there is one; otherwise a pin's from the owner cache
// (a pin it does not know is the missing pin's 404) and any other type's
// from a read of the object.
func TestEditorOf(t *testing.T) {
	pin, board := mustID(vecPin), mustID(vecBoard)
	owner := uint64(mustID(vecUser))
	pinDoc := []byte(`{"board_id":"` + vecBoard + `","owner_id":"` + otherUser + `","active":true}`)
	seenPin := context.WithValue(context.Background(), seenKey, seenObjects{uint64(pin): {ID: uint64(pin), Type: typePin, Doc: pinDoc}})
	cases := []struct {
		name  string
		ctx   context.Context
		id    model.ID
		typ   idcodec.Type
		store fakeStore
		want  uint64
		err   string
		calls []string
	}{
		{"pin the guard read", seenPin, pin, typePin, fakeStore{}, uint64(mustID(otherUser)), "", nil},
		{"pin by the owner cache", context.Background(), pin, typePin, fakeStore{owners: func(context.Context, []uint64) (map[uint64]uint64, error) {
			return map[uint64]uint64{uint64(pin): owner}, nil
		}}, owner, "", []string{"Owners"}},
		{"pin the owner cache does not know", context.Background(), pin, typePin, fakeStore{owners: func(context.Context, []uint64) (map[uint64]uint64, error) {
			return map[uint64]uint64{}, nil
		}}, 0, model.ENotFound, []string{"Owners"}},
		{"board read", context.Background(), board, typeBoard, fakeStore{get: func(_ context.Context, id uint64, typ idcodec.Type) (model.Object, error) {
			return model.Object{ID: id, Type: typ, Doc: ownBoard}, nil
		}}, owner, "", []string{"Get"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := c.store
			s, _, _ := newTestServer(t, &st)
			d, _ := model.TypeOf(c.typ)
			got, err := s.editorOf(c.ctx, uint64(c.id), c.typ, d.Editor)
			if got != c.want || (c.err == "" && err != nil) || (c.err != "" && !model.IsCode(err, c.err)) {
				t.Fatalf("editorOf = %d, %v; want %d, %q", got, err, c.want, c.err)
			}
			if !slices.Equal(st.calls, c.calls) {
				t.Fatalf("store calls %v, want %v", st.calls, c.calls)
			}
		})
	}
}

// TestEditorOfOtherRef: the owner cache answers only for the ref the
// declaration names as the owner (model.ObjectType.OwnerCached, Owner); any
// other ref of a pin comes from a read of the pin.
func TestEditorOfOtherRef(t *testing.T) {
	pin, board := mustID(vecPin), mustID(vecBoard)
	pinDoc := []byte(`{"board_id":"` + vecBoard + `","owner_id":"` + otherUser + `","active":true}`)
	st := fakeStore{
		get: func(_ context.Context, id uint64, typ idcodec.Type) (model.Object, error) {
			return model.Object{ID: id, Type: typ, Doc: pinDoc}, nil
		},
		owners: func(context.Context, []uint64) (map[uint64]uint64, error) {
			return map[uint64]uint64{uint64(pin): uint64(mustID(vecUser))}, nil
		},
	}
	s, _, _ := newTestServer(t, &st)
	got, err := s.editorOf(context.Background(), uint64(pin), typePin, 0) // ref 0: board_id
	if err != nil || got != uint64(board) {
		t.Fatalf("editorOf(pin, ref 0) = %d, %v; want the board %d", got, err, uint64(board))
	}
	if !slices.Equal(st.calls, []string{"Get"}) {
		t.Fatalf("store calls %v, want [Get]", st.calls)
	}
}

// TestCreateBodiesFollowTheSpec: each create route's body, as its type's
// declaration makes it (its Given ids not in the path, then its Editable
// members), holds exactly the members openapi.yaml documents for it, and
// the ids the spec marks required are the ones the declaration requires.
func TestCreateBodiesFollowTheSpec(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(pinstore.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	for path, typ := range map[string]idcodec.Type{
		"/v1/users": typeUser, "/v1/boards": typeBoard, "/v1/pins": typePin,
		"/v1/pins/{id}/comments": typeComment, "/v1/boards/{id}/sections": typeSection,
	} {
		op := doc.Paths.Value(path).Post
		schema := op.RequestBody.Value.Content.Get("application/json").Schema.Value
		d, _ := model.TypeOf(typ)
		body := newCreateBody(d)
		var members []string
		for i := range body.typ.NumField() {
			name, _, _ := strings.Cut(body.typ.Field(i).Tag.Get("json"), ",")
			members = append(members, name)
		}
		if want := slices.Sorted(maps.Keys(schema.Properties)); !slices.Equal(slices.Sorted(slices.Values(members)), want) {
			t.Errorf("POST %s: the declaration makes a body of %v, the spec documents %v", path, members, want)
		}
		inPath := 0
		for _, g := range d.Given {
			if g.InPath {
				inPath++
			} else if required := slices.Contains(schema.Required, g.Name); required == g.Optional {
				t.Errorf("POST %s: %s is required by the spec %v, optional in the declaration %v", path, g.Name, required, g.Optional)
			}
		}
		if want := strings.Count(path, "{id}"); inPath != want {
			t.Errorf("POST %s: %d ids declared in the path, want %d", path, inPath, want)
		}
	}
}
