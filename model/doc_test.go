package model

import (
	"encoding/json"
	"testing"
)

func TestActiveOfMatchesDecoding(t *testing.T) {
	docs := []Doc{
		&UserDoc{Username: "a", Active: true},
		&UserDoc{Username: "a", Data: json.RawMessage(`{"x":{"active":true}}`), Active: false},
		&PinDoc{BoardID: 1, Data: json.RawMessage(`{"active": true}`), Active: false},
		&PinDoc{BoardID: 1, Active: true},
		&CommentDoc{Text: `"active":true}`, Active: false},
	}
	for _, d := range docs {
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if ActiveOf(b) != d.IsActive() {
			t.Fatalf("ActiveOf(%s) = %v, want %v", b, ActiveOf(b), d.IsActive())
		}
	}
}
