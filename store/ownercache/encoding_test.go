package ownercache

import (
	"bytes"
	"math"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
)

func TestOwnerEncoding(t *testing.T) {
	user := func(shard uint32, local uint64) uint64 { return idcodec.MustEncode(shard, idcodec.TypeUser, local) }
	tests := []struct {
		name    string
		owner   uint64
		wantLen int
	}{
		{"published vector user 3429/733", 241294629943640797, 4},
		{"shard 0 local 1", user(0, 1), 3},
		{"shard 0 local 0 (never assigned, still exact)", user(0, 0), 1},
		{"realistic shard 4095 local 10M", user(4095, 10_000_000), 5},
		{"local just below 2^24", user(4095, 1<<24-1), 5},
		{"local 2^24", user(1, 1<<24), 6},
		{"max shard max local", user(idcodec.MaxShard, idcodec.MaxLocal), 7},
		{"max shard local 1", user(idcodec.MaxShard, 1), 3},
		{"pin id (not a user): raw", idcodec.MustEncode(7, idcodec.TypePin, 9), 8},
		{"board id: raw", 241294561224164665, 8},
		{"reserved bits set: raw", 1<<63 | user(3, 3), 8},
		{"max uint64: raw", math.MaxUint64, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc := appendOwner(nil, tt.owner)
			if len(enc) != tt.wantLen {
				t.Errorf("len(encode(%d)) = %d, want %d", tt.owner, len(enc), tt.wantLen)
			}
			if len(enc) < rawLen && len(enc) > 1 && enc[0] == 0 {
				t.Errorf("encode(%d) = %x has a leading zero byte", tt.owner, enc)
			}
			got, ok := decodeOwner(string(enc))
			if !ok || got != tt.owner {
				t.Errorf("decode(encode(%d)) = %d, %v", tt.owner, got, ok)
			}
		})
	}
}

func TestDecodeOwnerRejects(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"too long", "123456789"},
		{"raw zero", "\x00\x00\x00\x00\x00\x00\x00\x00"},
		{"local over 36 bits", "\xff\xff\xff\xff\xff\xff\xff"[:7]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := decodeOwner(tt.in); ok {
				t.Errorf("decodeOwner(%q) = %d, true; want rejected", tt.in, got)
			}
		})
	}
}

func FuzzOwnerRoundTrip(f *testing.F) {
	for _, seed := range []uint64{0, 1, 241294629943640797, 241294492511762325, math.MaxUint64, 3 << 36} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, owner uint64) {
		enc := appendOwner(nil, owner)
		got, ok := decodeOwner(string(enc))
		if owner == 0 {
			if ok {
				t.Fatalf("owner 0 decoded as %d", got)
			}
			return
		}
		if !ok || got != owner {
			t.Fatalf("decode(encode(%d)) = %d, %v (enc %x)", owner, got, ok, enc)
		}
	})
}

// FuzzDecodeOwner checks that every value decodeOwner accepts re-encodes to
// a value that decodes to the same owner: no two stored forms disagree.
func FuzzDecodeOwner(f *testing.F) {
	f.Add([]byte("1234"))
	f.Add([]byte{0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		owner, ok := decodeOwner(string(b))
		if !ok {
			return
		}
		again, ok := decodeOwner(string(appendOwner(nil, owner)))
		if !ok || again != owner {
			t.Fatalf("%x → %d → %d, %v", b, owner, again, ok)
		}
	})
}

func TestKeyEncoding(t *testing.T) {
	tests := []struct {
		name   string
		bucket uint64
		want   string
	}{
		{"zero", 0, "p:---------"},
		{"one", 1, "p:--------0"},
		{"63", 63, "p:--------z"},
		{"64", 64, "p:-------0-"},
		{"max bucket of a valid ID", (1<<62 - 1) / BucketSize, "p:FNZrHwPbv"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(appendKey(nil, "p:", tt.bucket))
			if got != tt.want {
				t.Errorf("appendKey(%d) = %q, want %q", tt.bucket, got, tt.want)
			}
			b, ok := parseKeyBucket(got[2:])
			if !ok || b != tt.bucket {
				t.Errorf("parseKeyBucket(%q) = %d, %v; want %d", got[2:], b, ok, tt.bucket)
			}
			if bytes.ContainsAny([]byte(got), "{}") {
				t.Errorf("key %q holds a hash-tag brace", got)
			}
		})
	}
}

// TestKeyOrder checks that keys sort like buckets, so SCAN output and
// redis-cli listings read in ID order, and that distinct buckets get
// distinct keys.
func TestKeyOrder(t *testing.T) {
	buckets := []uint64{0, 1, 2, 63, 64, 65, 4095, 4096, 1 << 30, 1<<46 | 1<<36, (1<<62 - 1) / BucketSize}
	for i := 1; i < len(buckets); i++ {
		a := string(appendKey(nil, "", buckets[i-1]))
		b := string(appendKey(nil, "", buckets[i]))
		if !(a < b) {
			t.Errorf("key(%d) = %q not below key(%d) = %q", buckets[i-1], a, buckets[i], b)
		}
	}
}

func FuzzKeyRoundTrip(f *testing.F) {
	f.Add(uint64(241294492511762325))
	f.Fuzz(func(t *testing.T, pin uint64) {
		pin &^= reservedMask // the cache never keys IDs with reserved bits
		b, pos := bucketOf(pin)
		if pos < 0 || pos >= BucketSize || b*BucketSize+uint64(pos) != pin {
			t.Fatalf("bucketOf(%d) = %d, %d", pin, b, pos)
		}
		k := appendKey(nil, "", b)
		got, ok := parseKeyBucket(string(k))
		if !ok || got != b {
			t.Fatalf("parseKeyBucket(%q) = %d, %v; want %d", k, got, ok, b)
		}
	})
}

func TestEncodingAllocs(t *testing.T) {
	var buf [64]byte
	owner := idcodec.MustEncode(3429, idcodec.TypeUser, 733)
	if n := testing.AllocsPerRun(100, func() {
		appendKey(buf[:0], DefaultPrefix, 241294492511762)
		enc := appendOwner(buf[:0], owner)
		decodeOwner(string(enc)) // the conversion does not escape
	}); n != 0 {
		t.Errorf("encoding allocates %v times per run, want 0", n)
	}
}
