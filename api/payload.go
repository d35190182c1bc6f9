package api

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// The wire form of an object follows from its type's declaration
// (model.ObjectType.Wire): its id and type, each wire field in order (its
// declared default where the document omits it), its timestamps, version
// and counts. It is separate from the stored document: the wire carries
// IDs as decimal strings, always has every documented field (empty
// strings and {} rather than absent), and never "active". wire.go writes
// it; there is no Go struct per type.

// appendCounts appends {"likes":3,"comments":1}: the lengths of the lists
// an object of typ carries, named, in model.Counted order.
func appendCounts(b []byte, typ idcodec.Type, counts []int64) []byte {
	b = append(b, '{')
	for i, m := range model.Counted(typ) {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, m.CountName()...)
		b = append(b, '"', ':')
		if i < len(counts) {
			b = strconv.AppendInt(b, counts[i], 10)
		} else {
			b = append(b, '0')
		}
	}
	return append(b, '}')
}

func idString(id uint64) string { return strconv.FormatUint(id, 10) }

// Payload is a stored object's wire form, as JSON. A document that does
// not decode is EInternal: the store handed back something it never
// wrote.
func Payload(o model.Object) (json.RawMessage, error) {
	b, err := appendObject(nil, o)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// canonical returns o with its document in the form the store writes
// (json.Marshal of its type's document struct), which spliceObject
// reads: decoded into the struct and encoded again. Members the struct
// does not have are dropped, a repeated one keeps its last value.
func canonical(o model.Object) (model.Object, error) {
	d := model.NewDoc(o.Type)
	if d == nil {
		return o, model.Errorf(model.EInternal, "internal error")
	}
	if err := json.Unmarshal(o.Doc, d); err != nil {
		return o, model.Wrap("api.Payload", model.EInternal, "internal error", err)
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return o, model.Wrap("api.Payload", model.EInternal, "internal error", err)
	}
	o.Doc = raw
	return o, nil
}

// OwnersResponse answers POST /v1/pins/owners.
type OwnersResponse struct {
	Owners   map[string]string `json:"owners"`
	NotFound []string          `json:"not_found"`
}

// IDInfo is a decoded ID.
type IDInfo struct {
	ID       string `json:"id"`
	Shard    uint32 `json:"shard"`
	Type     uint16 `json:"type"`
	TypeName string `json:"type_name"`
	LocalID  uint64 `json:"local_id"`
}

// ReadyResponse is the body of /readyz.
type ReadyResponse struct {
	Status string         `json:"status"`
	Checks []fleet.Health `json:"checks"`
}

// Request bodies. IDs are strings here so that a bad one is reported under
// its field's name.
type (
	saveRequest struct {
		BoardID string `json:"board_id"`
	}
	// pinSectionRequest is the body of PUT /v1/pins/{id}/section: a
	// section id, or null for none.
	pinSectionRequest struct {
		SectionID *string `json:"section_id"`
	}
	moveRequest struct {
		Before *string `json:"before"`
		After  *string `json:"after"`
	}
	ownersRequest struct {
		IDs []json.RawMessage `json:"ids"`
	}
)

// storedData is the client's data as a document stores it: absent when
// null or missing.
func storedData(d json.RawMessage) json.RawMessage {
	if len(d) == 0 || bytes.Equal(bytes.TrimSpace(d), []byte("null")) {
		return nil
	}
	return d
}
