package specgen

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/pinstore/pinstore/api"
	"github.com/pinstore/pinstore/model"
)

func overlay(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("../../openapi-overlay.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parse(t *testing.T, b []byte) *yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		t.Fatal(err)
	}
	return n.Content[0]
}

func encode(t *testing.T, n *yaml.Node) string {
	t.Helper()
	b, err := yaml.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMerge: the overlay's mappings merge member by member, its other
// values replace, null deletes, and what it adds goes where it belongs.
func TestMerge(t *testing.T) {
	for _, c := range []struct{ name, gen, ov, want string }{
		{"scalar replaces", "a: 1\nb: 2\n", "b: 3\n", "a: 1\nb: 3\n"},
		{"mappings merge", "a: {x: 1, y: 2}\n", "a: {y: 3, z: 4}\n", "a: {x: 1, y: 3, z: 4}\n"},
		{"a list replaces", "a: [1, 2]\n", "a: [3]\n", "a: [3]\n"},
		{"null deletes", "a: 1\nb: 2\n", "a: null\n", "b: 2\n"},
		{"an object's member goes by rank", "operationId: x\nparameters: []\nresponses: {}\n", "description: d\n",
			"operationId: x\ndescription: d\nparameters: []\nresponses: {}\n"},
		{"a property goes last", "properties: {b: 1, c: 2}\n", "properties: {a: 0}\n", "properties: {b: 1, c: 2, a: 0}\n"},
		{"a response in status order", "paths: {/x: {get: {responses: {'200': 1, '500': 2}}}}\n",
			"paths: {/x: {get: {responses: {'409': 3}}}}\n", "paths: {/x: {get: {responses: {'200': 1, '409': 3, '500': 2}}}}\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := merge(parse(t, []byte(c.gen)), parse(t, []byte(c.ov)), nil)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := encode(t, got), encode(t, parse(t, []byte(c.want))); g != w {
				t.Errorf("merge:\n%s\nwant:\n%s", g, w)
			}
		})
	}
}

// TestEveryRouteIsDescribed: a route the generator cannot make and the
// overlay does not describe is an error, and so is an operation of the
// overlay that nothing routes.
func TestEveryRouteIsDescribed(t *testing.T) {
	ov := overlay(t)
	routes := api.RouteDocs()
	if _, err := generate(append(routes, api.RouteDoc{Method: "GET", Pattern: "/v1/users/{id}/nothing"}), ov); err == nil ||
		!strings.Contains(err.Error(), "GET /v1/users/{id}/nothing is routed but has no operation") {
		t.Errorf("an undescribed route: %v", err)
	}
	var rest []api.RouteDoc
	for _, r := range routes {
		if r.Pattern != "/healthz" {
			rest = append(rest, r)
		}
	}
	if _, err := generate(rest, ov); err == nil || !strings.Contains(err.Error(), "describes GET /healthz, which the route table does not serve") {
		t.Errorf("an unrouted operation: %v", err)
	}
	if _, err := generate(routes, []byte("openapi: 3.0.3\n")); err == nil || !strings.Contains(err.Error(), "ID.pattern") {
		t.Errorf("an overlay without the ID schema: %v", err)
	}
}

// TestGenerateIsDeterministic: the same inputs write the same bytes.
func TestGenerateIsDeterministic(t *testing.T) {
	a, err := Generate(overlay(t))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		b, err := Generate(overlay(t))
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("a second run differs (%v)", err)
		}
	}
}

// TestRoutesFollowTheDeclarations: which routes the generator makes is a
// matter of the declarations: each type's own, and each list's with a
// segment, at its from type's path; the others are the overlay's.
func TestRoutesFollowTheDeclarations(t *testing.T) {
	made := map[string]string{}
	for _, r := range api.RouteDocs() {
		o := classify(r)
		if o.kind == opNone {
			continue
		}
		what := []string{"", "create", "many", "get", "patch", "delete", "list"}[o.kind] + " " + o.typ.String()
		if o.list != 0 {
			what += " " + o.list.String()
		}
		made[r.Method+" "+r.Pattern] = what
	}
	want := map[string]string{
		"POST /v1/users": "create user", "GET /v1/users": "many user", "GET /v1/users/{id}": "get user",
		"PATCH /v1/boards/{id}": "patch board", "DELETE /v1/comments/{id}": "delete comment",
		"POST /v1/boards/{id}/sections": "create section board_sections",
		"GET /v1/boards/{id}/sections":  "list section board_sections",
		"POST /v1/pins/{id}/comments":   "create comment pin_comments",
		"GET /v1/pins/{id}/likers":      "list user pin_likers",
		"GET /v1/users/{id}/following":  "list user user_following",
	}
	for route, what := range want {
		if made[route] != what {
			t.Errorf("%s: made as %q, want %q", route, made[route], what)
		}
	}
	for _, route := range []string{"POST /v1/pins/{id}/saves", "GET /v1/users/{id}/feed", "GET /v1/users/{id}/likes/{pin_id}", "GET /v1/admin/fleet", "GET /healthz"} {
		if what, ok := made[route]; ok {
			t.Errorf("%s is the overlay's, but was made as %q", route, what)
		}
	}
	for _, m := range model.Mappings() {
		if m.Segment() == "" {
			continue
		}
		route := "GET /v1/" + collectionOf(m.From()) + "/{id}/" + m.Segment()
		if made[route] != "list "+m.To().String()+" "+m.String() {
			t.Errorf("%s has a segment, but %s is %q", m, route, made[route])
		}
	}
}

