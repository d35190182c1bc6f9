package model

import (
	"strconv"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
)

func TestCheckAndParseID(t *testing.T) {
	pin := idcodec.MustEncode(3429, idcodec.TypePin, 7075733)
	board := idcodec.MustEncode(3429, idcodec.TypeBoard, 1337)
	tests := []struct {
		name string
		s    string
		want idcodec.Type
		code string // "" = accepted
	}{
		{"pin as pin", strconv.FormatUint(pin, 10), idcodec.TypePin, ""},
		{"pin as any type", strconv.FormatUint(pin, 10), 0, ""},
		{"board as pin", strconv.FormatUint(board, 10), idcodec.TypePin, ENotFound},
		{"local id 0", strconv.FormatUint(idcodec.MustEncode(1, idcodec.TypePin, 0), 10), idcodec.TypePin, ENotFound},
		{"local id 0, any type", strconv.FormatUint(idcodec.MustEncode(1, idcodec.TypePin, 0), 10), 0, ""},
		{"unknown type 9", strconv.FormatUint(9<<36|1, 10), idcodec.TypePin, EInvalid},
		{"type 0", "1", 0, EInvalid},
		{"reserved bits", "18446744073709551615", idcodec.TypePin, EInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, _, err := ParseID("id", tt.s, tt.want)
			if got := ErrorCode(err); got != tt.code {
				t.Fatalf("ParseID(%s) code %q, want %q (%v)", tt.s, got, tt.code, err)
			}
			n, _ := strconv.ParseUint(tt.s, 10, 64)
			if _, err := CheckID("id", n, tt.want); ErrorCode(err) != tt.code {
				t.Fatalf("CheckID(%d) = %v, want code %q", n, err, tt.code)
			}
			if tt.code == "" && id != n {
				t.Fatalf("ParseID = %d, want %d", id, n)
			}
		})
	}
	for _, s := range []string{"", "-5", "12a", "18446744073709551616", "+1", " 1"} {
		if _, _, err := ParseID("id", s, idcodec.TypePin); ErrorCode(err) != EInvalid {
			t.Errorf("ParseID(%q) = %v, want invalid_argument", s, err)
		}
	}
}

// BenchmarkParseID is the parse of a valid path id, which every request
// naming an object pays.
//
//	go test -run '^$' -bench ParseID -benchmem ./model
func BenchmarkParseID(b *testing.B) {
	s := strconv.FormatUint(idcodec.MustEncode(3, idcodec.TypePin, 9), 10)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ParseID("id", s, idcodec.TypePin); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckID is the check of an id the store routes: every read or
// write of an object, every entry of a page.
//
//	go test -run '^$' -bench CheckID -benchmem ./model
func BenchmarkCheckID(b *testing.B) {
	id := idcodec.MustEncode(3, idcodec.TypePin, 9)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := CheckID("id", id, idcodec.TypePin); err != nil {
			b.Fatal(err)
		}
	}
}
