package model

import (
	"encoding/json"
	"testing"
)

// FlagsOf follows the typed fields, never the bytes of an encoding: a
// document whose data holds "active" or "secret", or a comment whose text
// ends like a live document, has the flags of its own fields.
func TestFlagsOfFollowsFields(t *testing.T) {
	cases := []struct {
		name string
		doc  Doc
		want Flags
	}{
		{"live user", &UserDoc{Username: "a", Active: true}, FlagActive},
		{"deleted user, data says active", &UserDoc{Username: "a", Data: json.RawMessage(`{"x":{"active":true}}`), Active: false}, 0},
		{"deleted pin, data says active", &PinDoc{BoardID: 1, Data: json.RawMessage(`{"active": true}`), Active: false}, 0},
		{"live pin", &PinDoc{BoardID: 1, Active: true}, FlagActive},
		{"live secret pin", &PinDoc{BoardID: 1, Secret: true, Active: true}, FlagActive | FlagSecret},
		{"deleted secret board", &BoardDoc{OwnerID: 1, Secret: true}, FlagSecret},
		{"live board, data says secret", &BoardDoc{OwnerID: 1, Data: json.RawMessage(`{"secret":true}`), Active: true}, FlagActive},
		{"deleted comment that reads like a live end", &CommentDoc{Text: `"secret":true,"active":true}`, Active: false}, 0},
	}
	for _, c := range cases {
		if got := FlagsOf(c.doc); got != c.want || got.Active() != c.doc.IsActive() {
			t.Errorf("%s: FlagsOf = %b, want %b", c.name, got, c.want)
		}
	}
}