// TestPatchSchemasListTheReadOnlyFields: what a patch schema says is
// refused is what model refuses, from the same declaration.
func TestPatchSchemasListTheReadOnlyFields(t *testing.T) {
	spec, err := Generate(overlay(t))
	if err != nil {
		t.Fatal(err)
	}
	doc := parse(t, spec)
	for _, typ := range model.ObjectTypes() {
		s := at(doc, "components", "schemas", title(typ.String())+"Patch")
		for _, f := range model.ReadOnlyFields(typ) {
			if !strings.Contains(get(s, "description").Value, "`"+f+"`") {
				t.Errorf("%sPatch does not say %s is read-only", title(typ.String()), f)
			}
			if get(get(s, "properties"), f) != nil {
				t.Errorf("%sPatch takes read-only %s", title(typ.String()), f)
			}
		}
		for _, f := range model.EditableFields(typ) {
			if get(get(s, "properties"), f) == nil {
				t.Errorf("%sPatch lacks editable %s", title(typ.String()), f)
			}
		}
	}
}

// TestCompleteAddsWhatTheRouteDecides: an operation of the overlay gets
// what its route alone decides (an API route's request headers and 500;
// a route behind auth its 401, 403 and 429), and the type names are
// written where the overlay documents them; a public route gets no
// token's errors.
func TestCompleteAddsWhatTheRouteDecides(t *testing.T) {
	const ov = `openapi: 3.0.3
paths:
  /v1/x: {get: {summary: x, responses: {'200': {description: ok}}}}
  /open: {get: {responses: {'200': {description: ok}}}}
components:
  schemas:
    ID: {type: string, pattern: '^[1-9][0-9]*$'}
    IDInfo: {properties: {type_name: {type: string}}}
    ChangeEvent: {properties: {type: {type: string}}}
`
	out, err := generate([]api.RouteDoc{{Method: "GET", Pattern: "/v1/x"}, {Method: "GET", Pattern: "/open", Public: true}}, []byte(ov))
	if err != nil {
		t.Fatal(err)
	}
	doc := parse(t, out)
	v1 := at(doc, "paths", "/v1/x", "get")
	var keys []string
	for i := 0; i < len(v1.Content); i += 2 {
		keys = append(keys, v1.Content[i].Value)
	}
	if got := strings.Join(keys, " "); got != "summary parameters responses" {
		t.Errorf("GET /v1/x has %s", got)
	}
	if got := encode(t, get(v1, "parameters")); !strings.Contains(got, "parameters/RequestID") || !strings.Contains(got, "parameters/Consistency") {
		t.Errorf("GET /v1/x parameters:\n%s", got)
	}
	var codes []string
	resp := get(v1, "responses")
	for i := 0; i < len(resp.Content); i += 2 {
		codes = append(codes, resp.Content[i].Value)
	}
	if got := strings.Join(codes, " "); got != "200 401 403 429 500" {
		t.Errorf("GET /v1/x responses %s, want 200 401 403 429 500", got)
	}
	if open := at(doc, "paths", "/open", "get"); len(get(open, "responses").Content) != 2 || get(open, "parameters") != nil {
		t.Errorf("GET /open:\n%s", encode(t, open))
	}
	for _, p := range [][]string{{"IDInfo", "properties", "type_name"}, {"ChangeEvent", "properties", "type"}} {
		n := get(at(doc, append([]string{"components", "schemas"}, p...)...), "x-extensible-enum")
		if n == nil || len(n.Content) != len(model.ObjectTypes()) {
			t.Errorf("%s lists no type names", strings.Join(p, "."))
		}
	}
}
