package model

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
)

// TestObjectTypesAgreeWithTheirDocuments checks each declaration against
// the rest of what a type is: its idcodec name, its document's JSON
// members, and the lists it names.
func TestObjectTypesAgreeWithTheirDocuments(t *testing.T) {
	types := ObjectTypes()
	if len(types) != 5 {
		t.Fatalf("declared types %v, want user, board, pin, comment, section", types)
	}
	tables := map[string]bool{}
	for _, typ := range types {
		d, _ := TypeOf(typ)
		if !typ.Known() {
			t.Errorf("type %d is declared but idcodec does not know it", typ)
		}
		if d.Table == "" || tables[d.Table] {
			t.Errorf("%s: table %q empty or shared", typ, d.Table)
		}
		tables[d.Table] = true
		// The wire fields are exactly the document's members but active.
		var members []string
		rt := reflect.TypeOf(d.New()).Elem()
		for i := range rt.NumField() {
			name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
			if name != "active" {
				members = append(members, name)
			}
		}
		var wire []string
		for _, f := range d.Wire {
			wire = append(wire, f.Name)
		}
		if !slices.Equal(slices.Sorted(slices.Values(members)), slices.Sorted(slices.Values(wire))) {
			t.Errorf("%s: wire fields %v, document members %v", typ, wire, members)
		}
		for _, f := range d.Editable {
			if !slices.Contains(wire, f) {
				t.Errorf("%s: editable %q is not a member", typ, f)
			}
		}
		for _, m := range d.Counted {
			if m.From() != typ {
				t.Errorf("%s counts %s, a list of %s", typ, m, m.From())
			}
		}
		for _, m := range d.SecretCounted {
			if !slices.Contains(d.Counted, m) {
				t.Errorf("%s counts the secret entries of %s but not the list", typ, m)
			}
		}
		if d.SecretFrom != 0 && (d.SecretFrom.From() != idcodec.TypeBoard || d.SecretFrom.To() != typ || d.Owner < 0) {
			t.Errorf("%s inherits secrecy through %s, not a board's list of it with an owner", typ, d.SecretFrom)
		}
	}
	if _, ok := TypeOf(idcodec.Type(900)); ok || Table(idcodec.Type(900)) != "" || NewDoc(idcodec.Type(900)) != nil {
		t.Error("an undeclared type has a declaration")
	}
	if got := SecretCopies(); !slices.Equal(got, []Mapping{BoardPins, BoardSections}) {
		t.Errorf("SecretCopies() = %v, want board_pins, board_sections", got)
	}
}

// TestViewerEdges checks the lists declared as a viewer's state: a pin's
// is the user's likes, a user's the user's follows, and nothing else has
// one.
func TestViewerEdges(t *testing.T) {
	want := map[idcodec.Type]Mapping{idcodec.TypePin: UserLikes, idcodec.TypeUser: UserFollowing}
	for _, typ := range ObjectTypes() {
		m, ok := ViewerEdgeOf(typ)
		if w, has := want[typ]; ok != has || m != w {
			t.Errorf("ViewerEdgeOf(%s) = %s, %v; want %s, %v", typ, m, ok, w, has)
		}
	}
	if UserLikes.ViewerEdge() != "liked" || UserFollowing.Verb() != "follow" || BoardPins.ViewerEdge() != "" {
		t.Error("viewer edge names differ from the wire's")
	}
}
