package store

import (
	"encoding/binary"
	"errors"
	"math"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// The outcome of a keyed create, as idempotency_outcomes.response keeps
// it: the object the create answered with, as it was then, so a replay
// renders the very answer the first request got, however the object
// changed since. Keys written by earlier versions kept the rendered
// answer (a JSON object, so its first byte is '{'); decodeOutcome hands
// those back as model.Outcome.Rendered.
//
//	byte 0      outcomeFormat
//	byte 1      1 when the create made the object, 0 when it found it
//	bytes 2-3   the object's type (big-endian, as every field below)
//	bytes 4-11  its ID
//	bytes 12-19 its version
//	bytes 20-27 created_at, Unix nanoseconds
//	bytes 28-35 updated_at, Unix nanoseconds
//	byte 36     how many counts follow (noCounts: the object carried none)
//	then        the counts, 8 bytes each, then the document to the end
const (
	outcomeFormat = 1
	outcomeHeader = 37
	noCounts      = math.MaxUint8
)

// encodeOutcome appends out to b in the stored form.
func encodeOutcome(b []byte, out model.Outcome) []byte {
	o := out.Object
	created := byte(0)
	if out.Created {
		created = 1
	}
	b = append(b, outcomeFormat, created)
	b = binary.BigEndian.AppendUint16(b, uint16(o.Type))
	b = binary.BigEndian.AppendUint64(b, o.ID)
	b = binary.BigEndian.AppendUint64(b, uint64(o.Version))
	b = binary.BigEndian.AppendUint64(b, uint64(o.CreatedAt.UnixNano()))
	b = binary.BigEndian.AppendUint64(b, uint64(o.UpdatedAt.UnixNano()))
	if o.Counts == nil {
		b = append(b, noCounts)
	} else {
		b = append(b, byte(len(o.Counts)))
		for _, c := range o.Counts {
			b = binary.BigEndian.AppendUint64(b, uint64(c))
		}
	}
	return append(b, o.Doc...)
}

// errOutcome is a stored outcome that does not decode.
var errOutcome = errors.New("the stored outcome of an idempotency key does not decode")

// decodeOutcome reads a stored outcome: one encodeOutcome wrote, or the
// rendered answer an earlier version kept.
func decodeOutcome(b []byte) (model.Outcome, error) {
	if len(b) > 0 && b[0] == '{' {
		return model.Outcome{Rendered: b}, nil
	}
	if len(b) < outcomeHeader || b[0] != outcomeFormat {
		return model.Outcome{}, errOutcome
	}
	u64 := func(at int) uint64 { return binary.BigEndian.Uint64(b[at : at+8]) }
	o := model.Object{
		Type:      idcodec.Type(binary.BigEndian.Uint16(b[2:4])),
		ID:        u64(4),
		Version:   int64(u64(12)),
		CreatedAt: time.Unix(0, int64(u64(20))).UTC(),
		UpdatedAt: time.Unix(0, int64(u64(28))).UTC(),
	}
	rest := b[outcomeHeader:]
	if n := int(b[36]); n != noCounts {
		if len(rest) < 8*n {
			return model.Outcome{}, errOutcome
		}
		o.Counts = make([]int64, n)
		for i := range o.Counts {
			o.Counts[i] = int64(binary.BigEndian.Uint64(rest[8*i:]))
		}
		rest = rest[8*n:]
	}
	o.Doc = rest
	return model.Outcome{Object: o, Created: b[1] == 1}, nil
}
