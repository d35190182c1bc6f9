package store

import (
	"strings"
	"testing"

	"github.com/pinstore/pinstore/model"
)

func TestCursor(t *testing.T) {
	c := cursorCodec{key: []byte("k1")}
	p := cursorPos{kind: uint8(model.BoardPins), desc: true, from: 241294561224164665, seq: 1732147200123, to: 241294492511762325}
	s := c.encode(p)
	got, err := c.decode(s, p.kind, p.from, true)
	if err != nil || got != p {
		t.Fatalf("decode = %+v, %v", got, err)
	}
	flip := []byte(s)
	flip[10] ^= 1
	tests := []struct {
		name string
		s    string
		kind uint8
		from uint64
		desc bool
	}{
		{"other list", s, uint8(model.UserPins), p.from, true},
		{"other owner", s, p.kind, p.from + 1, true},
		{"other direction", s, p.kind, p.from, false},
		{"tampered", string(flip), p.kind, p.from, true},
		{"truncated", s[:len(s)-1], p.kind, p.from, true},
		{"garbage", strings.Repeat("!", len(s)), p.kind, p.from, true},
		{"empty", "", p.kind, p.from, true},
		{"other key", cursorCodec{key: []byte("k2")}.encode(p), p.kind, p.from, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := c.decode(tt.s, tt.kind, tt.from, tt.desc); !model.IsCode(err, model.EInvalid) {
				t.Fatalf("err = %v, want invalid_argument", err)
			}
		})
	}
}

func FuzzCursorDecode(f *testing.F) {
	c := cursorCodec{key: []byte("fuzz")}
	f.Add(c.encode(cursorPos{kind: 2, from: 7, seq: 9, to: 11}))
	f.Add("")
	f.Add("AAAA")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := c.decode(s, 2, 7, false)
		if err != nil {
			return
		}
		if c.encode(p) != s {
			t.Fatalf("accepted a non-canonical cursor %q", s)
		}
	})
}
