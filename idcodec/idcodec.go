// Package idcodec composes and decomposes pinstore's 64-bit object IDs.
//
// Bit layout, most significant first:
//
//	[2 reserved bits = 0][16-bit shard][10-bit type][36-bit local id]
//	id = shard<<46 | type<<36 | local
//
// The shard is the logical shard (database dbNNNNN) that holds the object,
// the type says which table, and the local id is that table's
// auto-increment key inside the shard. An ID therefore routes itself: no
// look-up is needed to find where an object lives.
//
// The package is pure arithmetic and allocates nothing.
package idcodec

import (
	"errors"
	"strconv"
)

// Type is the 10-bit object type carried in an ID.
type Type uint16

// The object types. Values are part of the on-disk and on-wire contract.
const (
	TypePin     Type = 1
	TypeBoard   Type = 2
	TypeUser    Type = 3
	TypeComment Type = 4
	TypeSection Type = 5 // a named section of a board
)

// Field widths and limits.
const (
	ShardBits = 16
	TypeBits  = 10
	LocalBits = 36

	MaxShard = 1<<ShardBits - 1 // 65535
	MaxType  = 1<<TypeBits - 1  // 1023
	MaxLocal = 1<<LocalBits - 1 // 68719476735

	localShift = 0
	typeShift  = LocalBits
	shardShift = LocalBits + TypeBits
	reserved   = uint64(3) << 62
)

var typeNames = [...]string{TypePin: "pin", TypeBoard: "board", TypeUser: "user", TypeComment: "comment", TypeSection: "section"}

// String returns the type's name ("pin", "board", "user", "comment",
// "section"), or
// "type(N)" for a value that is not a known type.
func (t Type) String() string {
	if t.Known() {
		return typeNames[t]
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// Known reports whether t is one of the object types: one typeNames
// names.
func (t Type) Known() bool { return int(t) < len(typeNames) && typeNames[t] != "" }

// TypeNames lists the names of the known types, in type order.
func TypeNames() []string {
	var names []string
	for _, name := range typeNames {
		if name != "" {
			names = append(names, name)
		}
	}
	return names
}

// ParseType returns the type named by s ("pin", "board", "user",
// "comment", "section").
func ParseType(s string) (Type, bool) {
	for t, name := range typeNames {
		if name != "" && name == s {
			return Type(t), true
		}
	}
	return 0, false
}

// Errors returned by Encode, Decode and Parse. They are sentinel values so
// callers can test them with errors.Is.
var (
	ErrShardRange = errors.New("idcodec: shard out of range")
	ErrTypeRange  = errors.New("idcodec: type out of range")
	ErrLocalRange = errors.New("idcodec: local id out of range")
	ErrReserved   = errors.New("idcodec: reserved bits set")
	ErrSyntax     = errors.New("idcodec: not a decimal 64-bit id")
	ErrZero       = errors.New("idcodec: local id 0 is never assigned")
)

// Parts are the three fields of an ID.
type Parts struct {
	Shard uint32
	Type  Type
	Local uint64
}

// Encode composes an ID. It returns ErrShardRange, ErrTypeRange or
// ErrLocalRange when a part does not fit its field; nothing is truncated.
func Encode(shard uint32, typ Type, local uint64) (uint64, error) {
	switch {
	case shard > MaxShard:
		return 0, ErrShardRange
	case uint32(typ) > MaxType:
		return 0, ErrTypeRange
	case local > MaxLocal:
		return 0, ErrLocalRange
	}
	return uint64(shard)<<shardShift | uint64(typ)<<typeShift | local<<localShift, nil
}

// MustEncode is Encode for constants known to be in range; it panics otherwise.
func MustEncode(shard uint32, typ Type, local uint64) uint64 {
	id, err := Encode(shard, typ, local)
	if err != nil {
		panic(err)
	}
	return id
}

// Decode splits an ID into its parts. It returns ErrReserved when either of
// the two top bits is set. It does not check that the type is known or the
// shard is configured; callers that route on the ID must do that.
func Decode(id uint64) (Parts, error) {
	if id&reserved != 0 {
		return Parts{}, ErrReserved
	}
	return Parts{
		Shard: uint32(id >> shardShift & MaxShard),
		Type:  Type(id >> typeShift & MaxType),
		Local: id & MaxLocal,
	}, nil
}

// Parse reads a decimal ID as it travels in JSON and URLs and decodes it.
// Signs, spaces, leading zeros and values above 2^64-1 are ErrSyntax.
func Parse(s string) (uint64, Parts, error) {
	if s == "" || len(s) > 20 || (len(s) > 1 && s[0] == '0') {
		return 0, Parts{}, ErrSyntax
	}
	var id uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, Parts{}, ErrSyntax
		}
		d := uint64(c - '0')
		if id > (1<<64-1-d)/10 {
			return 0, Parts{}, ErrSyntax
		}
		id = id*10 + d
	}
	p, err := Decode(id)
	return id, p, err
}

// Append appends the decimal form of id to dst, as strconv.AppendUint does.
func Append(dst []byte, id uint64) []byte { return strconv.AppendUint(dst, id, 10) }

// ShardOf returns the shard bits of id without validating the reserved bits.
func ShardOf(id uint64) uint32 { return uint32(id >> shardShift & MaxShard) }

// TypeOf returns the type bits of id without validating the reserved bits.
func TypeOf(id uint64) Type { return Type(id >> typeShift & MaxType) }

// LocalOf returns the local-id bits of id.
func LocalOf(id uint64) uint64 { return id & MaxLocal }
