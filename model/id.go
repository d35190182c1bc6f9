package model

import (
	"errors"
	"strconv"

	"github.com/pinstore/pinstore/idcodec"
)

// CheckID is the one rule for what an object ID may be, shared by the HTTP
// layer (IDs in paths and bodies) and the store (IDs it is given):
//
//   - reserved bits set, or a type that is not pin, board, user or
//     comment: EInvalid (no ID pinstore makes looks like that);
//   - with want != 0, an ID of another known type, or of local id 0 (never
//     assigned): ENotFound, since no object of type want has it.
//
// Whether the ID's shard exists is the shard map's business, not this
// rule's. what names the ID in the message ("id", "pin_id", "ids[3]").
func CheckID(what string, id uint64, want idcodec.Type) (idcodec.Parts, error) {
	p, err := idcodec.Decode(id)
	if err != nil {
		return p, Errorf(EInvalid, "%s %d has reserved bits set", what, id)
	}
	if partsOK(p, want) {
		return p, nil
	}
	return p, partsError(what, strconv.FormatUint(id, 10), p, want)
}

// ParseID reads s, a decimal ID, and checks it with CheckID. Anything but a
// decimal number below 2^64 is EInvalid.
func ParseID(what, s string, want idcodec.Type) (uint64, idcodec.Parts, error) {
	id, p, err := idcodec.Parse(s)
	switch {
	case errors.Is(err, idcodec.ErrReserved):
		return 0, p, Errorf(EInvalid, "%s %s has reserved bits set", what, QuoteInput(s))
	case err != nil:
		return 0, p, Errorf(EInvalid, "%s %s is not a decimal 64-bit id", what, QuoteInput(s))
	}
	if partsOK(p, want) {
		return id, p, nil
	}
	return id, p, partsError(what, QuoteInput(s), p, want)
}

// partsOK reports whether p passes the rule of CheckID for want. The
// error message, which quotes the client's input, is only made for an id
// that does not (partsError): the parse of every path id asks this.
func partsOK(p idcodec.Parts, want idcodec.Type) bool {
	return p.Type.Known() && (want == 0 || (p.Type == want && p.Local != 0))
}

// partsError is the error of an id whose parts p fail the rule of
// CheckID for want, shown as the client gave it.
func partsError(what, shown string, p idcodec.Parts, want idcodec.Type) error {
	switch {
	case !p.Type.Known():
		return Errorf(EInvalid, "%s %s has unknown type %d", what, shown, p.Type)
	case want != 0 && (p.Type != want || p.Local == 0):
		return Errorf(ENotFound, "%s %s not found", want, shown)
	}
	return nil
}

// QuoteInput quotes client input for an error message, cut to a length
// that keeps the message readable.
func QuoteInput(s string) string {
	const max = 40
	if len(s) > max {
		s = s[:max] + "…"
	}
	return strconv.Quote(s)
}
