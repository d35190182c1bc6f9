package store

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"

	"github.com/pinstore/pinstore/model"
)

// A cursor is the keyset position after the last entry of a page, bound to
// the list it came from and signed, so a client can neither forge a
// position nor replay a cursor on another list:
//
//	[1 version][1 list kind][1 flags][8 from][8 sequence][8 to][8 HMAC-SHA256 prefix]
//
// encoded as unpadded base64url (56 characters).
type cursorPos struct {
	kind uint8 // a model.Mapping, or kindFeed
	desc bool
	from uint64
	seq  int64
	to   uint64
}

const (
	cursorVersion = 1
	kindFeed      = 200
	cursorBody    = 3 + 8 + 8 + 8
	cursorMAC     = 8
	cursorLen     = cursorBody + cursorMAC
)

type cursorCodec struct{ key []byte }

func (c cursorCodec) encode(p cursorPos) string {
	var b [cursorLen]byte
	b[0], b[1] = cursorVersion, p.kind
	if p.desc {
		b[2] = 1
	}
	binary.BigEndian.PutUint64(b[3:], p.from)
	binary.BigEndian.PutUint64(b[11:], uint64(p.seq))
	binary.BigEndian.PutUint64(b[19:], p.to)
	copy(b[cursorBody:], c.mac(b[:cursorBody]))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// decode checks the cursor's integrity and that it belongs to the list
// (kind, from, direction) being read. Any failure is EInvalid.
func (c cursorCodec) decode(s string, kind uint8, from uint64, desc bool) (cursorPos, error) {
	bad := model.Errorf(model.EInvalid, "cursor is not valid for this list")
	if len(s) != base64.RawURLEncoding.EncodedLen(cursorLen) {
		return cursorPos{}, bad
	}
	var b [cursorLen]byte
	// Strict: a final character with non-zero padding bits is refused, so
	// each position has exactly one accepted spelling.
	if n, err := base64.RawURLEncoding.Strict().Decode(b[:], []byte(s)); err != nil || n != cursorLen {
		return cursorPos{}, bad
	}
	if !hmac.Equal(b[cursorBody:], c.mac(b[:cursorBody])) || b[0] != cursorVersion {
		return cursorPos{}, bad
	}
	p := cursorPos{
		kind: b[1],
		desc: b[2] == 1,
		from: binary.BigEndian.Uint64(b[3:]),
		seq:  int64(binary.BigEndian.Uint64(b[11:])),
		to:   binary.BigEndian.Uint64(b[19:]),
	}
	if p.kind != kind || p.from != from || p.desc != desc || b[2] > 1 {
		return cursorPos{}, bad
	}
	return p, nil
}

func (c cursorCodec) mac(body []byte) []byte {
	h := hmac.New(sha256.New, c.key)
	h.Write(body)
	return h.Sum(nil)[:cursorMAC]
}
