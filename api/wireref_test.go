package api

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// The wire forms of the objects as typed structs. They are separate from the stored
// documents in model: the wire carries the object's id, type, version and
// timestamps, carries IDs as decimal strings, always has every documented
// field (empty strings and {} rather than absent), and never "active".
type (
	// User is a user as the API returns it.
	User struct {
		objectHeader
		Username    string          `json:"username"`
		DisplayName string          `json:"display_name"`
		Data        json.RawMessage `json:"data"`
		objectFooter
	}
	// Board is a board as the API returns it.
	Board struct {
		objectHeader
		OwnerID     string          `json:"owner_id"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Data        json.RawMessage `json:"data"`
		Secret      bool            `json:"secret"`
		objectFooter
	}
	// Pin is a pin as the API returns it.
	Pin struct {
		objectHeader
		BoardID     string          `json:"board_id"`
		OwnerID     string          `json:"owner_id"`
		Link        string          `json:"link"`
		Description string          `json:"description"`
		ImageURL    string          `json:"image_url"`
		Data        json.RawMessage `json:"data"`
		SavedFrom   *string         `json:"saved_from"` // null unless the pin is a save
		SectionID   *string         `json:"section_id"` // null unless the pin is in a section of its board
		Secret      bool            `json:"secret"`
		objectFooter
	}
	// Section is a section of a board as the API returns it.
	Section struct {
		objectHeader
		BoardID string          `json:"board_id"`
		OwnerID string          `json:"owner_id"`
		Name    string          `json:"name"`
		Data    json.RawMessage `json:"data"`
		Secret  bool            `json:"secret"`
		objectFooter
	}
	// Comment is a comment as the API returns it.
	Comment struct {
		objectHeader
		PinID    string          `json:"pin_id"`
		AuthorID string          `json:"author_id"`
		Text     string          `json:"text"`
		Data     json.RawMessage `json:"data"`
		objectFooter
	}

	objectHeader struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	objectFooter struct {
		CreatedAt string      `json:"created_at"`
		UpdatedAt string      `json:"updated_at"`
		Version   int64       `json:"version"`
		Counts    *wireCounts `json:"counts,omitempty"`
	}
)

// wireCounts is an object's "counts" member: the lengths of the lists it
// carries (model.Counted), by name, in that order.
type wireCounts struct {
	typ    idcodec.Type
	counts []int64
}

func (c wireCounts) MarshalJSON() ([]byte, error) { return appendCounts(nil, c.typ, c.counts), nil }

// timeFormat is RFC 3339 in UTC with the stored precision.
const timeFormat = time.RFC3339Nano

func wireData(d json.RawMessage) json.RawMessage {
	if len(d) == 0 || bytes.Equal(d, []byte("null")) {
		return json.RawMessage("{}")
	}
	return d
}

// referencePayload is the wire form of a stored object built the other
// way, as a typed Go struct per type encoded by encoding/json (how the API
// wrote objects before the wire form followed from the declarations): the
// reference the tests hold appendObject to, and the shape tests decode
// responses into.
func referencePayload(o model.Object) (any, error) {
	head := objectHeader{ID: idString(o.ID), Type: o.Type.String()}
	foot := objectFooter{
		CreatedAt: o.CreatedAt.UTC().Format(timeFormat),
		UpdatedAt: o.UpdatedAt.UTC().Format(timeFormat),
		Version:   o.Version,
	}
	if o.Counts != nil && len(model.Counted(o.Type)) > 0 {
		foot.Counts = &wireCounts{o.Type, o.Counts}
	}
	if int(o.Type) >= len(wireForms) || wireForms[o.Type] == nil {
		return nil, model.Errorf(model.EInternal, "internal error")
	}
	d := model.NewDoc(o.Type)
	if err := json.Unmarshal(o.Doc, d); err != nil {
		return nil, model.Wrap("api.referencePayload", model.EInternal, "internal error", err)
	}
	return wireForms[o.Type](d, head, foot), nil
}

// wireForms makes, per type, the wire form of a decoded document (of
// model.NewDoc(type)) between the object's header and footer.
var wireForms = [...]func(d model.Doc, head objectHeader, foot objectFooter) any{
	idcodec.TypeUser: func(doc model.Doc, head objectHeader, foot objectFooter) any {
		d := doc.(*model.UserDoc)
		return User{head, d.Username, d.DisplayName, wireData(d.Data), foot}
	},
	idcodec.TypeBoard: func(doc model.Doc, head objectHeader, foot objectFooter) any {
		d := doc.(*model.BoardDoc)
		return Board{head, idString(uint64(d.OwnerID)), d.Name, d.Description, wireData(d.Data), d.Secret, foot}
	},
	idcodec.TypePin: func(doc model.Doc, head objectHeader, foot objectFooter) any {
		d := doc.(*model.PinDoc)
		return Pin{head, idString(uint64(d.BoardID)), idString(uint64(d.OwnerID)), d.Link, d.Description, d.ImageURL, wireData(d.Data), optionalID(d.SavedFrom), optionalID(d.SectionID), d.Secret, foot}
	},
	idcodec.TypeComment: func(doc model.Doc, head objectHeader, foot objectFooter) any {
		d := doc.(*model.CommentDoc)
		return Comment{head, idString(uint64(d.PinID)), idString(uint64(d.AuthorID)), d.Text, wireData(d.Data), foot}
	},
	idcodec.TypeSection: func(doc model.Doc, head objectHeader, foot objectFooter) any {
		d := doc.(*model.SectionDoc)
		return Section{head, idString(uint64(d.BoardID)), idString(uint64(d.OwnerID)), d.Name, wireData(d.Data), d.Secret, foot}
	},
}

// optionalID is an id that may be absent: null on the wire.
func optionalID(id model.ID) *string {
	if id == 0 {
		return nil
	}
	s := idString(uint64(id))
	return &s
}
