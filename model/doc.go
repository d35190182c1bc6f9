package model

import (
	"bytes"
	"encoding/json"

	"github.com/pinstore/pinstore/idcodec"
)

// Doc is any of the stored documents (ObjectType.New makes an empty one).
type Doc interface {
	Validate(Limits) error
	// Refs are the ids that fix where the object lives and whom it
	// belongs to (a pin's board and owner, …), in a fixed order per type;
	// they never change. Ref(i) is the i-th, NumRefs how many there are:
	// no allocation, and no bound on how many a type declares.
	Ref(i int) ID
	NumRefs() int
	IsActive() bool
	SetActive(bool)
}

// SameRefs reports whether a and b have the same refs.
func SameRefs(a, b Doc) bool {
	if a.NumRefs() != b.NumRefs() {
		return false
	}
	for i := range a.NumRefs() {
		if a.Ref(i) != b.Ref(i) {
			return false
		}
	}
	return true
}

// RefsOf lists d's refs (for tests and messages; the request path uses Ref).
func RefsOf(d Doc) []ID {
	out := make([]ID, d.NumRefs())
	for i := range out {
		out[i] = d.Ref(i)
	}
	return out
}

func (d *UserDoc) NumRefs() int    { return 0 }
func (d *BoardDoc) NumRefs() int   { return 1 }
func (d *PinDoc) NumRefs() int     { return 2 }
func (d *CommentDoc) NumRefs() int { return 2 }
func (d *SectionDoc) NumRefs() int { return 2 }

// Ref(i) of an i past NumRefs is 0, as no id.
func (d *UserDoc) Ref(i int) ID    { return 0 }
func (d *BoardDoc) Ref(i int) ID   { return refOf(i, d.OwnerID, 0) }
func (d *PinDoc) Ref(i int) ID     { return refOf(i, d.BoardID, d.OwnerID) }
func (d *CommentDoc) Ref(i int) ID { return refOf(i, d.PinID, d.AuthorID) }
func (d *SectionDoc) Ref(i int) ID { return refOf(i, d.BoardID, d.OwnerID) }

func refOf(i int, first, second ID) ID {
	switch i {
	case 0:
		return first
	case 1:
		return second
	}
	return 0
}

func (d *UserDoc) IsActive() bool    { return d.Active }
func (d *BoardDoc) IsActive() bool   { return d.Active }
func (d *PinDoc) IsActive() bool     { return d.Active }
func (d *CommentDoc) IsActive() bool { return d.Active }
func (d *SectionDoc) IsActive() bool { return d.Active }

func (d *UserDoc) SetActive(a bool)    { d.Active = a }
func (d *BoardDoc) SetActive(a bool)   { d.Active = a }
func (d *PinDoc) SetActive(a bool)     { d.Active = a }
func (d *CommentDoc) SetActive(a bool) { d.Active = a }
func (d *SectionDoc) SetActive(a bool) { d.Active = a }

// NewDoc returns an empty document of the given type, or nil for an
// unknown type.
func NewDoc(typ idcodec.Type) Doc {
	t, ok := TypeOf(typ)
	if !ok {
		return nil
	}
	return t.New()
}

// DecodeDoc parses a stored document of type typ. Unknown fields are an
// EInvalid error.
func DecodeDoc(typ idcodec.Type, raw []byte) (Doc, error) {
	d := NewDoc(typ)
	if d == nil {
		return nil, Errorf(EInvalid, "unknown object type %d", typ)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(d); err != nil {
		var me *Error
		if errorsAs(err, &me) {
			return nil, me
		}
		return nil, Errorf(EInvalid, "document is not a valid %s: %v", typ, err)
	}
	if dec.More() {
		return nil, Errorf(EInvalid, "document has trailing data")
	}
	return d, nil
}

// Flags are an object's state as its row carries it beside the document:
// whether it is live and whether it is secret. The object tables hold
// them in a flags column the database derives from the document's
// "active" and "secret" fields (migrations/0013_object_flags.sql), so a
// read learns them without parsing the document and no rule depends on
// where a field sits in the JSON.
type Flags uint8

// The bits of Flags, as the flags column stores them.
const (
	FlagActive Flags = 1 << iota // the object is live (not deleted)
	FlagSecret                   // a secret board, or a pin or section of one
)

// Active reports whether the object is live.
func (f Flags) Active() bool { return f&FlagActive != 0 }

// Secret reports whether the object is secret.
func (f Flags) Secret() bool { return f&FlagSecret != 0 }

// SecretDoc is a document that can be secret (a board, and what hangs
// off it and copies its flag: a pin, a section).
type SecretDoc interface {
	Doc
	IsSecret() bool
	SetSecret(bool)
}

func (d *BoardDoc) IsSecret() bool   { return d.Secret }
func (d *PinDoc) IsSecret() bool     { return d.Secret }
func (d *SectionDoc) IsSecret() bool { return d.Secret }

func (d *BoardDoc) SetSecret(s bool)   { d.Secret = s }
func (d *PinDoc) SetSecret(s bool)     { d.Secret = s }
func (d *SectionDoc) SetSecret(s bool) { d.Secret = s }

// FlagsOf is the flags of a document: the ones the database derives when
// it stores d's encoding.
func FlagsOf(d Doc) Flags {
	var f Flags
	if d.IsActive() {
		f |= FlagActive
	}
	if s, ok := d.(SecretDoc); ok && s.IsSecret() {
		f |= FlagSecret
	}
	return f
}
