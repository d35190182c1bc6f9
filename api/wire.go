package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/pinstore/pinstore/model"
)

// The fast path from a stored object to its wire form.
//
// A stored document is always json.Marshal of its typed struct in model:
// compact, its members in struct order, ids already decimal strings,
// strings already escaped. So its member values are already valid wire
// values, and appendObject copies their bytes into the response instead of
// decoding the document and encoding it again. It only has to find where
// each member's value starts and ends, fill in the members the document
// omits ("" and {}), leave out "active", and add the id, type, timestamps
// and version. A document it does not recognise (a member it does not
// know, a missing id field, anything that is not compact JSON) is first
// decoded into its type's struct and encoded again (canonical), which puts
// it in that form, so every object is written by the same code from its
// type's declared wire fields; a test checks the output against a typed
// reference for every type.

// wireField is one documented member of a type's wire form, in order
// (model.ObjectType.Wire).
type wireField = model.WireField

// stackWireFields is how many wire fields a type may have before its
// fast path allocates their spans instead of keeping them on the stack:
// a bound on speed, not on what a declaration may hold.
const stackWireFields = 16

// appendObject appends o's wire form to b.
func appendObject(b []byte, o model.Object) ([]byte, error) {
	if out, ok := spliceObject(b, o); ok {
		return out, nil
	}
	return appendCanonical(b, o)
}

// appendCanonical is appendObject's slow path, apart so that the fast
// one stays as small as it was: o's document made canonical, then
// spliced.
func appendCanonical(b []byte, o model.Object) ([]byte, error) {
	c, err := canonical(o)
	if err != nil {
		return b, err
	}
	if out, ok := spliceObject(b, c); ok {
		return out, nil
	}
	// Only a declaration whose wire fields its document does not have
	// (a test checks every type) comes here.
	return b, model.Errorf(model.EInternal, "internal error")
}

// spliceObject is appendObject's fast path; ok is false (and b unchanged
// in content up to its old length) when the document is not in the form
// it recognises.
func spliceObject(b []byte, o model.Object) ([]byte, bool) {
	t, ok := model.TypeOf(o.Type)
	if !ok {
		return b, false
	}
	fields := t.Wire
	var stack [stackWireFields][2]int
	spans := stack[:]
	if len(fields) > len(stack) {
		spans = make([][2]int, len(fields))
	}
	spans = spans[:len(fields)]
	if !scanDoc(o.Doc, fields, spans) {
		return b, false
	}
	b = append(b, `{"id":"`...)
	b = strconv.AppendUint(b, o.ID, 10)
	b = append(b, `","type":"`...)
	b = append(b, o.Type.String()...)
	b = append(b, '"')
	for i, f := range fields {
		b = append(b, ',', '"')
		b = append(b, f.Name...)
		b = append(b, '"', ':')
		v := o.Doc[spans[i][0]:spans[i][1]]
		switch {
		case len(v) == 0:
			b = append(b, f.Default...)
		case f.Name == "data" && string(v) == "null":
			b = append(b, "{}"...)
		default:
			b = append(b, v...)
		}
	}
	b = append(b, `,"created_at":"`...)
	b = o.CreatedAt.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","updated_at":"`...)
	b = o.UpdatedAt.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","version":`...)
	b = strconv.AppendInt(b, o.Version, 10)
	if o.Counts != nil && len(model.Counted(o.Type)) > 0 {
		b = appendCounts(append(b, `,"counts":`...), o.Type, o.Counts)
	}
	return append(b, '}'), true
}

// scanDoc finds the value of each of fields in doc, a compact JSON object,
// and records its byte span. It fails on anything but compact JSON, on a
// member that is neither one of fields nor "active", on a repeated member,
// and when a required field (no default) is missing.
func scanDoc(doc []byte, fields []wireField, spans [][2]int) bool {
	if len(doc) < 2 || doc[0] != '{' || doc[len(doc)-1] != '}' {
		return false
	}
	i := 1
	if doc[i] == '}' {
		return i+1 == len(doc) && requiredPresent(fields, spans)
	}
	for {
		// "name":
		if doc[i] != '"' {
			return false
		}
		end := i + 1
		for end < len(doc) && doc[end] != '"' && doc[end] != '\\' {
			end++
		}
		if end+1 >= len(doc) || doc[end] != '"' || doc[end+1] != ':' {
			return false
		}
		name := doc[i+1 : end]
		vStart := end + 2
		vEnd, ok := skipValue(doc, vStart)
		if !ok {
			return false
		}
		k := -1
		for j, f := range fields {
			if string(name) == f.Name {
				k = j
				break
			}
		}
		switch {
		case k >= 0:
			if spans[k][1] != 0 {
				return false // repeated member
			}
			spans[k] = [2]int{vStart, vEnd}
		case string(name) != "active":
			return false
		}
		if vEnd >= len(doc) {
			return false
		}
		switch doc[vEnd] {
		case ',':
			i = vEnd + 1
			if i >= len(doc) {
				return false
			}
		case '}':
			return vEnd+1 == len(doc) && requiredPresent(fields, spans)
		default:
			return false
		}
	}
}

func requiredPresent(fields []wireField, spans [][2]int) bool {
	for i, f := range fields {
		if f.Default == "" && spans[i][1] == 0 {
			return false
		}
	}
	return true
}

