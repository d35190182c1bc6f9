package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/pinstore/pinstore/model"
)

// MaxJSONDepth bounds how deeply a request body may nest arrays and
// objects (the body's own object is level 1). A body's nesting is that of
// the document it creates or patches, and MariaDB's JSON_VALID, which
// guards every stored document, refuses documents nested 32 levels deep:
// beyond this, the insert would fail as a 500 instead of a 400.
const MaxJSONDepth = 31

// maxSafeInteger is 2^53−1, the largest integer every JSON parser reads
// exactly (JavaScript's Number.MAX_SAFE_INTEGER).
const maxSafeInteger = "9007199254740991"

// checkJSON refuses, in one pass over b, what encoding/json would accept
// (or silently rewrite) but other parsers, or the shards, read
// differently:
//
//   - EInvalid: bytes that are not UTF-8, \u escapes of lone UTF-16
//     surrogates, nesting deeper than MaxJSONDepth, and a top-level member
//     whose name matches one of fields only when case is ignored
//     (encoding/json would take "Username" as "username"; nothing else
//     would).
//   - EAmbiguousJSON: a leading byte-order mark, a member name given twice
//     in one object (at any depth; names compared after unescaping), a
//     member name holding NUL, a number whose magnitude is beyond the
//     largest double, and an integer (no fraction, no exponent) beyond
//     ±(2^53−1).
//
// The detail names where (data.tags[2]). fields are the top-level member
// names of the decoded type (nil: not checked). The JSON syntax itself is
// decodeStrict's to check: a body that is not JSON may pass here.
func checkJSON(b []byte, fields []string) error {
	if bytes.HasPrefix(b, []byte("\xef\xbb\xbf")) {
		return errorf(EAmbiguousJSON, "the request body starts with a byte-order mark (U+FEFF), which JSON forbids and some parsers skip")
	}
	if !utf8.Valid(b) {
		return errorf(model.EInvalid, "the request body is not valid UTF-8")
	}
	c := checkerPool.Get().(*jsonChecker)
	c.b, c.fields = b, fields
	err := c.run()
	c.b, c.fields = nil, nil
	clear(c.stack[:cap(c.stack)]) // drop references to b
	c.stack, c.keys = c.stack[:0], c.keys[:0]
	clear(c.keys[:cap(c.keys)])
	checkerPool.Put(c)
	return err
}

// checkerPool keeps checkers' stacks between requests, so a check
// allocates nothing.
var checkerPool = sync.Pool{New: func() any {
	return &jsonChecker{stack: make([]frame, 0, 8), keys: make([][]byte, 0, 32)}
}}

// frame is an open object or array.
type frame struct {
	obj     bool
	wantKey bool   // an object expecting a member name next
	key     []byte // the member being read (unescaped)
	index   int    // the array element being read
	keys    int    // where this object's names start in jsonChecker.keys
	set     map[string]struct{}
}

type jsonChecker struct {
	b      []byte
	fields []string
	stack  []frame
	keys   [][]byte // names of the open objects, each object's after its parent's
}

// setThreshold: an object with more names than this checks duplicates in
// a map rather than by comparing with each earlier name.
const setThreshold = 16

func (c *jsonChecker) run() error {
	b := c.b
	for i := 0; i < len(b); i++ {
		switch ch := b[i]; ch {
		case ' ', '\t', '\r', '\n', ':':
		case '{', '[':
			if len(c.stack) >= MaxJSONDepth {
				return errorf(model.EInvalid, "the request body is nested more than %d levels deep", MaxJSONDepth)
			}
			c.stack = append(c.stack, frame{obj: ch == '{', wantKey: ch == '{', keys: len(c.keys)})
		case '}', ']':
			if len(c.stack) == 0 {
				return nil // a syntax error, decodeStrict's to report
			}
			top := &c.stack[len(c.stack)-1]
			c.keys = c.keys[:top.keys]
			c.stack = c.stack[:len(c.stack)-1]
		case ',':
			if len(c.stack) > 0 {
				top := &c.stack[len(c.stack)-1]
				if top.obj {
					top.wantKey = true
				} else {
					top.index++
				}
			}
		case '"':
			end, escaped, err := c.str(i)
			if err != nil {
				return err
			}
			if end < 0 {
				return nil // unterminated: a syntax error
			}
			if n := len(c.stack); n > 0 && c.stack[n-1].wantKey {
				if err := c.name(i, end, escaped); err != nil {
					return err
				}
			}
			i = end
		case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			j := i + 1
			for j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || b[j] == '+' || b[j] == '-') {
				j++
			}
			if err := c.number(b[i:j]); err != nil {
				return err
			}
			i = j - 1
		default:
			// Literals (true, false, null) and syntax errors.
		}
	}
	return nil
}

// str scans the string whose opening quote is at b[i]: it returns the
// index of its closing quote (-1 when there is none) and whether it holds
// escapes, and refuses lone surrogate escapes.
func (c *jsonChecker) str(i int) (int, bool, error) {
	b, escaped := c.b, false
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '"':
			return j, escaped, nil
		case '\\':
			escaped = true
			if j+1 < len(b) && b[j+1] == 'u' {
				r, ok := hex4(b, j+2)
				switch {
				case !ok:
					// Not a \uXXXX escape: a syntax error decodeStrict reports.
				case utf16.IsSurrogate(r) && r < 0xdc00: // high: a low one must follow
					low, ok := rune(0), false
					if j+7 < len(b) && b[j+6] == '\\' && b[j+7] == 'u' {
						low, ok = hex4(b, j+8)
					}
					if !ok || low < 0xdc00 || low > 0xdfff {
						return 0, false, c.errorf(model.EInvalid, "the request body holds a lone UTF-16 surrogate escape (\\u%04x)", r)
					}
					j += 11 // to the low escape's last digit; the loop's j++ passes it
					continue
				case utf16.IsSurrogate(r):
					return 0, false, c.errorf(model.EInvalid, "the request body holds a lone UTF-16 surrogate escape (\\u%04x)", r)
				}
			}
			j++ // the escaped character
		}
	}
	return -1, escaped, nil
}

