package model

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
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

// TestDeleteDeclarations checks what the declarations say a delete
// removes: every list without an inverse is left by its objects' delete
// (a Member of the type it lists, on that object's shard), a cascade lists
// objects that leave it, and every list with an inverse is drained by its
// owner's delete, but a save's link to its source, which the saves rule
// settles.
func TestDeleteDeclarations(t *testing.T) {
	member := map[Mapping]idcodec.Type{}
	for _, typ := range ObjectTypes() {
		d, _ := TypeOf(typ)
		for _, mb := range d.Members {
			if mb.List.To() != typ || !mb.List.Colocated() || mb.Of == nil {
				t.Errorf("%s is a member of %s, which does not list it on its shard", typ, mb.List)
			}
			if _, dup := member[mb.List]; dup {
				t.Errorf("%s: %s declared twice", typ, mb.List)
			}
			member[mb.List] = typ
		}
		for _, m := range d.Cascades {
			if m.From() != typ || !m.Colocated() {
				t.Errorf("%s cascades to %s, not a list of its own on its shard", typ, m)
			}
		}
		for _, m := range d.Drains {
			if m.From() != typ || slices.Contains(d.Cascades, m) {
				t.Errorf("%s drains %s, not a list of its own or already a cascade", typ, m)
			}
		}
	}
	drained := map[Mapping]bool{}
	for _, typ := range ObjectTypes() {
		d, _ := TypeOf(typ)
		for _, m := range d.Drains {
			drained[m] = true
		}
	}
	for _, m := range Mappings() {
		if _, paired := m.Inverse(); !paired {
			if member[m] != m.To() {
				t.Errorf("%s: no delete of a %s takes it off the list", m, m.To())
			}
		} else if !drained[m] && m != PinSavedFrom {
			t.Errorf("%s has an inverse but no delete drains it", m)
		}
	}
	// The pin's declaration, as the delete reads it.
	pin, _ := TypeOf(idcodec.TypePin)
	doc := &PinDoc{BoardID: 11, OwnerID: 12, SectionID: 13}
	var got []ID
	for _, mb := range pin.Members {
		got = append(got, mb.Of(doc))
	}
	if !slices.Equal(got, []ID{11, 12, 13}) || !slices.Equal(pin.Drains, []Mapping{PinLikers, PinSaves}) {
		t.Errorf("a pin's delete leaves lists of %v and drains %v; want its board, owner and section, and its likers and saves", got, pin.Drains)
	}
	if board, _ := TypeOf(idcodec.TypeBoard); !slices.Equal(board.Cascades, []Mapping{BoardPins, BoardSections}) {
		t.Errorf("a board's delete cascades to %v, want its pins then its sections", board.Cascades)
	}
}

// TestEveryTypeDeclaresItsPathsAndEditor: every declared type names its
// URL path segment, one no other type has, and who may change its
// objects: a user ref of its document (never the parent it is listed
// under, as a pin's board or a comment's pin), the owner for a type that
// can be secret, or the object itself for users.
func TestEveryTypeDeclaresItsPathsAndEditor(t *testing.T) {
	collections := map[string]bool{}
	for _, typ := range ObjectTypes() {
		d, _ := TypeOf(typ)
		if d.Collection == "" || collections[d.Collection] || strings.Trim(d.Collection, "abcdefghijklmnopqrstuvwxyz_") != "" {
			t.Errorf("%s: collection %q empty, shared, or not a lower-case path segment", typ, d.Collection)
		}
		collections[d.Collection] = true
		if d.Editor < 0 {
			if d.Editor != -1 || typ != idcodec.TypeUser {
				t.Errorf("%s: editor %d; only a user (-1) is its own editor", typ, d.Editor)
			}
			continue
		}
		if d.Editor >= d.New().NumRefs() || (d.Owner >= 0 && d.Editor != d.Owner) {
			t.Errorf("%s: editor ref %d out of range or not its owner ref %d", typ, d.Editor, d.Owner)
			continue
		}
		// A document whose every id member is distinct: the editor's ref
		// is one of them, and no list of a parent other than a user's
		// lists the object under it.
		doc := decodeDistinctRefs(t, typ, d)
		editor := doc.Ref(d.Editor)
		if editor == 0 {
			t.Errorf("%s: editor ref %d names no member of the document", typ, d.Editor)
		}
		for _, mb := range d.Members {
			if mb.List.From() != idcodec.TypeUser && mb.Of(doc) == editor {
				t.Errorf("%s: editor ref %d is its parent on %s, a %s", typ, d.Editor, mb.List, mb.List.From())
			}
		}
	}
}

// decodeDistinctRefs decodes a document of typ whose members ending in
// _id hold distinct ids, each of the type its name says (board_id a
// board's; owner_id, author_id or another a user's), and whose other
// members hold their defaults (or "x" where required; none where the
// default is null, but for ids): a valid document.
func decodeDistinctRefs(t *testing.T, typ idcodec.Type, d *ObjectType) Doc {
	t.Helper()
	var members []string
	for i, f := range d.Wire {
		v := f.Default
		switch {
		case strings.HasSuffix(f.Name, "_id"):
			of, ok := idcodec.ParseType(strings.TrimSuffix(f.Name, "_id"))
			if !ok {
				of = idcodec.TypeUser
			}
			v = `"` + strconv.FormatUint(idcodec.MustEncode(1, of, uint64(i+1)), 10) + `"`
		case v == "null":
			continue // an id member a stored document omits
		case v == "":
			v = `"x"`
		}
		members = append(members, `"`+f.Name+`":`+v)
	}
	doc, err := DecodeDoc(typ, []byte("{"+strings.Join(members, ",")+"}"))
	if err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
	return doc
}

