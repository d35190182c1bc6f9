package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// Request limits.
const (
	// DefaultMaxBodyBytes bounds a request body.
	DefaultMaxBodyBytes = 64 << 10
	// MaxMultiGet bounds the ids of GET /v1/{users,boards,pins}?ids=.
	MaxMultiGet = 100
	// MaxOwners bounds the ids of POST /v1/pins/owners.
	MaxOwners = 1000
	// MaxEdgeIDs bounds the ids of GET /v1/users/{id}/likes/contains (and
	// following/contains).
	MaxEdgeIDs = 250
)

// parseKnownID reads a decimal ID of any known type (model.ParseID).
func parseKnownID(what, s string) (uint64, idcodec.Parts, error) {
	return model.ParseID(what, s, 0)
}

// ParseID reads a decimal ID that must be of type want (model.ParseID): a
// malformed ID is EInvalid, a well-formed ID of another type ENotFound.
func ParseID(what, s string, want idcodec.Type) (uint64, error) {
	id, _, err := model.ParseID(what, s, want)
	return id, err
}

// bodyID is ParseID for an ID inside a request body: there, an ID of the
// wrong type is a malformed request (EInvalid), not a missing resource.
func bodyID(field, s string, want idcodec.Type) (uint64, error) {
	id, err := ParseID(field, s, want)
	if model.IsCode(err, model.ENotFound) {
		return 0, errorf(model.EInvalid, "%s must be a %s id", field, want)
	}
	return id, err
}

// pathID parses the URL parameter name as an ID of type want.
func pathID(r *http.Request, name string, want idcodec.Type) (uint64, error) {
	return ParseID(name, chi.URLParam(r, name), want)
}

// queryValue returns the single value of a query parameter and whether it
// was given; a parameter given twice is EInvalid.
func queryValue(q url.Values, name string) (string, bool, error) {
	vs, ok := q[name]
	if !ok {
		return "", false, nil
	}
	if len(vs) != 1 {
		return "", true, errorf(model.EInvalid, "%s may be given only once", name)
	}
	return vs[0], true, nil
}

// pageOptions says which list parameters a route accepts.
type pageOptions struct {
	offset bool // offset=N; otherwise offset is refused
	order  bool // order=asc|desc; otherwise order is refused
}

// ParsePage reads limit, cursor, offset, order, since and until from a
// list request. since and until are RFC 3339 times (since before until).
// limit defaults to model.DefaultLimit and must be 1..model.MaxLimit when
// given; offset is 0..model.MaxOffset and excludes cursor; order is desc
// (newest first, the default) or asc. Every violation is EInvalid. The
// cursor is passed through: the store validates it.
func ParsePage(q url.Values, opts pageOptions) (model.Page, error) {
	p := model.Page{Desc: true}
	if s, ok, err := queryValue(q, "limit"); err != nil {
		return p, err
	} else if ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > model.MaxLimit {
			return p, errorf(model.EInvalid, "limit must be an integer between 1 and %d", model.MaxLimit)
		}
		p.Limit = n
	}
	if s, _, err := queryValue(q, "cursor"); err != nil {
		return p, err
	} else {
		p.Cursor = s
	}
	if s, ok, err := queryValue(q, "offset"); err != nil {
		return p, err
	} else if ok {
		if !opts.offset {
			return p, errorf(model.EInvalid, "this list takes no offset; page with cursor")
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > model.MaxOffset {
			return p, errorf(model.EInvalid, "offset must be an integer between 0 and %d", model.MaxOffset)
		}
		p.Offset = n
	}
	if s, ok, err := queryValue(q, "order"); err != nil {
		return p, err
	} else if ok {
		if !opts.order {
			return p, errorf(model.EInvalid, "this list takes no order")
		}
		switch s {
		case "desc":
		case "asc":
			p.Desc = false
		default:
			return p, errorf(model.EInvalid, "order must be desc or asc")
		}
	}
	if _, ok := q["offset"]; ok && p.Cursor != "" {
		return p, errorf(model.EInvalid, "give either cursor or offset, not both")
	}
	for _, b := range []struct {
		name string
		dst  *time.Time
	}{{"since", &p.Since}, {"until", &p.Until}} {
		v, ok, err := queryValue(q, b.name)
		if err != nil {
			return p, err
		}
		if !ok {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return p, errorf(model.EInvalid, "%s must be an RFC 3339 time such as 2026-11-23T08:00:00Z, not %s", b.name, model.QuoteInput(v))
		}
		*b.dst = t
	}
	return p, p.Normalize()
}