// name records the member name of the innermost object, the string from
// the quote at c.b[open] to the one at c.b[end]. It refuses NUL, a name
// given twice, and at the top level a name that is one of c.fields only
// when case is ignored.
func (c *jsonChecker) name(open, end int, escaped bool) error {
	top := &c.stack[len(c.stack)-1]
	top.wantKey = false
	name := c.b[open+1 : end]
	if escaped {
		var s string
		if json.Unmarshal(c.b[open:end+1], &s) != nil {
			return nil // a bad escape: a syntax error
		}
		name = []byte(s)
		top.key = name
		if bytes.IndexByte(name, 0) >= 0 {
			return c.errorf(EAmbiguousJSON, "a member name holds NUL (\\u0000), which some parsers cut short")
		}
	}
	top.key = name
	names := c.keys[top.keys:]
	switch {
	case top.set != nil:
		if _, dup := top.set[string(name)]; dup {
			return c.errorf(EAmbiguousJSON, "a member name is given twice in one object; parsers disagree on which one counts")
		}
		top.set[string(name)] = struct{}{}
	default:
		for _, k := range names {
			if bytes.Equal(k, name) {
				return c.errorf(EAmbiguousJSON, "a member name is given twice in one object; parsers disagree on which one counts")
			}
		}
		if len(names) == setThreshold {
			top.set = make(map[string]struct{}, 2*setThreshold)
			for _, k := range names {
				top.set[string(k)] = struct{}{}
			}
			top.set[string(name)] = struct{}{}
		}
	}
	if top.set == nil {
		c.keys = append(c.keys, name)
	}
	if len(c.stack) == 1 && c.fields != nil {
		return c.field(name)
	}
	return nil
}

// field refuses a top-level name that differs from a field's name only in
// case.
func (c *jsonChecker) field(name []byte) error {
	for _, f := range c.fields {
		if string(name) == f {
			return nil
		}
	}
	for _, f := range c.fields {
		if strings.EqualFold(string(name), f) {
			return errorf(model.EInvalid, "unknown field %q (member names are case-sensitive: did you mean %q?)", name, f)
		}
	}
	return nil // unknown: DisallowUnknownFields reports it
}

// number refuses a number literal beyond a double's range, or an integer
// literal beyond ±(2^53−1).
func (c *jsonChecker) number(lit []byte) error {
	digits := lit
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	intPart, exp, isInt := len(digits), 0, true
	for k, ch := range digits {
		if ch == '.' || ch == 'e' || ch == 'E' {
			isInt = false
			intPart = k
			break
		}
	}
	if isInt {
		if len(digits) > len(maxSafeInteger) || len(digits) == len(maxSafeInteger) && string(digits) > maxSafeInteger {
			return c.errorf(EAmbiguousJSON, "the integer %s is beyond ±(2^53−1): JavaScript and other double-based parsers would read another number (send it as a string)", short(lit))
		}
		return nil
	}
	if k := bytes.IndexAny(digits, "eE"); k >= 0 {
		e, err := strconv.Atoi(string(digits[k+1:]))
		if err != nil {
			e = 1 << 20 // an exponent too long for an int: let ParseFloat judge
		}
		exp = e
	}
	// Below 10^300 no double overflows; only then parse.
	if intPart+exp < 300 {
		return nil
	}
	if _, err := strconv.ParseFloat(string(lit), 64); err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return c.errorf(EAmbiguousJSON, "the number %s is beyond the range of a double: JavaScript reads Infinity and typed clients fail", short(lit))
		}
	}
	return nil
}

// short is a literal for a message: at most 40 bytes of it.
func short(lit []byte) string {
	if len(lit) > 40 {
		return string(lit[:37]) + "..."
	}
	return string(lit)
}

// errorf is a refusal that says where in the body it is: "… (at
// data.tags[2])".
func (c *jsonChecker) errorf(code, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if where := c.path(); where != "" {
		msg += " (at " + where + ")"
	}
	return errorf(code, "%s", msg)
}

// path is where the checker is, as field.sub[3].name; "" at the top.
func (c *jsonChecker) path() string {
	var sb strings.Builder
	for k, f := range c.stack {
		switch {
		case f.obj && f.key != nil && !(f.wantKey && k == len(c.stack)-1):
			if sb.Len() > 0 {
				sb.WriteByte('.')
			}
			sb.Write(f.key)
		case !f.obj:
			sb.WriteString("[" + strconv.Itoa(f.index) + "]")
		}
	}
	return sb.String()
}

// hex4 reads the 4 hex digits of a \u escape at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// jsonFields are the member names of the struct dst points to (its json
// tags), nil for anything else; cached by type.
func jsonFields(dst any) []string {
	t := reflect.TypeOf(dst)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	t = t.Elem()
	if f, ok := fieldCache.Load(t); ok {
		return f.([]string)
	}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		names = append(names, name)
	}
	fieldCache.Store(t, names)
	return names
}

var fieldCache sync.Map // reflect.Type → []string
