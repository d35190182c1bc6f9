package shardmap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Edit returns old, the text of a map file, changed to say m (which has
// validated): only the fields whose values differ are rewritten, so the
// operator's comments, key order, quoting, flow or block style and blank
// lines stay as they were; a value it writes is plain where YAML allows.
// A range that keeps its first shard keeps its line; a range a move
// splits off is written in the style of its neighbours. A JSON file stays JSON (compact or indented as it was). The
// result is checked to read back as m (the same Version with m's shard
// count and prefix as defaults); when the text cannot be kept it is the
// map in its canonical form with the comments yaml keeps, and when even
// that does not read back, an error (the caller then writes Marshal).
func Edit(old []byte, m *Map) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(old, &doc); err != nil {
		return nil, fmt.Errorf("shard map: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("shard map: the file is not one mapping")
	}
	trimmed := bytes.TrimSpace(old)
	isJSON := len(trimmed) > 0 && trimmed[0] == '{'
	indent := detectIndent(old)
	before, err := encodeNode(&doc, indent)
	if err != nil {
		return nil, err
	}
	if err := patchMap(doc.Content[0], m); err != nil {
		return nil, err
	}
	reads := func(b []byte) bool {
		back, err := Parse(b, m.Shards, m.DBPrefix)
		return err == nil && back.Version() == m.Version()
	}
	if isJSON {
		out, err := nodeJSON(doc.Content[0], bytes.Count(trimmed, []byte("\n")) > 0)
		if err == nil && reads(out) {
			return out, nil
		}
		return nil, fmt.Errorf("shard map: the edited JSON does not read back as the map (%v)", err)
	}
	after, err := encodeNode(&doc, indent)
	if err != nil {
		return nil, err
	}
	if merged, ok := mergeLines(old, before, after); ok && reads(merged) {
		return merged, nil
	}
	if reads(after) {
		return after, nil
	}
	return nil, errors.New("shard map: the edited file does not read back as the map")
}

// patchMap changes the top-level mapping root to say m. The shard count
// and prefix are written only where the file gives them (where it does
// not, the defaults give m's: a map's count and prefix never change).
func patchMap(root *yaml.Node, m *Map) error {
	for _, f := range []struct {
		key string
		val any
	}{{"shards", m.Shards}, {"db_prefix", m.DBPrefix}} {
		if _, v := mapGet(root, f.key); v != nil {
			if err := patchValue(v, f.val); err != nil {
				return err
			}
		}
	}
	_, hosts := mapGet(root, "hosts")
	if hosts == nil || hosts.Kind != yaml.MappingNode {
		return errors.New("shard map: no hosts mapping to edit")
	}
	if err := patchValue(hosts, m.Hosts); err != nil {
		return err
	}
	_, ranges := mapGet(root, "ranges")
	if ranges == nil || ranges.Kind != yaml.SequenceNode {
		return errors.New("shard map: no ranges list to edit")
	}
	return patchRanges(ranges, m.Ranges)
}

// rangeForm is a range as its file form writes it.
type rangeForm struct {
	Shards   string `yaml:"shards"`
	Host     string `yaml:"host"`
	Open     *bool  `yaml:"open,omitempty"`
	ReadOnly bool   `yaml:"read_only,omitempty"`
}

// patchRanges makes seq list want: an item whose range starts at the same
// shard is kept (with its comments) and edited; the others go, and new
// ones take the style of an item they replace or of their neighbour.
func patchRanges(seq *yaml.Node, want []Range) error {
	byFirst := map[int]*yaml.Node{}
	for _, it := range seq.Content {
		_, s := mapGet(it, "shards")
		if it.Kind != yaml.MappingNode || s == nil {
			return errors.New("shard map: a range is not a mapping with shards")
		}
		first, _, err := ParseRange(s.Value)
		if err != nil {
			return err
		}
		byFirst[first] = it
	}
	var style *yaml.Node
	if len(seq.Content) > 0 {
		style = seq.Content[0]
	}
	out := make([]*yaml.Node, 0, len(want))
	for _, r := range want {
		form := rangeForm{Shards: fmt.Sprintf("%d-%d", r.First, r.Last), Host: r.Host, Open: r.Open, ReadOnly: r.ReadOnly}
		it := byFirst[r.First]
		if it != nil {
			_, s := mapGet(it, "shards")
			if a, b, err := ParseRange(s.Value); err == nil && a == r.First && b == r.Last {
				form.Shards = s.Value // the same range, spelled as the operator did
			}
			if err := patchValue(it, form); err != nil {
				return err
			}
			style = it
		} else {
			it = &yaml.Node{}
			if err := it.Encode(form); err != nil {
				return err
			}
			copyStyle(it, style)
		}
		out = append(out, it)
	}
	seq.Content = out
	return nil
}

// patchValue makes node say val, changing only what differs: a mapping's
// keys are edited in place (removed when val lacks them, appended when
// new), a list's items that stay are kept, a scalar keeps its quoting.
func patchValue(node *yaml.Node, val any) error {
	var want yaml.Node
	if err := want.Encode(val); err != nil {
		return err
	}
	patchNode(node, &want)
	return nil
}

func patchNode(node, want *yaml.Node) {
	if sameValue(node, want) {
		return
	}
	switch {
	case node.Kind == yaml.MappingNode && want.Kind == yaml.MappingNode:
		var kept []*yaml.Node
		for i := 0; i+1 < len(node.Content); i += 2 {
			if _, w := mapGet(want, node.Content[i].Value); w != nil {
				patchNode(node.Content[i+1], w)
				kept = append(kept, node.Content[i], node.Content[i+1])
			} else if node.Content[i].Value != "open" && isZero(node.Content[i+1]) {
				// read_only: false written out where want omits it says the
				// same (not open: false, whose absence means open)
				kept = append(kept, node.Content[i], node.Content[i+1])
			}
		}
		for i := 0; i+1 < len(want.Content); i += 2 {
			if _, v := mapGet(node, want.Content[i].Value); v == nil {
				copyStyle(want.Content[i+1], siblingValue(node))
				kept = append(kept, want.Content[i], want.Content[i+1])
			}
		}
		node.Content = kept
		if node.Style&yaml.FlowStyle != 0 && needsBlock(node) {
			// A value the edit writes would have to be quoted between
			// braces: the mapping is written as lines instead.
			node.Style &^= yaml.FlowStyle
		}
	case node.Kind == yaml.SequenceNode && want.Kind == yaml.SequenceNode:
		var items []*yaml.Node
		used := make([]bool, len(node.Content))
		for _, w := range want.Content {
			var it *yaml.Node
			for i, old := range node.Content {
				if !used[i] && sameValue(old, w) {
					it, used[i] = old, true
					break
				}
			}
			if it == nil {
				it = w
				if len(node.Content) > 0 {
					copyStyle(it, node.Content[0])
				}
			}
			items = append(items, it)
		}
		node.Content = items
	case node.Kind == yaml.ScalarNode && want.Kind == yaml.ScalarNode:
		// A value the edit writes is written plain where YAML allows
		// (quoted where it must be), its comments kept.
		node.Tag, node.Value, node.Style = want.Tag, want.Value, 0
	default:
		style := node.Style
		*node = *want
		if node.Kind == yaml.SequenceNode || node.Kind == yaml.MappingNode {
			node.Style |= style & yaml.FlowStyle
		}
	}
}

// needsBlock reports whether a plain scalar value of mapping n cannot
// stay plain in a flow mapping (it holds a flow indicator, as a DSN's
// "tcp(host:port)" does).
func needsBlock(n *yaml.Node) bool {
	for i := 1; i < len(n.Content); i += 2 {
		v := n.Content[i]
		if v.Kind == yaml.ScalarNode && v.Style == 0 && (strings.ContainsAny(v.Value, ":,[]{}#") || v.Value != "" && strings.ContainsRune("-?&*!|>'\"%@`", rune(v.Value[0]))) {
			return true
		}
	}
	return false
}

// isZero reports whether n decodes to a zero value (false, "", 0, an
// empty list or mapping, null): what an omitted field means.
func isZero(n *yaml.Node) bool {
	var x any
	if n.Decode(&x) != nil {
		return false
	}
	if x == nil {
		return true
	}
	return reflect.ValueOf(x).IsZero() || reflect.ValueOf(x).Kind() == reflect.Slice && reflect.ValueOf(x).Len() == 0 || reflect.ValueOf(x).Kind() == reflect.Map && reflect.ValueOf(x).Len() == 0
}

// sameValue reports whether two nodes decode to the same value.
func sameValue(a, b *yaml.Node) bool {
	var x, y any
	if a.Decode(&x) != nil || b.Decode(&y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// copyStyle gives a new node the style of an existing one like it: flow
// or block, for it and what it holds. Its scalars are plain where YAML
// allows, as every value an edit writes.
func copyStyle(n, like *yaml.Node) {
	if like == nil || n.Kind != like.Kind {
		return
	}
	n.Style |= like.Style & yaml.FlowStyle
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if _, l := mapGet(like, n.Content[i].Value); l != nil {
				copyStyle(n.Content[i+1], l)
			}
		}
	case yaml.SequenceNode:
		if len(like.Content) > 0 {
			for _, it := range n.Content {
				copyStyle(it, like.Content[0])
			}
		}
	}
}

// siblingValue is the first value of mapping n, a model for a new one.
func siblingValue(n *yaml.Node) *yaml.Node {
	if len(n.Content) >= 2 {
		return n.Content[1]
	}
	return nil
}

// mapGet returns key's key and value nodes in mapping n (nil, nil if
// absent).
func mapGet(n *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

// encodeNode writes a document with the given indentation.
func encodeNode(doc *yaml.Node, indent int) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(indent)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// detectIndent is the file's indentation step: the indentation of the
// first line nested under a "key:" line, 2 when there is none.
func detectIndent(data []byte) int {
	prevKey := false
	for _, l := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		ind := len(l) - len(strings.TrimLeft(l, " "))
		if prevKey && ind > 0 {
			return min(max(ind, 2), 9)
		}
		prevKey = ind == 0 && strings.HasSuffix(strings.SplitN(t, " #", 2)[0], ":")
	}
	return 2
}

// mergeLines applies the change from before to after (two encodings of
// the file, before and after the edit) to the original text: lines the
// edit left alone are the original's, byte for byte (blank lines, spacing
// and all), and new lines are after's, indented as the original indents
// their neighbours. It fails (false) when the original's lines do not
// correspond one for one to before's.
func mergeLines(orig, before, after []byte) ([]byte, bool) {
	o := strings.Split(strings.TrimSuffix(string(orig), "\n"), "\n")
	b := strings.Split(strings.TrimSuffix(string(before), "\n"), "\n")
	a := strings.Split(strings.TrimSuffix(string(after), "\n"), "\n")
	if len(a)*len(b) > 4_000_000 {
		return nil, false
	}
	// at[j] is the line of o that before's line j is; gap[j] the blank
	// lines of o just before it.
	at := make([]int, len(b))
	i := 0
	for j := range b {
		for i < len(o) && strings.TrimSpace(o[i]) == "" {
			i++
		}
		if i == len(o) || squeeze(o[i]) != squeeze(b[j]) {
			return nil, false
		}
		at[j] = i
		i++
	}
	for ; i < len(o); i++ {
		if strings.TrimSpace(o[i]) != "" {
			return nil, false
		}
	}
	// Longest common subsequence of before and after.
	lcs := make([][]int32, len(b)+1)
	for j := range lcs {
		lcs[j] = make([]int32, len(a)+1)
	}
	for j := len(b) - 1; j >= 0; j-- {
		for k := len(a) - 1; k >= 0; k-- {
			if b[j] == a[k] {
				lcs[j][k] = lcs[j+1][k+1] + 1
			} else {
				lcs[j][k] = max(lcs[j+1][k], lcs[j][k+1])
			}
		}
	}
	indentOf := func(s string) int { return len(s) - len(strings.TrimLeft(s, " ")) }
	// shift is how much deeper o indents than before around line j, at
	// before's indentation ind: the nearest line of before at that depth.
	shift := func(j, ind int) int {
		for d := 0; d < len(b); d++ {
			for _, x := range []int{j - d, j + d} {
				if x >= 0 && x < len(b) && indentOf(b[x]) == ind {
					return indentOf(o[at[x]]) - ind
				}
			}
		}
		return 0
	}
	var out []string
	prev := -1 // the last line of o written or skipped
	j, k := 0, 0
	for j < len(b) || k < len(a) {
		switch {
		case j < len(b) && k < len(a) && b[j] == a[k]:
			out = append(out, o[prev+1:at[j]+1]...)
			prev = at[j]
			j, k = j+1, k+1
		case j < len(b) && (k == len(a) || lcs[j+1][k] >= lcs[j][k+1]):
			out = append(out, o[prev+1:at[j]]...) // the blank lines before a removed line stay
			prev = at[j]
			j++
		default:
			ind := indentOf(a[k])
			n := max(ind+shift(min(j, len(b)-1), ind), 0)
			out = append(out, strings.Repeat(" ", n)+strings.TrimLeft(a[k], " "))
			k++
		}
	}
	out = append(out, o[prev+1:]...)
	return []byte(strings.TrimRight(strings.Join(out, "\n"), "\n") + "\n"), true
}

// squeeze is a line without its spaces, for matching a line of the
// original with its re-encoding.
func squeeze(s string) string {
	return strings.Join(strings.Fields(s), "")
}

// nodeJSON writes a mapping as JSON, keys in the file's order, indented
// by two spaces or compact.
func nodeJSON(n *yaml.Node, indented bool) ([]byte, error) {
	var b bytes.Buffer
	if err := writeJSON(&b, n); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if indented {
		if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
			return nil, err
		}
	} else if err := json.Compact(&out, b.Bytes()); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

func writeJSON(b *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			b.Write(k)
			b.WriteByte(':')
			if err := writeJSON(b, n.Content[i+1]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, it := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, it); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!int", "!!float":
			if _, err := strconv.ParseFloat(n.Value, 64); err != nil {
				return fmt.Errorf("shard map: %q is not a JSON number", n.Value)
			}
			b.WriteString(n.Value)
		case "!!bool":
			var v bool
			if err := n.Decode(&v); err != nil {
				return err
			}
			b.WriteString(strconv.FormatBool(v))
		case "!!null":
			b.WriteString("null")
		default:
			s, _ := json.Marshal(n.Value)
			b.Write(s)
		}
	default:
		return fmt.Errorf("shard map: a %v node has no JSON form", n.Kind)
	}
	return nil
}
