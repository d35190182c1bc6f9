package model

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
)

// jsonEqual compares two JSON texts as values.
func jsonEqual(t *testing.T, got, want string) bool {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("got %q: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %q: %v", want, err)
	}
	return reflect.DeepEqual(g, w)
}

// TestMergePatchRFC7396 runs the examples of RFC 7396, appendix A.
func TestMergePatchRFC7396(t *testing.T) {
	cases := []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"e":null,"a":1}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
	}
	for _, c := range cases {
		got, err := MergePatch([]byte(c.target), []byte(c.patch))
		if err != nil {
			t.Errorf("MergePatch(%s, %s): %v", c.target, c.patch, err)
			continue
		}
		if !jsonEqual(t, string(got), c.want) {
			t.Errorf("MergePatch(%s, %s) = %s, want %s", c.target, c.patch, got, c.want)
		}
	}
}

func TestMergePatchKeepsBigNumbers(t *testing.T) {
	got, err := MergePatch([]byte(`{"n":241294492511762325}`), []byte(`{"m":18446744073709551615}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"241294492511762325", "18446744073709551615"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("%s lost %s", got, want)
		}
	}
}

func TestMergePatchInvalid(t *testing.T) {
	for _, patch := range []string{``, `{`, `{"a":1} {}`, `nul`} {
		if _, err := MergePatch([]byte(`{}`), []byte(patch)); ErrorCode(err) != EInvalid {
			t.Errorf("MergePatch(%q): %v, want invalid_argument", patch, err)
		}
	}
}

func TestCheckPatch(t *testing.T) {
	cases := []struct {
		name  string
		typ   idcodec.Type
		patch string
		want  string // "" for ok, else a substring of the message
	}{
		{"user fields", idcodec.TypeUser, `{"username":"a","display_name":null,"data":{}}`, ""},
		{"empty", idcodec.TypePin, `{}`, ""},
		{"pin fields", idcodec.TypePin, `{"link":"x","description":"y","image_url":"z","data":null}`, ""},
		{"board fields", idcodec.TypeBoard, `{"name":"a","description":"b"}`, ""},
		{"comment fields", idcodec.TypeComment, `{"text":"a"}`, ""},
		{"owner_id", idcodec.TypePin, `{"owner_id":"1"}`, "owner_id is read-only"},
		{"board_id", idcodec.TypePin, `{"board_id":"1"}`, "board_id is read-only"},
		{"pin_id", idcodec.TypeComment, `{"pin_id":"1"}`, "pin_id is read-only"},
		{"author_id", idcodec.TypeComment, `{"author_id":"1"}`, "author_id is read-only"},
		{"id", idcodec.TypeUser, `{"id":"1"}`, "id is read-only"},
		{"type", idcodec.TypeUser, `{"type":"user"}`, "type is read-only"},
		{"version", idcodec.TypeBoard, `{"version":2}`, "version is read-only"},
		{"created_at", idcodec.TypeBoard, `{"created_at":"x"}`, "created_at is read-only"},
		{"updated_at", idcodec.TypeBoard, `{"updated_at":"x"}`, "updated_at is read-only"},
		{"counts", idcodec.TypeBoard, `{"counts":{}}`, "counts is read-only"},
		{"saved_from", idcodec.TypePin, `{"saved_from":"1"}`, "saved_from is read-only"},
		{"secret", idcodec.TypePin, `{"secret":true}`, "secret is read-only"},
		{"owner_id of a user", idcodec.TypeUser, `{"owner_id":"1"}`, `unknown field "owner_id"`},
		{"active", idcodec.TypeUser, `{"active":false}`, `unknown field "active"`},
		{"another type's field", idcodec.TypeUser, `{"name":"x"}`, `unknown field "name"`},
		{"not an object", idcodec.TypeUser, `["a"]`, "JSON object"},
		{"null", idcodec.TypeUser, `null`, "JSON object"},
		{"trailing", idcodec.TypeUser, `{} {}`, "single JSON object"},
		{"unknown type", idcodec.Type(9), `{}`, "cannot be patched"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckPatch(c.typ, []byte(c.patch))
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case c.want != "" && (ErrorCode(err) != EInvalid || !strings.Contains(ErrorMessage(err), c.want)):
				t.Fatalf("error %v, want invalid_argument with %q", err, c.want)
			}
		})
	}
}

func TestPatchDoc(t *testing.T) {
	pin := `{"board_id":"137438953473","owner_id":"206158430209","link":"https://x","data":{"a":{"b":1}},"active":true}`
	cases := []struct {
		name   string
		typ    idcodec.Type
		doc    string
		patch  string
		want   string // the resulting document, or "" when an error is expected
		code   string
		substr string
	}{
		{"merge data and drop link", idcodec.TypePin, pin, `{"link":null,"description":"d","data":{"a":{"c":2}}}`,
			`{"board_id":"137438953473","owner_id":"206158430209","description":"d","data":{"a":{"b":1,"c":2}},"active":true}`, "", ""},
		{"drop data", idcodec.TypePin, pin, `{"data":null}`,
			`{"board_id":"137438953473","owner_id":"206158430209","link":"https://x","active":true}`, "", ""},
		{"rename user", idcodec.TypeUser, `{"username":"a","active":true}`, `{"username":"b"}`, `{"username":"b","active":true}`, "", ""},
		{"required field removed", idcodec.TypeUser, `{"username":"a","active":true}`, `{"username":null}`, "", EInvalid, "username is required"},
		{"invalid username", idcodec.TypeUser, `{"username":"a","active":true}`, `{"username":"a b"}`, "", EInvalid, "username"},
		{"wrong JSON type", idcodec.TypeBoard, `{"owner_id":"206158430209","name":"n","active":true}`, `{"name":5}`, "", EInvalid, "name"},
		{"data not an object", idcodec.TypePin, pin, `{"data":[1]}`, "", EInvalid, "data"},
		{"data too large", idcodec.TypePin, pin, `{"data":{"x":"` + strings.Repeat("y", DefaultMaxData) + `"}}`, "", ETooLarge, "data"},
		{"read-only field", idcodec.TypePin, pin, `{"owner_id":"206158430210"}`, "", EInvalid, "read-only"},
		{"deleted document", idcodec.TypeUser, `{"username":"a","active":false}`, `{"display_name":"x"}`, "", ENotFound, ""},
		{"stored document with an unknown field", idcodec.TypeUser, `{"username":"a","active":true,"x":1}`, `{}`, "", EInvalid, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := PatchDoc(c.typ, []byte(c.doc), []byte(c.patch), Limits{})
			if c.want != "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				if !jsonEqual(t, string(got), c.want) {
					t.Fatalf("got %s\nwant %s", got, c.want)
				}
				return
			}
			if ErrorCode(err) != c.code || !strings.Contains(ErrorMessage(err), c.substr) {
				t.Fatalf("error %v, want %s with %q", err, c.code, c.substr)
			}
		})
	}
}

// TestReadOnlyFollowsTheDeclaration: a member a type's declaration puts
// on its wire form but not among its editable ones is read-only, with no
// list to update: here a field added to the pin's declaration.
func TestReadOnlyFollowsTheDeclaration(t *testing.T) {
	d := &objectTypes[idcodec.TypePin]
	saved := d.Wire
	d.Wire = append(slices.Clone(saved), WireField{"creator_id", "", KindID})
	defer func() { d.Wire = saved }()
	if err := CheckPatch(idcodec.TypePin, []byte(`{"creator_id":"1"}`)); ErrorCode(err) != EInvalid || ErrorMessage(err) != "creator_id is read-only" {
		t.Errorf("PATCH with a declared, not editable member: %v; want creator_id is read-only", err)
	}
	if !slices.Contains(ReadOnlyFields(idcodec.TypePin), "creator_id") {
		t.Errorf("ReadOnlyFields(pin) = %v, want creator_id among them", ReadOnlyFields(idcodec.TypePin))
	}
	if got := ReadOnlyFields(idcodec.TypeComment); slices.Contains(got, "text") || !slices.Contains(got, "author_id") {
		t.Errorf("ReadOnlyFields(comment) = %v", got)
	}
}