// TestCreateDeclarations checks what a create reads of its type: every
// type but users is created under a parent, through one of the lists it
// is declared on, and what each adopts from its parent and whom it
// refuses.
func TestCreateDeclarations(t *testing.T) {
	parents := map[idcodec.Type]Mapping{}
	for _, typ := range ObjectTypes() {
		d, _ := TypeOf(typ)
		if d.Parent == 0 {
			if d.Adopt != nil || d.ByHand || len(d.Live) > 0 {
				t.Errorf("%s is created under no parent, yet declares what it takes from one", typ)
			}
			continue
		}
		parents[typ] = d.Parent
		if d.Parent.To() != typ || !slices.ContainsFunc(d.Members, func(m Member) bool { return m.List == d.Parent }) {
			t.Errorf("%s: parent list %s is not one of its memberships", typ, d.Parent)
		}
		for _, g := range d.Given {
			if !slices.ContainsFunc(d.Wire, func(f WireField) bool { return f.Name == g.Name }) || !g.Type.Known() {
				t.Errorf("%s: given %q is not a member holding a known type's id", typ, g.Name)
			}
		}
		for _, i := range d.Live {
			if i < 0 || i >= d.New().NumRefs() {
				t.Errorf("%s: live ref %d out of range", typ, i)
			}
		}
	}
	want := map[idcodec.Type]Mapping{idcodec.TypeBoard: UserBoards, idcodec.TypePin: BoardPins, idcodec.TypeComment: PinComments, idcodec.TypeSection: BoardSections}
	if !reflect.DeepEqual(parents, want) {
		t.Errorf("parents %v, want %v", parents, want)
	}

	const ann, bob = ID(11), ID(12)
	for _, secret := range []bool{false, true} {
		board := &BoardDoc{OwnerID: ann, Secret: secret}
		for _, typ := range []idcodec.Type{idcodec.TypePin, idcodec.TypeSection} {
			d, _ := TypeOf(typ)
			doc := d.New()
			if err := d.Adopt(board, doc, 0); err != nil {
				t.Fatalf("%s under a board, by a service: %v", typ, err)
			}
			if r := RefsOf(doc); r[1] != ann || FlagsOf(doc).Secret() != secret {
				t.Errorf("%s took owner %d, flags %b from a board of %d, secret %v", typ, r[1], FlagsOf(doc), ann, secret)
			}
			if err := d.Adopt(board, d.New(), ann); err != nil {
				t.Errorf("%s under ann's board, by ann: %v", typ, err)
			}
			code := EForbidden
			if secret {
				code = ENotFound // another user's secret board: as if missing
			}
			if err := d.Adopt(board, d.New(), bob); !IsCode(err, code) {
				t.Errorf("%s under ann's board (secret %v), by bob: %v, want %s", typ, secret, err, code)
			}
		}
	}
	c, _ := TypeOf(idcodec.TypeComment)
	for _, tc := range []struct {
		secret bool
		author ID
		ok     bool
	}{{false, bob, true}, {true, ann, true}, {true, bob, false}} {
		err := c.Adopt(&PinDoc{OwnerID: ann, Secret: tc.secret}, &CommentDoc{AuthorID: tc.author}, tc.author)
		if (err == nil) != tc.ok || (err != nil && !IsCode(err, ENotFound)) {
			t.Errorf("comment by %d on ann's pin (secret %v): %v, want ok %v", tc.author, tc.secret, err, tc.ok)
		}
	}
}

// TestWireKinds: each wire field's declared kind is what its document's
// member holds, and a string kind's bound is the one Validate keeps: a
// value of MaxLen bytes passes, one byte more is refused naming the field.
func TestWireKinds(t *testing.T) {
	goType := map[Kind]reflect.Type{
		KindID: reflect.TypeFor[ID](), KindUsername: reflect.TypeFor[string](), KindName: reflect.TypeFor[string](),
		KindText: reflect.TypeFor[string](), KindURL: reflect.TypeFor[string](), KindData: reflect.TypeFor[json.RawMessage](),
		KindFlag: reflect.TypeFor[bool](),
	}
	for _, typ := range ObjectTypes() {
		d, _ := TypeOf(typ)
		rt := reflect.TypeOf(d.New()).Elem()
		for _, f := range d.Wire {
			i := slices.IndexFunc(reflect.VisibleFields(rt), func(sf reflect.StructField) bool {
				name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
				return name == f.Name
			})
			if i < 0 || goType[f.Kind] != rt.Field(i).Type {
				t.Errorf("%s.%s: kind %d, member of Go type %v", typ, f.Name, f.Kind, rt.Field(i).Type)
				continue
			}
			max := f.Kind.MaxLen()
			if max == 0 {
				continue
			}
			if err := decodeDistinctRefs(t, typ, d).Validate(Limits{}); err != nil {
				t.Fatalf("%s: the document to change is invalid: %v", typ, err)
			}
			for _, n := range []int{max, max + 1} {
				doc := decodeDistinctRefs(t, typ, d)
				reflect.ValueOf(doc).Elem().Field(i).SetString(strings.Repeat("a", n))
				err := doc.Validate(Limits{})
				if ok := n == max; (err == nil) != ok || (err != nil && !strings.Contains(ErrorMessage(err), f.Name)) {
					t.Errorf("%s.%s of %d bytes (kind's bound %d): %v", typ, f.Name, n, max, err)
				}
			}
		}
	}
}
