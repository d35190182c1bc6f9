package api

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

const (
	vecPin   = "241294492511762325" // shard 3429, pin, local 7075733
	vecBoard = "241294561224164665" // shard 3429, board, local 1337
	vecUser  = "241294629943640797" // shard 3429, user, local 733
)

func TestParseID(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want idcodec.Type
		id   uint64
		code string
	}{
		{"pin vector", vecPin, idcodec.TypePin, 241294492511762325, ""},
		{"user vector", vecUser, idcodec.TypeUser, 241294629943640797, ""},
		{"board as pin", vecBoard, idcodec.TypePin, 0, model.ENotFound},
		{"pin as user", vecPin, idcodec.TypeUser, 0, model.ENotFound},
		{"empty", "", idcodec.TypePin, 0, model.EInvalid},
		{"letters", "abc", idcodec.TypePin, 0, model.EInvalid},
		{"negative", "-1", idcodec.TypePin, 0, model.EInvalid},
		{"plus", "+1", idcodec.TypePin, 0, model.EInvalid},
		{"leading zero", "0" + vecPin, idcodec.TypePin, 0, model.EInvalid},
		{"space", " " + vecPin, idcodec.TypePin, 0, model.EInvalid},
		{"overflow", "18446744073709551616", idcodec.TypePin, 0, model.EInvalid},
		{"max uint64 (reserved bits)", "18446744073709551615", idcodec.TypePin, 0, model.EInvalid},
		{"reserved bit 62", "4611686018427387905", idcodec.TypePin, 0, model.EInvalid},
		{"type 0", "1", idcodec.TypePin, 0, model.EInvalid},
		{"unknown type 9", "618475290625", idcodec.TypePin, 0, model.EInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id, err := ParseID("id", c.in, c.want)
			if model.ErrorCode(err) != c.code {
				t.Fatalf("ParseID(%q) error %v, want code %q", c.in, err, c.code)
			}
			if err == nil && id != c.id {
				t.Fatalf("ParseID(%q) = %d, want %d", c.in, id, c.id)
			}
		})
	}
}

func TestBodyIDWrongTypeIsInvalid(t *testing.T) {
	if _, err := bodyID("board_id", vecPin, idcodec.TypeBoard); model.ErrorCode(err) != model.EInvalid || !strings.Contains(model.ErrorMessage(err), "board_id") {
		t.Fatalf("bodyID of the wrong type: %v", err)
	}
}

func TestParsePage(t *testing.T) {
	all := pageOptions{offset: true, order: true}
	cases := []struct {
		name  string
		query string
		opts  pageOptions
		want  model.Page
		bad   string // a substring of the error, "" when valid
	}{
		{"defaults", "", all, model.Page{Limit: 25, Desc: true}, ""},
		{"limit 1", "limit=1", all, model.Page{Limit: 1, Desc: true}, ""},
		{"limit 250", "limit=250", all, model.Page{Limit: 250, Desc: true}, ""},
		{"cursor", "cursor=abc", all, model.Page{Limit: 25, Cursor: "abc", Desc: true}, ""},
		{"empty cursor", "cursor=", all, model.Page{Limit: 25, Desc: true}, ""},
		{"offset", "offset=1000000&limit=3", all, model.Page{Limit: 3, Offset: 1000000, Desc: true}, ""},
		{"offset 0 with cursor", "offset=0&cursor=abc", all, model.Page{}, "either cursor or offset"},
		{"asc", "order=asc", all, model.Page{Limit: 25}, ""},
		{"desc", "order=desc", all, model.Page{Limit: 25, Desc: true}, ""},
		{"limit 0", "limit=0", all, model.Page{}, "limit"},
		{"limit -1", "limit=-1", all, model.Page{}, "limit"},
		{"limit 251", "limit=251", all, model.Page{}, "limit"},
		{"limit empty", "limit=", all, model.Page{}, "limit"},
		{"limit text", "limit=ten", all, model.Page{}, "limit"},
		{"limit float", "limit=1.5", all, model.Page{}, "limit"},
		{"limit huge", "limit=99999999999999999999", all, model.Page{}, "limit"},
		{"limit twice", "limit=1&limit=1", all, model.Page{}, "once"},
		{"offset -1", "offset=-1", all, model.Page{}, "offset"},
		{"offset too deep", "offset=1000001", all, model.Page{}, "offset"},
		{"offset text", "offset=x", all, model.Page{}, "offset"},
		{"cursor and offset", "cursor=a&offset=5", all, model.Page{}, "either cursor or offset"},
		{"order bad", "order=up", all, model.Page{}, "order"},
		{"feed: offset refused", "offset=0", pageOptions{}, model.Page{}, "offset"},
		{"feed: order refused", "order=desc", pageOptions{}, model.Page{}, "order"},
		{"feed: cursor ok", "cursor=x&limit=5", pageOptions{}, model.Page{Limit: 5, Cursor: "x", Desc: true}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q, err := url.ParseQuery(c.query)
			if err != nil {
				t.Fatal(err)
			}
			p, err := ParsePage(q, c.opts)
			if c.bad != "" {
				if model.ErrorCode(err) != model.EInvalid || !strings.Contains(model.ErrorMessage(err), c.bad) {
					t.Fatalf("ParsePage(%q) = %+v, %v; want invalid_argument about %q", c.query, p, err, c.bad)
				}
				return
			}
			if err != nil || p != c.want {
				t.Fatalf("ParsePage(%q) = %+v, %v; want %+v", c.query, p, err, c.want)
			}
		})
	}
}

