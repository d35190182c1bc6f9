package api

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pinstore/pinstore/model"
)

// TestCheckJSON pins what decodeStrict refuses beyond encoding/json, at
// its boundaries: the checks of the fuzz targets must agree.
func TestCheckJSON(t *testing.T) {
	objects := func(n int) string { return strings.Repeat(`{"a":`, n-1) + "{}" + strings.Repeat("}", n-1) }
	manyKeys := func(n int, dup string) string {
		var sb strings.Builder
		sb.WriteString(`{"data":{`)
		for i := range n {
			sb.WriteString(`"k` + strings.Repeat("x", i) + `":1,`)
		}
		sb.WriteString(`"` + dup + `":2}}`)
		return sb.String()
	}
	const (
		inv = model.EInvalid
		amb = EAmbiguousJSON
	)
	cases := []struct {
		name, body string
		code       string // "" when accepted
		detail     string
	}{
		{"nested MaxJSONDepth", objects(MaxJSONDepth), "", ""},
		{"nested one more", objects(MaxJSONDepth + 1), inv, "nested more than 31"},
		{"brackets inside strings do not nest", `{"a":"` + strings.Repeat("[{", 100) + `"}`, "", ""},
		{"escaped quote keeps the string open", `{"a":"\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}`, "", ""},
		{"escaped backslash closes the string", `{"a":"\\"}`, "", ""},
		{"invalid UTF-8", "{\"a\":\"\xff\xfe\"}", inv, "not valid UTF-8"},
		{"UTF-8 encoded surrogate", "{\"a\":\"\xed\xa0\x80\"}", inv, "not valid UTF-8"},
		{"overlong encoding", "{\"a\":\"\xc0\xaf\"}", inv, "not valid UTF-8"},
		{"surrogate pair", `{"a":"\ud83d\ude00","b":"\uDBFF\uDFFF"}`, "", ""},
		{"pair then lone high", `{"a":"\ud83d\ude00\ud83d"}`, inv, `\ud83d`},
		{"lone high", `{"a":"\ud800"}`, inv, `\ud800`},
		{"lone high at the end", `{"a":"\ud800`, inv, `\ud800`},
		{"high then text", `{"a":"\ud83dx\ude00"}`, inv, `\ud83d`},
		{"high then a non-surrogate escape", `{"a":"\ud83d\u0041"}`, inv, `\ud83d`},
		{"high then high", `{"a":"\ud83d\ud83d"}`, inv, `\ud83d`},
		{"lone low", `{"a":"\udc00"}`, inv, `\udc00`},
		{"low then high", `{"a":"\udfff\udbff"}`, inv, `\udfff`},
		{"lone surrogate in a key", `{"\ud800":1}`, inv, `\ud800`},
		{"lone surrogate says where", `{"data":{"tags":["x","\ud800"]}}`, inv, `(at data.tags[1])`},
		{"escaped backslash then u", `{"a":"\\ud800"}`, "", ""},
		{"other escapes", `{"a":"\u0000\u00e9\u2028\n\t\/"}`, "", ""},
		{"short escape", `{"a":"\u12"}`, "", ""}, // a syntax error, for decodeStrict

		// Duplicate member names, at every depth, after unescaping.
		{"duplicate at the top", `{"username":"a","username":"b"}`, amb, "given twice in one object; parsers disagree on which one counts (at username)"},
		{"duplicate in data", `{"data":{"a":1,"b":2,"a":3}}`, amb, "(at data.a)"},
		{"duplicate deep in an array", `{"data":{"l":[{"x":1},{"x":1,"x":2}]}}`, amb, "(at data.l[1].x)"},
		{"duplicate through an escape", `{"username":"a","user\u006eame":"b"}`, amb, "given twice in one object; parsers disagree on which one counts (at username)"},
		{"same name in sibling objects", `{"data":{"a":{"x":1},"b":{"x":1},"x":{"x":{"x":1}}}}`, "", ""},
		{"same name in parent and child", `{"data":{"data":{"data":1}}}`, "", ""},
		{"names differing in case in data", `{"data":{"a":1,"A":2}}`, "", ""},
		{"many names, no duplicate", manyKeys(100, "other"), "", ""},
		{"many names, duplicate of the first", manyKeys(100, "k"), amb, "(at data.k)"},
		{"many names, duplicate of the last", manyKeys(100, "k"+strings.Repeat("x", 99)), amb, "given twice"},
		{"a string value equal to a name", `{"a":"a","b":"a"}`, "", ""},
		{"NUL in a name", `{"data":{"a\u0000b":1}}`, amb, "NUL"},
		{"NUL in a value", `{"data":{"a":"\u0000"}}`, "", ""},

		// Numbers.
		{"1e400", `{"data":{"n":1e400}}`, amb, "(at data.n)"},
		{"-1e400", `{"data":{"n":-1e400}}`, amb, "beyond the range of a double"},
		{"1.5E+309", `{"data":{"n":[1.5E+309]}}`, amb, "(at data.n[0])"},
		{"1e308 is a double", `{"data":{"n":1e308,"m":-1.7976931348623157e308}}`, "", ""},
		{"underflow reads as 0 everywhere", `{"data":{"n":1e-400}}`, "", ""},
		{"400 digits with a fraction", `{"data":{"n":` + strings.Repeat("9", 400) + `.5}}`, amb, "beyond the range of a double"},
		{"2^53-1", `{"data":{"n":9007199254740991,"m":-9007199254740991}}`, "", ""},
		{"2^53", `{"data":{"n":9007199254740992}}`, amb, "2^53"},
		{"-2^53", `{"data":{"n":-9007199254740992}}`, amb, "(at data.n)"},
		{"2^64 as a number", `{"ids":[18446744073709551616]}`, amb, "(at ids[0])"},
		{"a big integer as a float", `{"data":{"n":9007199254740993.0,"m":1e20}}`, "", ""},
		{"a huge exponent", `{"data":{"n":1e99999999999999999999}}`, amb, "range of a double"},

		// A byte-order mark, and names in the wrong case (see TestDecodeStrictFields).
		{"BOM", "\xef\xbb\xbf{\"a\":1}", amb, "byte-order mark"},
		{"BOM inside a string", "{\"a\":\"\xef\xbb\xbf\"}", "", ""},
	}
	for _, c := range cases {
		err := checkJSON([]byte(c.body), nil)
		if c.code == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			}
			continue
		}
		if !model.IsCode(err, c.code) || !strings.Contains(model.ErrorMessage(err), c.detail) {
			t.Errorf("%s: error %v, want %s naming %q", c.name, err, c.code, c.detail)
		}
		var v map[string]any
		if err := decodeStrict([]byte(c.body), &v); !model.IsCode(err, c.code) {
			t.Errorf("%s: decodeStrict error %v, want %s", c.name, err, c.code)
		}
	}
}

// TestDecodeStrictFields: encoding/json matches member names to fields
// ignoring case; decodeStrict accepts only the exact names, so
// "Username" (or "username" and "USERNAME" together) can't mean one
// thing here and another to a proxy or a client.
func TestDecodeStrictFields(t *testing.T) {
	for body, want := range map[string]string{
		`{"username":"ann"}`:                   "",
		`{"Username":"ann"}`:                   `unknown field "Username"`,
		`{"username":"ann","USERNAME":"bob"}`:  `unknown field "USERNAME"`,
		`{"username":"ann","data":{"Data":1}}`: "",
		`{"username":"ann","colour":"red"}`:    `unknown field "colour"`,
	} {
		var req struct { // a user's create body
			Username    string          `json:"username"`
			DisplayName string          `json:"display_name"`
			Data        json.RawMessage `json:"data"`
		}
		err := decodeStrict([]byte(body), &req)
		if want == "" {
			if err != nil || req.Username != "ann" {
				t.Errorf("%s: %v %+v", body, err, req)
			}
			continue
		}
		if !model.IsCode(err, model.EInvalid) || !strings.Contains(model.ErrorMessage(err), want) {
			t.Errorf("%s: error %v, want invalid_argument naming %s", body, err, want)
		}
	}
}
