package model

import (
	"bytes"
	"encoding/json"

	"github.com/pinstore/pinstore/idcodec"
)

// Doc is any of the four stored documents.
type Doc interface {
	Validate(Limits) error
	// Refs are the ids that fix where the object lives and whom it
	// belongs to (a pin's board and owner, …); they never change.
	Refs() [2]ID
	IsActive() bool
	SetActive(bool)
}

func (d *UserDoc) Refs() [2]ID    { return [2]ID{} }
func (d *BoardDoc) Refs() [2]ID   { return [2]ID{d.OwnerID} }
func (d *PinDoc) Refs() [2]ID     { return [2]ID{d.BoardID, d.OwnerID} }
func (d *CommentDoc) Refs() [2]ID { return [2]ID{d.PinID, d.AuthorID} }

func (d *UserDoc) IsActive() bool    { return d.Active }
func (d *BoardDoc) IsActive() bool   { return d.Active }
func (d *PinDoc) IsActive() bool     { return d.Active }
func (d *CommentDoc) IsActive() bool { return d.Active }

func (d *UserDoc) SetActive(a bool)    { d.Active = a }
func (d *BoardDoc) SetActive(a bool)   { d.Active = a }
func (d *PinDoc) SetActive(a bool)     { d.Active = a }
func (d *CommentDoc) SetActive(a bool) { d.Active = a }

// NewDoc returns an empty document of the given type, or nil for an
// unknown type.
func NewDoc(typ idcodec.Type) Doc {
	switch typ {
	case idcodec.TypeUser:
		return new(UserDoc)
	case idcodec.TypeBoard:
		return new(BoardDoc)
	case idcodec.TypePin:
		return new(PinDoc)
	case idcodec.TypeComment:
		return new(CommentDoc)
	}
	return nil
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

// ActiveOf reports the "active" flag of a stored document without decoding
// it. Every stored document is written by json.Marshal of one of the typed
// documents, whose last field is Active, so a live document ends with
// `"active":true}` and nothing inside "data" can end it.
func ActiveOf(raw []byte) bool { return bytes.HasSuffix(raw, activeSuffix) }

var activeSuffix = []byte(`"active":true}`)

// SecretOf reports the "secret" flag of a stored live board or pin
// document without decoding it: json.Marshal writes Secret just before
// Active, and only when it is true.
func SecretOf(raw []byte) bool { return bytes.HasSuffix(raw, secretSuffix) }

var secretSuffix = []byte(`"secret":true,"active":true}`)
