package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// stored builds an object whose document is what the store writes: the
// json.Marshal of the typed document.
func stored(t testing.TB, typ idcodec.Type, doc model.Doc) model.Object {
	t.Helper()
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 21, 10, 4, 5, 123456000, time.UTC)
	return model.Object{
		ID:        idcodec.MustEncode(3429, typ, 7075733),
		Type:      typ,
		Version:   7,
		CreatedAt: at,
		UpdatedAt: at.Add(90 * time.Second),
		Doc:       raw,
	}
}

// slowWire is the reference: the wire form through referencePayload and
// encoding/json.
func slowWire(t testing.TB, o model.Object) any {
	t.Helper()
	p, err := referencePayload(o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// checkWire asserts that appendObject's output is valid JSON equal to the
// reference, and whether it took the fast path.
func checkWire(t testing.TB, o model.Object, wantFast bool) {
	t.Helper()
	out, err := appendObject(nil, o)
	if err != nil {
		t.Fatalf("appendObject(%s): %v", o.Doc, err)
	}
	var got any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("appendObject(%s) wrote invalid JSON %s: %v", o.Doc, out, err)
	}
	if want := slowWire(t, o); !reflect.DeepEqual(got, want) {
		t.Fatalf("doc %s\nfast %s\nwant %v", o.Doc, out, want)
	}
	if _, fast := spliceObject(nil, o); fast != wantFast {
		t.Fatalf("doc %s: fast path %v, want %v", o.Doc, fast, wantFast)
	}
}

func TestAppendObjectMatchesPayload(t *testing.T) {
	tricky := `quote " backslash \ brace } bracket ] comma , colon : <html> & é 😀 ` + "\u2028 tab\t nl\n"
	data := json.RawMessage(`{"a":[1,{"b":"}]\"x"}],"n":-1.5e3,"t":true,"f":false,"z":null,"s":"` + strings.Repeat("w", 300) + `"}`)
	user := model.ID(idcodec.MustEncode(65535, idcodec.TypeUser, 1<<36-1))
	board := model.ID(idcodec.MustEncode(0, idcodec.TypeBoard, 1))
	pin := model.ID(idcodec.MustEncode(3429, idcodec.TypePin, 7075733))
	section := model.ID(idcodec.MustEncode(0, idcodec.TypeSection, 9))
	cases := []struct {
		name string
		typ  idcodec.Type
		doc  model.Doc
	}{
		{"user minimal", idcodec.TypeUser, &model.UserDoc{Username: "alice", Active: true}},
		{"user full", idcodec.TypeUser, &model.UserDoc{Username: "alice", DisplayName: tricky, Data: data, Active: true}},
		{"user data null", idcodec.TypeUser, &model.UserDoc{Username: "alice", Data: json.RawMessage("null"), Active: true}},
		{"user data empty object", idcodec.TypeUser, &model.UserDoc{Username: "alice", Data: json.RawMessage("{}"), Active: true}},
		{"board minimal", idcodec.TypeBoard, &model.BoardDoc{OwnerID: user, Name: "b", Active: true}},
		{"board full", idcodec.TypeBoard, &model.BoardDoc{OwnerID: user, Name: tricky, Description: tricky, Data: data}},
		{"pin minimal", idcodec.TypePin, &model.PinDoc{BoardID: board, OwnerID: user, Active: true}},
		{"pin full", idcodec.TypePin, &model.PinDoc{BoardID: board, OwnerID: user, Link: "https://example.com/?a=1&b=<2>", Description: tricky, ImageURL: "https://i.example.com/x.jpg", Data: data, Active: true}},
		{"pin deleted", idcodec.TypePin, &model.PinDoc{BoardID: board, OwnerID: user, Description: "x"}},
		{"comment", idcodec.TypeComment, &model.CommentDoc{PinID: pin, AuthorID: user, Text: tricky, Active: true}},
		{"comment empty text", idcodec.TypeComment, &model.CommentDoc{PinID: pin, AuthorID: user, Active: true}},
		{"pin in a section", idcodec.TypePin, &model.PinDoc{BoardID: board, OwnerID: user, SectionID: section, Secret: true, Active: true}},
		{"section minimal", idcodec.TypeSection, &model.SectionDoc{BoardID: board, OwnerID: user, Name: "s", Active: true}},
		{"section full", idcodec.TypeSection, &model.SectionDoc{BoardID: board, OwnerID: user, Name: tricky, Data: data, Secret: true, Active: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkWire(t, stored(t, c.typ, c.doc), true) })
	}
}

// Documents not in json.Marshal's form take the slow path and still come
// out right.
func TestAppendObjectFallsBack(t *testing.T) {
	for _, doc := range []string{
		`{ "board_id":"281612415664130","owner_id":"281681135140865","active":true}`,                 // whitespace
		`{"board_id":"281612415664130","owner_id":"281681135140865","data":{ "a":1 },"active":true}`, // whitespace inside data
		`{"board_id":"281612415664130","owner_id":"281681135140865","color":"red","active":true}`,    // unknown member
		`{"owner_id":"281681135140865","active":true}`,                                               // missing board_id
		`{"board_id":"281612415664130","owner_id":"281681135140865","link":"a","link":"b"}`,          // repeated member
		`{"board_id":"281612415664130","owner_id":"281681135140865","desc\u0072iption":"x"}`,         // escaped name
		`{"board_id":"281612415664130","owner_id":"281681135140865","data":{"a":[1,2}}`,              // not JSON: the slow path reports it
	} {
		o := stored(t, idcodec.TypePin, &model.PinDoc{})
		o.Doc = []byte(doc)
		if _, fast := spliceObject(nil, o); fast {
			t.Errorf("doc %s took the fast path", doc)
			continue
		}
		if json.Valid(o.Doc) {
			checkWire(t, o, false)
		} else if _, err := appendObject(nil, o); !model.IsCode(err, model.EInternal) {
			t.Errorf("doc %s: err %v, want internal", doc, err)
		}
	}
}

func TestAppendListShape(t *testing.T) {
	objs := []model.Object{
		stored(t, idcodec.TypePin, &model.PinDoc{BoardID: 281612415664130, OwnerID: 281681135140865, Description: "a", Active: true}),
		stored(t, idcodec.TypePin, &model.PinDoc{BoardID: 281612415664130, OwnerID: 281681135140865, Description: "b", Active: true}),
	}
	n := int64(42)
	for _, tt := range []struct {
		next  string
		count *int64
		keys  []string
	}{
		{"", nil, []string{"items"}},
		{"AQID", &n, []string{"count", "items", "next_cursor"}},
	} {
		out, err := appendList(nil, objs, tt.next, tt.count)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]json.RawMessage
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		var keys []string
		for k := range v {
			keys = append(keys, k)
		}
		if !sameSet(keys, tt.keys) {
			t.Fatalf("keys %v, want %v", keys, tt.keys)
		}
		var items []any
		if err := json.Unmarshal(v["items"], &items); err != nil || len(items) != 2 {
			t.Fatalf("items %s: %v", v["items"], err)
		}
	}
	if out, _ := appendList(nil, nil, "", nil); string(out) != "{\"items\":[]}\n" {
		t.Fatalf("empty page %q", out)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, x := range a {
		seen[x]++
	}
	for _, x := range b {
		seen[x]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}

func page50(t testing.TB) []model.Object {
	objs := make([]model.Object, 50)
	for i := range objs {
		objs[i] = stored(t, idcodec.TypePin, &model.PinDoc{
			BoardID: 281612415664130, OwnerID: 281681135140865,
			Link: "https://example.com/p", Description: strings.Repeat("d", 80),
			ImageURL: "https://i.example.com/p.jpg", Data: json.RawMessage(`{"w":640,"h":480}`), Active: true,
		})
		objs[i].ID += uint64(i)
	}
	return objs
}

// Encoding a 50-item page allocates nothing once the buffer has grown:
// no allocation per object or per id.
func TestAppendListAllocatesNothing(t *testing.T) {
	objs := page50(t)
	buf := make([]byte, 0, 64<<10)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if buf, err = appendList(buf[:0], objs, "AQIDBA", new(int64)); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("appendList of 50 pins: %v allocations, want 0", allocs)
	}
}

// BenchmarkPage50 compares the splice path with decoding each document
// and encoding the page with encoding/json (what the API did before).
func BenchmarkPage50(b *testing.B) {
	objs := page50(b)
	b.Run("splice", func(b *testing.B) {
		buf := make([]byte, 0, 64<<10)
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = appendList(buf[:0], objs, "AQIDBA", new(int64))
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		var n int
		for b.Loop() {
			items := make([]any, len(objs))
			for i, o := range objs {
				items[i], _ = referencePayload(o)
			}
			out, _ := json.Marshal(struct {
				Items []any `json:"items"`
			}{items})
			n = len(out)
		}
		b.SetBytes(int64(n))
	})
}

// FuzzAppendObject checks the fast path against referencePayload for documents
// built from arbitrary field values, as the store would write them.
func FuzzAppendObject(f *testing.F) {
	f.Add(uint8(1), "alice", "Alice A.", `{"k":"v"}`, uint64(9), uint64(10))
	f.Add(uint8(2), "", "\"}\\", `null`, uint64(0), uint64(1<<62))
	f.Add(uint8(3), "<&>", "\u2028", `[1,{"a":"]"}]`, uint64(1), uint64(2))
	f.Add(uint8(4), "x", "", ``, uint64(5), uint64(6))
	f.Fuzz(func(t *testing.T, typ uint8, s1, s2, data string, id1, id2 uint64) {
		var d json.RawMessage
		if data != "" {
			if !json.Valid([]byte(data)) {
				return
			}
			d = json.RawMessage(data)
		}
		// Stored ids are always valid: build them from the fuzzed numbers.
		ref := func(n uint64, t idcodec.Type) model.ID {
			return model.ID(idcodec.MustEncode(uint32(n%65536), t, (n>>16)%(1<<36)))
		}
		var doc model.Doc
		var ty idcodec.Type
		switch typ % 4 {
		case 0:
			ty, doc = idcodec.TypeUser, &model.UserDoc{Username: s1, DisplayName: s2, Data: d, Active: true}
		case 1:
			ty, doc = idcodec.TypeBoard, &model.BoardDoc{OwnerID: ref(id1, idcodec.TypeUser), Name: s1, Description: s2, Data: d, Active: true}
		case 2:
			ty, doc = idcodec.TypePin, &model.PinDoc{BoardID: ref(id1, idcodec.TypeBoard), OwnerID: ref(id2, idcodec.TypeUser), Link: s1, Description: s2, ImageURL: s1, Data: d}
		default:
			ty, doc = idcodec.TypeComment, &model.CommentDoc{PinID: ref(id1, idcodec.TypePin), AuthorID: ref(id2, idcodec.TypeUser), Text: s1, Data: d, Active: true}
		}
		checkWire(t, stored(t, ty, doc), true)
	})
}

// TestEveryTypeIsWrittenFromItsDeclaration: for every declared type, the
// document the store writes takes the splice path (its wire fields fit),
// and an object in any other form, once made canonical, comes out as the
// typed reference and as Payload says.
func TestEveryTypeIsWrittenFromItsDeclaration(t *testing.T) {
	for _, typ := range model.ObjectTypes() {
		decl, _ := model.TypeOf(typ)
		if len(decl.Wire) > stackWireFields {
			t.Fatalf("%s has %d wire fields, more than the splice path keeps without allocating, %d", typ, len(decl.Wire), stackWireFields)
		}
		d := decl.New()
		d.SetActive(true)
		o := stored(t, typ, d)
		checkWire(t, o, true)
		o.Doc = append([]byte("{ "), o.Doc[1:]...) // not compact: canonical first
		checkWire(t, o, false)
		p, err := Payload(o)
		if err != nil {
			t.Fatal(err)
		}
		if out, _ := appendObject(nil, o); string(p) != string(out) {
			t.Fatalf("%s: Payload %s, appendObject %s", typ, p, out)
		}
	}
}

// TestScanDocHasNoFieldLimit: a document with more wire fields than the
// splice path keeps on the stack is scanned all the same.
func TestScanDocHasNoFieldLimit(t *testing.T) {
	n := stackWireFields + 4
	fields := make([]wireField, n)
	doc := []byte{'{'}
	for i := range fields {
		fields[i] = wireField{Name: fmt.Sprintf("f%d", i)}
		if i > 0 {
			doc = append(doc, ',')
		}
		doc = fmt.Appendf(doc, `"f%d":%d`, i, i)
	}
	doc = append(doc, '}')
	spans := make([][2]int, n)
	if !scanDoc(doc, fields, spans) {
		t.Fatalf("scanDoc refused %s", doc)
	}
	for i, sp := range spans {
		if got := string(doc[sp[0]:sp[1]]); got != fmt.Sprint(i) {
			t.Fatalf("field %d: %q", i, got)
		}
	}
}