func TestParseIfMatch(t *testing.T) {
	cases := []struct {
		header []string
		want   int64
		code   string
	}{
		{nil, 0, ""},
		{[]string{"*"}, 0, ""},
		{[]string{`"1"`}, 1, ""},
		{[]string{` "42" `}, 42, ""},
		{[]string{`W/"1"`}, 0, model.EVersion},
		{[]string{`"abc"`}, 0, model.EVersion},
		{[]string{`"0"`}, 0, model.EVersion},
		{[]string{`"-3"`}, 0, model.EVersion},
		{[]string{`1`}, 0, model.EInvalid},
		{[]string{`"1`}, 0, model.EInvalid},
		{[]string{`"1", "2"`}, 0, model.EInvalid},
		{[]string{`"1"`, `"2"`}, 0, model.EInvalid},
	}
	for _, c := range cases {
		r := httptest.NewRequest("PATCH", "/", nil)
		for _, h := range c.header {
			r.Header.Add("If-Match", h)
		}
		v, err := parseIfMatch(r)
		if model.ErrorCode(err) != c.code || err == nil && v != c.want {
			t.Errorf("If-Match %q = %d, %v; want %d, code %q", c.header, v, err, c.want, c.code)
		}
	}
}

func TestParseIDList(t *testing.T) {
	ids, order, err := parseIDList(vecPin+","+vecBoard+","+vecPin+",68719476737", 100, idcodec.TypePin)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 2 || ids[0] != 241294492511762325 || ids[1] != 68719476737 {
		t.Fatalf("ids %v", ids)
	}
	if strings.Join(order, ",") != vecPin+","+vecBoard+",68719476737" {
		t.Fatalf("order %v", order)
	}
	for _, bad := range []struct{ in, msg string }{
		{"", "required"},
		{vecPin + ",x", `ids[1] "x"`},
		{vecPin + ",", "ids[1]"},
		{strings.TrimSuffix(strings.Repeat(vecPin+",", 101), ","), "at most 100"},
	} {
		if _, _, err := parseIDList(bad.in, 100, idcodec.TypePin); model.ErrorCode(err) != model.EInvalid || !strings.Contains(model.ErrorMessage(err), bad.msg) {
			t.Errorf("parseIDList(%.40q): %v; want invalid_argument with %q", bad.in, err, bad.msg)
		}
	}
}

func TestDecodeStrict(t *testing.T) {
	type body struct {
		A string `json:"a"`
		B int    `json:"b"`
	}
	cases := []struct {
		in, msg string
	}{
		{`{"a":"x","b":1}`, ""},
		{`  {"a":"x"}  ` + "\n", ""},
		{`{"a":"x","c":1}`, `unknown field "c"`},
		{`{"a":1}`, "a has the wrong JSON type"},
		{`[]`, "must be a JSON object"},
		{`"a"`, "must be a JSON object"},
		{`{"a":`, "unexpected end"},
		{`{"a":x}`, "invalid JSON"},
		{`{"a":"x"} {}`, "trailing data"},
		{`{"a":"x"}]`, "trailing data"},
	}
	for _, c := range cases {
		var b body
		err := decodeStrict([]byte(c.in), &b)
		if c.msg == "" {
			if err != nil {
				t.Errorf("decodeStrict(%s): %v", c.in, err)
			}
			continue
		}
		if model.ErrorCode(err) != model.EInvalid || !strings.Contains(model.ErrorMessage(err), c.msg) {
			t.Errorf("decodeStrict(%s): %v; want invalid_argument with %q", c.in, err, c.msg)
		}
	}
}

func TestValidRequestID(t *testing.T) {
	for s, want := range map[string]bool{
		"abc":                    true,
		"A-b_c.9":                true,
		strings.Repeat("a", 64):  true,
		strings.Repeat("a", 65):  false,
		"":                       false,
		"a b":                    false,
		"a\nb":                   false,
		"é":                      false,
		`"quoted"`:               false,
		"a/b":                    false,
		"0123456789abcdef-x.y_z": true,
	} {
		if got := validRequestID(s); got != want {
			t.Errorf("validRequestID(%q) = %v", s, got)
		}
	}
}

func TestMediaTypeOK(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json":                  true,
		"application/json; charset=utf-8":   true,
		"Application/JSON":                  true,
		"application/merge-patch+json":      false,
		"text/plain":                        false,
		"":                                  false,
		"application/json;;":                false,
		"application/json; charset=UTF-8":   true,
		"application/json; charset=utf-16":  false,
		"application/json; charset=latin1":  false,
		`application/json; charset="utf-8"`: true,
		"application/json; charset=":        false,
	} {
		r := httptest.NewRequest("POST", "/", nil)
		r.Header.Set("Content-Type", ct)
		if got := mediaTypeOK(r, "application/json"); got != want {
			t.Errorf("mediaTypeOK(%q) = %v", ct, got)
		}
	}
}
