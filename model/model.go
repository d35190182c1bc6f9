package model

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/pinstore/pinstore/idcodec"
)

// Object is a stored object as the store returns it: its ID, the version
// used for optimistic concurrency, timestamps, its JSON document (one of
// UserDoc, BoardDoc, PinDoc, CommentDoc, encoded) and the lengths of the
// lists it carries, in the order of Counted(Type) (nil when not read),
// and the flags its row carries beside the document (FlagsOf(Doc)).
type Object struct {
	ID        uint64
	Type      idcodec.Type
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
	Doc       json.RawMessage
	Counts    []int64
	Flags     Flags
}

// ID is an object ID inside a stored document. It is written as a decimal
// string, as on the wire, since it exceeds 2^53.
type ID uint64

// MarshalJSON writes the ID as a decimal string.
func (id ID) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 22)
	b = append(b, '"')
	b = strconv.AppendUint(b, uint64(id), 10)
	return append(b, '"'), nil
}

// UnmarshalJSON accepts a decimal string (the canonical form).
func (id *ID) UnmarshalJSON(b []byte) error {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return Errorf(EInvalid, "an id must be a decimal string")
	}
	v, _, err := idcodec.Parse(string(b[1 : len(b)-1]))
	if err != nil {
		return Errorf(EInvalid, "malformed id %s", b)
	}
	*id = ID(v)
	return nil
}

// The stored documents. Active is false once the object is deleted (soft
// delete, as in the Pinterest design); Data is the client's own free-form
// object, bounded by the document size limit.
type (
	UserDoc struct {
		Username    string          `json:"username"`
		DisplayName string          `json:"display_name,omitempty"`
		Data        json.RawMessage `json:"data,omitempty"`
		Active      bool            `json:"active"`
	}
	BoardDoc struct {
		OwnerID     ID              `json:"owner_id"`
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Data        json.RawMessage `json:"data,omitempty"`
		Secret      bool            `json:"secret,omitempty"` // visible only to its owner (and service tokens)
		Active      bool            `json:"active"`
	}
	PinDoc struct {
		BoardID     ID              `json:"board_id"`
		OwnerID     ID              `json:"owner_id"`
		Link        string          `json:"link,omitempty"`
		Description string          `json:"description,omitempty"`
		ImageURL    string          `json:"image_url,omitempty"`
		Data        json.RawMessage `json:"data,omitempty"`
		SavedFrom   ID              `json:"saved_from,omitempty"` // the pin this one is a save of
		SectionID   ID              `json:"section_id,omitempty"` // the section of its board it is in, if any
		Secret      bool            `json:"secret,omitempty"`     // its board's flag, copied by every change of it
		Active      bool            `json:"active"`
	}
	// SectionDoc is a named section of a board, on the board's shard; a
	// pin of the board is in at most one of its sections.
	SectionDoc struct {
		BoardID ID              `json:"board_id"`
		OwnerID ID              `json:"owner_id"` // the board's owner
		Name    string          `json:"name"`
		Data    json.RawMessage `json:"data,omitempty"`
		Secret  bool            `json:"secret,omitempty"` // its board's flag, copied by every change of it
		Active  bool            `json:"active"`
	}
	CommentDoc struct {
		PinID    ID              `json:"pin_id"`
		AuthorID ID              `json:"author_id"`
		Text     string          `json:"text"`
		Data     json.RawMessage `json:"data,omitempty"`
		Active   bool            `json:"active"`
	}
)

// Field limits, in bytes of UTF-8.
const (
	MaxUsername    = 64
	MaxName        = 200
	MaxText        = 2000
	MaxURL         = 2048
	DefaultMaxData = 8 << 10
)

// Limits bounds what a document may hold.
type Limits struct {
	MaxDataBytes int // the size of Data; default DefaultMaxData
}

func (l Limits) maxData() int {
	if l.MaxDataBytes <= 0 {
		return DefaultMaxData
	}
	return l.MaxDataBytes
}

// Validate checks a user document. It returns an EInvalid or ETooLarge *Error.
func (d *UserDoc) Validate(l Limits) error {
	if err := text("username", d.Username, 1, MaxUsername); err != nil {
		return err
	}
	for _, r := range d.Username {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return Errorf(EInvalid, "username may hold only letters, digits, '_', '.' and '-'")
		}
	}
	if err := text("display_name", d.DisplayName, 0, MaxName); err != nil {
		return err
	}
	return data(d.Data, l)
}

// Validate checks a board document.
func (d *BoardDoc) Validate(l Limits) error {
	if err := idOf("owner_id", d.OwnerID, idcodec.TypeUser); err != nil {
		return err
	}
	if err := text("name", d.Name, 1, MaxName); err != nil {
		return err
	}
	if err := text("description", d.Description, 0, MaxText); err != nil {
		return err
	}
	return data(d.Data, l)
}

// Validate checks a pin document.
func (d *PinDoc) Validate(l Limits) error {
	if err := idOf("board_id", d.BoardID, idcodec.TypeBoard); err != nil {
		return err
	}
	if d.OwnerID != 0 {
		if err := idOf("owner_id", d.OwnerID, idcodec.TypeUser); err != nil {
			return err
		}
	}
	if err := text("link", d.Link, 0, MaxURL); err != nil {
		return err
	}
	if err := text("description", d.Description, 0, MaxText); err != nil {
		return err
	}
	if err := text("image_url", d.ImageURL, 0, MaxURL); err != nil {
		return err
	}
	if d.SectionID != 0 {
		if err := idOf("section_id", d.SectionID, idcodec.TypeSection); err != nil {
			return err
		}
	}
	return data(d.Data, l)
}

// Validate checks a section document.
func (d *SectionDoc) Validate(l Limits) error {
	if err := idOf("board_id", d.BoardID, idcodec.TypeBoard); err != nil {
		return err
	}
	if d.OwnerID != 0 {
		if err := idOf("owner_id", d.OwnerID, idcodec.TypeUser); err != nil {
			return err
		}
	}
	if err := text("name", d.Name, 1, MaxName); err != nil {
		return err
	}
	return data(d.Data, l)
}

// Validate checks a comment document.
func (d *CommentDoc) Validate(l Limits) error {
	if err := idOf("pin_id", d.PinID, idcodec.TypePin); err != nil {
		return err
	}
	if err := idOf("author_id", d.AuthorID, idcodec.TypeUser); err != nil {
		return err
	}
	if err := text("text", d.Text, 1, MaxText); err != nil {
		return err
	}
	return data(d.Data, l)
}

func text(field, s string, min, max int) error {
	if !utf8.ValidString(s) {
		return Errorf(EInvalid, "%s is not valid UTF-8", field)
	}
	if len(s) < min {
		return Errorf(EInvalid, "%s is required", field)
	}
	if len(s) > max {
		return Errorf(EInvalid, "%s is longer than %d bytes", field, max)
	}
	return nil
}

// idOf checks a document's reference: inside a body, an ID that is not one
// of want's (CheckID's EInvalid and ENotFound alike) is a malformed request.
func idOf(field string, id ID, want idcodec.Type) error {
	if _, err := CheckID(field, uint64(id), want); err != nil {
		return Errorf(EInvalid, "%s must be a %s id", field, want)
	}
	return nil
}

func data(d json.RawMessage, l Limits) error {
	if len(d) == 0 || bytes.Equal(d, []byte("null")) {
		return nil
	}
	if len(d) > l.maxData() {
		return Errorf(ETooLarge, "data is larger than %d bytes", l.maxData())
	}
	if d[0] != '{' || !json.Valid(d) {
		return Errorf(EInvalid, "data must be a JSON object")
	}
	return nil
}
