package pinstore

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strconv"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/pinstore/pinstore/idcodec"
)

// loadSpec loads and validates openapi.yaml as the server embeds it.
func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(OpenAPI)
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("openapi.yaml is invalid: %v", err)
	}
	return doc
}

// walkSchemas calls visit on ref and every schema reachable from it, once
// each, with a path for messages.
func walkSchemas(ref *openapi3.SchemaRef, path string, seen map[*openapi3.Schema]bool, visit func(path string, s *openapi3.Schema)) {
	if ref == nil || ref.Value == nil || seen[ref.Value] {
		return
	}
	if ref.Ref != "" {
		path = ref.Ref
	}
	s := ref.Value
	seen[s] = true
	visit(path, s)
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		walkSchemas(s.Properties[name], path+"."+name, seen, visit)
	}
	walkSchemas(s.Items, path+"[]", seen, visit)
	walkSchemas(s.AdditionalProperties.Schema, path+"{}", seen, visit)
	for _, group := range []openapi3.SchemaRefs{s.AllOf, s.OneOf, s.AnyOf} {
		for i, r := range group {
			walkSchemas(r, fmt.Sprintf("%s/%d", path, i), seen, visit)
		}
	}
	walkSchemas(s.Not, path+"/not", seen, visit)
}

// operations calls f on every operation of doc, in path order.
func operations(doc *openapi3.T, f func(what string, op *openapi3.Operation)) {
	for _, path := range doc.Paths.InMatchingOrder() {
		item := doc.Paths.Value(path)
		for method, op := range item.Operations() {
			f(method+" "+path, op)
		}
	}
}

// Responses are open for extension: a client generated today must accept
// a field added tomorrow, so no schema a response can reach forbids
// additional properties, and no enum in a response lists more than one
// value (a list that can grow is a string with x-extensible-enum).
func TestResponseSchemasAreOpen(t *testing.T) {
	doc := loadSpec(t)
	seen := map[*openapi3.Schema]bool{}
	visited := 0
	operations(doc, func(what string, op *openapi3.Operation) {
		for status, resp := range op.Responses.Map() {
			for mt, content := range resp.Value.Content {
				walkSchemas(content.Schema, fmt.Sprintf("%s %s %s", what, status, mt), seen, func(path string, s *openapi3.Schema) {
					visited++
					if has := s.AdditionalProperties.Has; has != nil && !*has {
						t.Errorf("%s: a response schema forbids additional properties", path)
					}
					if len(s.Enum) > 1 {
						t.Errorf("%s: a response enum lists %d values; use x-extensible-enum for a list that can grow", path, len(s.Enum))
					}
				})
			}
		}
	})
	if visited < 30 {
		t.Fatalf("visited only %d response schemas", visited)
	}
}

// Requests stay strict: every object a request body can hold says whether
// it takes other properties, and only the client's free-form data does.
func TestRequestSchemasAreStrict(t *testing.T) {
	doc := loadSpec(t)
	seen := map[*openapi3.Schema]bool{}
	objects := 0
	operations(doc, func(what string, op *openapi3.Operation) {
		if op.RequestBody == nil {
			return
		}
		for mt, content := range op.RequestBody.Value.Content {
			walkSchemas(content.Schema, what+" "+mt, seen, func(path string, s *openapi3.Schema) {
				if !s.Type.Is("object") {
					return
				}
				objects++
				switch has := s.AdditionalProperties.Has; {
				case has == nil && s.AdditionalProperties.Schema == nil:
					t.Errorf("%s: a request object does not say whether it takes other properties", path)
				case has != nil && *has && len(s.Properties) > 0:
					t.Errorf("%s: a request object with declared properties takes any other", path)
				}
			})
		}
	})
	if objects < 10 {
		t.Fatalf("visited only %d request objects", objects)
	}
}

// Position says "exactly one of before and after" with minProperties and
// maxProperties over closed properties, which generators turn into an
// object of two optional IDs, rather than a oneOf of bare required lists,
// which some turn into unusable types.
func TestPositionIsExactlyOneOf(t *testing.T) {
	pos := loadSpec(t).Components.Schemas["Position"].Value
	if len(pos.OneOf)+len(pos.AnyOf)+len(pos.AllOf) > 0 {
		t.Fatalf("Position composes schemas")
	}
	const id = "241294492511762325"
	for _, c := range []struct {
		body map[string]any
		ok   bool
	}{
		{map[string]any{"before": id}, true},
		{map[string]any{"after": id}, true},
		{map[string]any{}, false},
		{map[string]any{"before": id, "after": id}, false},
		{map[string]any{"above": id}, false},
		{map[string]any{"before": 1}, false},
	} {
		if err := pos.VisitJSON(c.body); (err == nil) != c.ok {
			t.Errorf("Position %v: error %v, want ok=%v", c.body, err, c.ok)
		}
	}
}

// The ID pattern accepts exactly the decimal strings that idcodec reads as
// an ID with its reserved bits clear, other than 0 (type 0 is no type):
// what the server refuses as malformed, the spec refuses too.
func TestIDPatternMatchesTheCodec(t *testing.T) {
	doc := loadSpec(t)
	pattern, err := regexp.Compile(doc.Components.Schemas["ID"].Value.Pattern)
	if err != nil {
		t.Fatal(err)
	}
	isID := func(s string) bool {
		id, _, err := idcodec.Parse(s)
		return err == nil && id != 0
	}
	cases := []string{
		"", "0", "00", "01", "1", "9", "10", "-1", "+1", " 1", "1 ", "1e3", "0x10", "１",
		"241294492511762325", "241294561224164665", "241294629943640797",
		"999999999999999999", "1000000000000000000",
		"4611686018427387903", "4611686018427387904", "4611686018427387905",
		"4611686018427387893", "4611686018427387913", "4611686018427387803", "4611686018427388903",
		"4599999999999999999", "4610000000000000000", "4612000000000000000", "4700000000000000000",
		"3999999999999999999", "5000000000000000000", "9999999999999999999",
		"18446744073709551615", "18446744073709551616", "99999999999999999999", "100000000000000000000",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		cases = append(cases, strconv.FormatUint(rng.Uint64(), 10), strconv.FormatUint(rng.Uint64()>>2, 10), strconv.FormatUint(rng.Uint64()>>uint(rng.IntN(64)), 10))
	}
	// Every prefix of 2^62 ± a little, digit by digit: the pattern is a
	// bound written out one digit at a time.
	for d := uint64(1); d < 1<<62; d *= 10 {
		for _, v := range []uint64{1<<62 - d, 1<<62 - d - 1, 1<<62 + d, 1<<62 + d - 1} {
			cases = append(cases, strconv.FormatUint(v, 10))
		}
	}
	bad := 0
	for _, s := range cases {
		if got, want := pattern.MatchString(s), isID(s); got != want {
			if bad++; bad <= 20 {
				t.Errorf("pattern matches %q: %v; idcodec reads an ID: %v", s, got, want)
			}
		}
	}
}
