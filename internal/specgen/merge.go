package specgen

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// YAML nodes, built in the order they are written.

func str(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

func quoted(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: yaml.SingleQuotedStyle}
}

func num(n int) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(n)}
}

func boolean(b bool) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(b)}
}

// obj is a mapping of the pairs key, value; a nil value leaves its key
// out.
func obj(kv ...any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i < len(kv); i += 2 {
		if v := kv[i+1].(*yaml.Node); v != nil {
			n.Content = append(n.Content, str(kv[i].(string)), v)
		}
	}
	return n
}

// flow is a sequence of strings written on one line: [a, b].
func flow(items ...string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Style: yaml.FlowStyle}
	for _, s := range items {
		n.Content = append(n.Content, str(s))
	}
	return n
}

func seq(items ...*yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: items}
}

// ref is {$ref: '#/components/{section}/{name}'}.
func ref(section, name string) *yaml.Node {
	return obj("$ref", quoted("#/components/"+section+"/"+name))
}

// keyIndex is the index in the mapping n's Content of key, or -1.
func keyIndex(n *yaml.Node, key string) int {
	if n == nil || n.Kind != yaml.MappingNode {
		return -1
	}
	for i := 0; i < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return i
		}
	}
	return -1
}

// get returns the value of key in the mapping n, or nil.
func get(n *yaml.Node, key string) *yaml.Node {
	if i := keyIndex(n, key); i >= 0 {
		return n.Content[i+1]
	}
	return nil
}

// at follows keys from n; nil when one is missing.
func at(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		n = get(n, k)
	}
	return n
}

// set puts value under key in the mapping n, in place of the old value
// or last.
func set(n *yaml.Node, key string, value *yaml.Node) {
	if i := keyIndex(n, key); i >= 0 {
		n.Content[i+1] = value
		return
	}
	n.Content = append(n.Content, str(key), value)
}

// ensure returns the mapping under key in n, adding an empty one.
func ensure(n *yaml.Node, key string) *yaml.Node {
	if v := get(n, key); v != nil {
		return v
	}
	v := obj()
	set(n, key, v)
	return v
}

// rank orders the members of an OpenAPI object (an operation, a schema,
// a parameter) that the overlay adds to a generated one, as they are
// usually written; members not listed go after those listed.
var rank = []string{
	"tags", "operationId", "summary", "name", "in", "type", "format", "nullable",
	"pattern", "description", "security", "style", "explode", "additionalProperties",
	"parameters", "requestBody", "required", "properties", "items", "responses",
}

func rankOf(key string) int {
	if i := slices.Index(rank, key); i >= 0 {
		return i
	}
	return len(rank)
}

// merge lays the overlay node ov over the generated node gen, at path
// (the keys leading to them), and returns the result. Mappings merge
// member by member; any other value of the overlay replaces the
// generated one, and a null removes it. A member the overlay adds goes
// where order says for the mapping at path.
func merge(gen, ov *yaml.Node, path []string) (*yaml.Node, error) {
	if gen == nil {
		return ov, nil
	}
	if ov.Kind != yaml.MappingNode || gen.Kind != yaml.MappingNode {
		return ov, nil
	}
	out := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Style: gen.Style,
		HeadComment: gen.HeadComment, Content: slices.Clone(gen.Content)}
	for i := 0; i < len(ov.Content); i += 2 {
		k, v := ov.Content[i], ov.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("%s: a key that is not a string", strings.Join(path, "."))
		}
		j := keyIndex(out, k.Value)
		if v.Tag == "!!null" {
			if j >= 0 {
				out.Content = slices.Delete(out.Content, j, j+2)
			}
			continue
		}
		if j >= 0 {
			m, err := merge(out.Content[j+1], v, append(path, k.Value))
			if err != nil {
				return nil, err
			}
			out.Content[j+1] = m
			continue
		}
		at := insertAt(out, k.Value, path)
		out.Content = slices.Insert(out.Content, at, k, v)
	}
	return out, nil
}

// insertAt is where a new member key goes in the mapping n at path: last
// in a mapping of names (schemas, properties, headers …), in numeric order
// among an operation's responses, by rank in any other object.
func insertAt(n *yaml.Node, key string, path []string) int {
	less := func(a, b string) bool { return rankOf(a) < rankOf(b) }
	switch {
	case isNames(path):
		return len(n.Content)
	case len(path) == 4 && path[0] == "paths" && path[3] == "responses":
		less = func(a, b string) bool { return a < b }
	}
	for i := 0; i < len(n.Content); i += 2 {
		if less(key, n.Content[i].Value) {
			return i
		}
	}
	return len(n.Content)
}

// isNames reports whether the mapping at path holds names rather than an
// object's members.
func isNames(path []string) bool {
	if len(path) == 0 {
		return false
	}
	switch last := path[len(path)-1]; {
	case len(path) <= 2 && (path[0] == "paths" || path[0] == "components"):
		return true
	case last == "properties" || last == "headers" || last == "content" || last == "examples":
		return true
	}
	return false
}