// parseIDList reads a comma-separated list of IDs (the ids query
// parameter) of 1..max entries. A malformed entry is EInvalid naming its
// index and value. It returns the IDs of type want to look up, and every
// distinct entry in request order (duplicates dropped, keeping the first);
// entries of another type are in order but not in ids, so they come out
// as not found.
func parseIDList(s string, max int, want idcodec.Type) (ids []uint64, order []string, err error) {
	if s == "" {
		return nil, nil, errorf(model.EInvalid, "ids is required: a comma-separated list of 1 to %d ids", max)
	}
	parts := strings.Split(s, ",")
	if len(parts) > max {
		return nil, nil, errorf(model.EInvalid, "ids holds %d ids; at most %d are allowed", len(parts), max)
	}
	seen := make(map[string]bool, len(parts))
	for i, part := range parts {
		id, p, err := parseKnownID("ids["+strconv.Itoa(i)+"]", part)
		if err != nil {
			return nil, nil, err
		}
		if seen[part] {
			continue
		}
		seen[part] = true
		order = append(order, part)
		if p.Type == want {
			ids = append(ids, id)
		}
	}
	return ids, order, nil
}

// mediaTypeOK reports whether the request's Content-Type is one of types,
// in UTF-8: a charset parameter other than utf-8 is refused, since the
// body would be read as UTF-8 regardless.
func mediaTypeOK(r *http.Request, types ...string) bool {
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return false
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return false
	}
	for _, t := range types {
		if strings.EqualFold(mt, t) {
			return true
		}
	}
	return false
}

// readBody checks the Content-Type against types (415 otherwise) and reads
// at most max bytes of body (413 beyond). An empty body is EInvalid.
func readBody(w http.ResponseWriter, r *http.Request, max int64, types ...string) ([]byte, error) {
	if !mediaTypeOK(r, types...) {
		return nil, errorf(EUnsupportedMediaType, "Content-Type must be %s, in UTF-8 (charset=utf-8 or no charset)", strings.Join(types, " or "))
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errorf(model.ETooLarge, "the request body is larger than %d bytes", max)
		}
		return nil, errorf(model.EInvalid, "could not read the request body")
	}
	keepBody(r, b)
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, errorf(model.EInvalid, "the request body is empty")
	}
	return b, nil
}

// decodeStrict decodes one JSON object from b into dst: unknown fields,
// a value of the wrong JSON type, invalid JSON and trailing data are
// EInvalid with a message that says which; before any of that, checkJSON
// refuses (EInvalid or EAmbiguousJSON) what parsers would read
// differently: invalid UTF-8, lone surrogate escapes, nesting beyond
// MaxJSONDepth, member names in the wrong case, duplicate names, NUL in a
// name, numbers beyond a double, integers beyond ±(2^53−1), a BOM.
func decodeStrict(b []byte, dst any) error {
	if err := checkJSON(b, jsonFields(dst)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var (
			syn *json.SyntaxError
			typ *json.UnmarshalTypeError
			me  *model.Error
		)
		switch {
		case errors.As(err, &me):
			return me
		case errors.As(err, &syn):
			return errorf(model.EInvalid, "invalid JSON at byte %d: %s", syn.Offset, syn.Error())
		case errors.As(err, &typ):
			if typ.Field == "" {
				return errorf(model.EInvalid, "the request body must be a JSON object")
			}
			return errorf(model.EInvalid, "%s has the wrong JSON type (%s)", typ.Field, typ.Value)
		case errors.Is(err, io.ErrUnexpectedEOF):
			return errorf(model.EInvalid, "invalid JSON: unexpected end of input")
		default:
			// Unknown fields among others: encoding/json's text names the
			// field and holds nothing but the client's own input.
			return errorf(model.EInvalid, "invalid request body: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return errorf(model.EInvalid, "trailing data after the JSON object")
	}
	return nil
}

// decodeBody is readBody then decodeStrict, for application/json bodies.
func decodeBody(w http.ResponseWriter, r *http.Request, max int64, dst any) error {
	b, err := readBody(w, r, max, "application/json")
	if err != nil {
		return err
	}
	return decodeStrict(b, dst)
}

// parseIfMatch reads If-Match as the version the client expects. Absent or
// "*" is 0 (unconditional). One strong entity tag holding a version is that
// version; a weak or foreign tag can never match (EVersion, as RFC 9110
// requires a failed precondition); anything else is EInvalid.
func parseIfMatch(r *http.Request) (int64, error) {
	vs := r.Header.Values("If-Match")
	if len(vs) == 0 {
		return 0, nil
	}
	s := strings.TrimSpace(strings.Join(vs, ","))
	if s == "*" {
		return 0, nil
	}
	if strings.Contains(s, ",") {
		return 0, errorf(model.EInvalid, "If-Match must hold a single entity tag")
	}
	weak := strings.HasPrefix(s, "W/")
	s = strings.TrimPrefix(s, "W/")
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return 0, errorf(model.EInvalid, "If-Match must be an entity tag such as \"3\"")
	}
	v, err := strconv.ParseInt(s[1:len(s)-1], 10, 64)
	if weak || err != nil || v < 1 {
		return 0, errorf(model.EVersion, "If-Match %s does not match the current version", s)
	}
	return v, nil
}

// etag is the entity tag of an object version.
func etag(version int64) string { return `"` + strconv.FormatInt(version, 10) + `"` }
