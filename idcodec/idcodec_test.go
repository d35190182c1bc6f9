package idcodec

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

func TestPublishedVectors(t *testing.T) {
	tests := []struct {
		name  string
		id    uint64
		shard uint32
		typ   Type
		local uint64
	}{
		{"pin", 241294492511762325, 3429, TypePin, 7075733},
		{"board", 241294561224164665, 3429, TypeBoard, 1337},
		{"user", 241294629943640797, 3429, TypeUser, 733},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Decode(tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if p != (Parts{tt.shard, tt.typ, tt.local}) {
				t.Fatalf("Decode(%d) = %+v", tt.id, p)
			}
			id, err := Encode(tt.shard, tt.typ, tt.local)
			if err != nil || id != tt.id {
				t.Fatalf("Encode = %d, %v; want %d", id, err, tt.id)
			}
			if p.Type.String() != tt.name {
				t.Fatalf("type name %q", p.Type.String())
			}
		})
	}
}

func TestEncodeRange(t *testing.T) {
	tests := []struct {
		name  string
		shard uint32
		typ   Type
		local uint64
		err   error
	}{
		{"max parts", MaxShard, MaxType, MaxLocal, nil},
		{"zero", 0, 0, 0, nil},
		{"shard overflow", MaxShard + 1, TypePin, 1, ErrShardRange},
		{"type overflow", 1, MaxType + 1, 1, ErrTypeRange},
		{"local overflow", 1, TypePin, MaxLocal + 1, ErrLocalRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := Encode(tt.shard, tt.typ, tt.local)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			if id>>62 != 0 {
				t.Fatalf("reserved bits set in %x", id)
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		in  string
		err error
	}{
		{"241294492511762325", nil},
		{"1", nil},
		{"", ErrSyntax},
		{"-1", ErrSyntax},
		{"+1", ErrSyntax},
		{"01", ErrSyntax},
		{" 1", ErrSyntax},
		{"1e3", ErrSyntax},
		{"18446744073709551615", ErrReserved},
		{"18446744073709551616", ErrSyntax},
		{"99999999999999999999", ErrSyntax},
		{"123456789012345678901", ErrSyntax},
		{strconv.FormatUint(1<<62, 10), ErrReserved},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			id, _, err := Parse(tt.in)
			if !errors.Is(err, tt.err) {
				t.Fatalf("Parse(%q) err = %v, want %v", tt.in, err, tt.err)
			}
			if err == nil && strconv.FormatUint(id, 10) != tt.in {
				t.Fatalf("Parse(%q) = %d", tt.in, id)
			}
		})
	}
}

func TestParseType(t *testing.T) {
	for _, name := range []string{"pin", "board", "user", "comment", "section"} {
		typ, ok := ParseType(name)
		if !ok || typ.String() != name {
			t.Fatalf("ParseType(%q) = %v, %v", name, typ, ok)
		}
	}
	if got := strings.Join(TypeNames(), " "); got != "pin board user comment section" {
		t.Fatalf("TypeNames() = %q", got)
	}
	if _, ok := ParseType("pins"); ok {
		t.Fatal("ParseType accepted pins")
	}
	if Type(9).Known() || Type(9).String() != "type(9)" {
		t.Fatal("type 9 treated as known")
	}
}

func FuzzRoundTrip(f *testing.F) {
	f.Add(uint32(3429), uint16(1), uint64(7075733))
	f.Add(uint32(0), uint16(0), uint64(0))
	f.Add(uint32(MaxShard), uint16(MaxType), uint64(MaxLocal))
	f.Add(uint32(MaxShard+1), uint16(3), uint64(MaxLocal+1))
	f.Fuzz(func(t *testing.T, shard uint32, typ uint16, local uint64) {
		id, err := Encode(shard, Type(typ), local)
		inRange := shard <= MaxShard && typ <= MaxType && local <= MaxLocal
		if (err == nil) != inRange {
			t.Fatalf("Encode(%d,%d,%d) err=%v inRange=%v", shard, typ, local, err, inRange)
		}
		if err != nil {
			return
		}
		p, err := Decode(id)
		if err != nil || p != (Parts{shard, Type(typ), local}) {
			t.Fatalf("round trip %d,%d,%d -> %d -> %+v, %v", shard, typ, local, id, p, err)
		}
		s := strconv.FormatUint(id, 10)
		id2, p2, err := Parse(s)
		if err != nil || id2 != id || p2 != p {
			t.Fatalf("Parse(%s) = %d %+v %v", s, id2, p2, err)
		}
	})
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"241294492511762325", "0", "-1", "18446744073709551616", "abc", "007"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, p, err := Parse(s)
		if err != nil {
			return
		}
		if strconv.FormatUint(id, 10) != s {
			t.Fatalf("Parse(%q) accepted a non-canonical form (%d)", s, id)
		}
		back, err := Encode(p.Shard, p.Type, p.Local)
		if err != nil || back != id {
			t.Fatalf("Parse(%q) parts %+v do not re-encode: %d %v", s, p, back, err)
		}
	})
}

func TestZeroAllocs(t *testing.T) {
	var sink uint64
	buf := make([]byte, 0, 24)
	n := testing.AllocsPerRun(1000, func() {
		id, _ := Encode(3429, TypePin, 7075733)
		p, _ := Decode(id)
		id2, _, _ := Parse("241294492511762325")
		buf = Append(buf[:0], id2)
		sink += p.Local + uint64(len(buf))
	})
	if n != 0 {
		t.Fatalf("allocs per run = %v, want 0", n)
	}
	_ = sink
}

var sinkID uint64
var sinkParts Parts

func BenchmarkEncode(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sinkID, _ = Encode(uint32(i)&MaxShard, TypePin, uint64(i))
	}
}

func BenchmarkDecode(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sinkParts, _ = Decode(241294492511762325 + uint64(i))
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkID, sinkParts, _ = Parse("241294492511762325")
	}
}
