package pinstore

import (
	"fmt"
	"sort"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
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