// skipValue returns the end of the compact JSON value starting at doc[i].
// It checks structure (matching brackets, terminated strings, literals)
// but not the contents of numbers and strings: the documents it reads are
// json.Marshal output, and anything odd falls back to the slow path.
func skipValue(doc []byte, i int) (int, bool) {
	if i >= len(doc) {
		return 0, false
	}
	switch c := doc[i]; {
	case c == '"':
		return skipString(doc, i)
	case c == '{' || c == '[':
		depth := 0
		for i < len(doc) {
			switch doc[i] {
			case '"':
				end, ok := skipString(doc, i)
				if !ok {
					return 0, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			case ' ', '\t', '\n', '\r':
				return 0, false // not compact: let encoding/json handle it
			}
			i++
		}
		return 0, false
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range [...]string{"true", "false", "null"} {
			if len(doc)-i >= len(lit) && string(doc[i:i+len(lit)]) == lit {
				return i + len(lit), true
			}
		}
		return 0, false
	case c == '-' || (c >= '0' && c <= '9'):
		j := i + 1
		for j < len(doc) && (doc[j] >= '0' && doc[j] <= '9' || doc[j] == '.' || doc[j] == 'e' || doc[j] == 'E' || doc[j] == '+' || doc[j] == '-') {
			j++
		}
		return j, true
	}
	return 0, false
}

// skipString returns the end of the JSON string starting at doc[i] == '"'.
func skipString(doc []byte, i int) (int, bool) {
	for j := i + 1; j < len(doc); j++ {
		switch doc[j] {
		case '\\':
			j++
		case '"':
			return j + 1, true
		}
	}
	return 0, false
}

// bufPool recycles response buffers: a 50-pin page is about 20 KiB.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

// jsonContentType is the Content-Type header's value of every JSON
// response, one slice shared by all: a header's value is replaced or
// appended to (which copies a full slice), never written in place.
var jsonContentType = []string{"application/json"}

// writeBuilt answers with the JSON body that build appends to a pooled
// buffer; a build error is returned unwritten.
func writeBuilt(w http.ResponseWriter, status int, build func(b []byte) ([]byte, error)) error {
	bp := bufPool.Get().(*[]byte)
	b, err := build((*bp)[:0])
	if err == nil {
		w.Header()["Content-Type"] = jsonContentType // canonical already: no Set
		w.WriteHeader(status)
		_, _ = w.Write(b)
	}
	if cap(b) <= 1<<20 { // don't keep the odd huge page alive
		*bp = b[:0]
		bufPool.Put(bp)
	}
	return err
}

// writeJSON answers with v encoded as JSON (appendJSON) and the given
// status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	return writeBuilt(w, status, func(b []byte) ([]byte, error) {
		b, err := appendJSON(b, v)
		return append(b, '\n'), err
	})
}

// noContent answers 204 when err is nil, and returns err otherwise.
func noContent(w http.ResponseWriter, err error) error {
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// appendItems appends "items":[…] for objs.
func appendItems(b []byte, objs []model.Object) ([]byte, error) {
	return appendViewerItems(b, objs, "", nil)
}

// appendViewerItems is appendItems with, when edge is not "", each
// object's viewer state: "viewer":{"liked":true} (edge, flags[i]).
func appendViewerItems(b []byte, objs []model.Object, edge string, flags []bool) ([]byte, error) {
	b = append(b, `"items":[`...)
	for i, o := range objs {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendObject(b, o); err != nil {
			return b, err
		}
		if edge != "" && i < len(flags) {
			b = b[:len(b)-1] // the object's closing brace
			b = append(b, `,"viewer":{"`...)
			b = append(b, edge...)
			b = append(b, `":`...)
			b = strconv.AppendBool(b, flags[i])
			b = append(b, '}', '}')
		}
	}
	return append(b, ']'), nil
}

// listPage is one page of a list as it goes on the wire.
type listPage struct {
	objs  []model.Object
	next  string
	count *int64 // nil: no count (the feed)
	edge  string // the viewer's edge carried on each item, or ""
	flags []bool
}

// appendList appends {"items":[…],"next_cursor":"…","count":N} for objs;
// next_cursor is left out when empty, count when nil.
func appendList(b []byte, objs []model.Object, next string, count *int64) ([]byte, error) {
	return appendPage(b, listPage{objs: objs, next: next, count: count})
}

// appendPage is appendList with the viewer state of p.
func appendPage(b []byte, p listPage) ([]byte, error) {
	objs, next, count := p.objs, p.next, p.count
	b, err := appendViewerItems(append(b, '{'), objs, p.edge, p.flags)
	if err != nil {
		return b, err
	}
	if next != "" {
		// Cursors are base64url: nothing to escape.
		b = append(b, `,"next_cursor":"`...)
		b = append(b, next...)
		b = append(b, '"')
	}
	if count != nil {
		b = append(b, `,"count":`...)
		b = strconv.AppendInt(b, *count, 10)
	}
	return append(b, '}', '\n'), nil
}

// writeList answers with one page of objects.
func writeList(w http.ResponseWriter, objs []model.Object, next string, count *int64) error {
	return writePage(w, listPage{objs: objs, next: next, count: count})
}

// writePage answers 200 with one page of a list.
func writePage(w http.ResponseWriter, p listPage) error {
	return writeBuilt(w, http.StatusOK, func(b []byte) ([]byte, error) { return appendPage(b, p) })
}

// appendJSON appends v encoded as encoding/json does for responses (no
// HTML escaping), without the trailing newline.
func appendJSON(b []byte, v any) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return b, model.Wrap("api.appendJSON", model.EInternal, "internal error", err)
	}
	out := buf.Bytes()
	return out[:len(out)-1], nil
}
