package changes

import (
	"encoding/json"
	"time"

	"github.com/pinstore/pinstore/model"
)

// Kind says what an Event tells.
type Kind string

// The kinds of events. Created, Updated and Deleted are an object's
// (Event.ID, Type, Version, Doc); Added, Moved and Removed a list entry's
// (Event.List, From, To, Sequence). Progress carries only a Token: the
// stream read past changes that were filtered out or were no events.
const (
	Created  Kind = "created"
	Updated  Kind = "updated"
	Deleted  Kind = "deleted"
	Added    Kind = "added"
	Moved    Kind = "moved"
	Removed  Kind = "removed"
	Progress Kind = "progress"
)

// Event is one change, as a line of the stream. For an object: the ID
// (shard, type and local id, idcodec), its version after the change and
// its stored document (the type's members as model keeps them, with
// "active"; false once deleted). For a list entry: the list (its table
// name, "board_pins"), its from and to objects and the entry's sequence
// (the list's order: a time in milliseconds, or a place for a list in
// its owner's order).
type Event struct {
	Kind Kind `json:"kind"`
	// Key is unique to the change, the same each time it is told: host,
	// GTID and Index ("h0/0-1-57/2").
	Key   string    `json:"key,omitempty"`
	Host  string    `json:"host,omitempty"` // the map's name of the host whose binlog told it
	Shard int       `json:"shard"`          // the shard it happened on
	GTID  string    `json:"gtid,omitempty"` // its transaction's MariaDB GTID (domain-server-sequence)
	Index int       `json:"index"`          // its place in the transaction, from 0
	Time  time.Time `json:"time,omitzero"`  // the commit's time (seconds, UTC)

	ID      model.ID        `json:"id,omitempty"`
	Type    string          `json:"type,omitempty"` // "pin", "board", …
	Version int64           `json:"version,omitempty"`
	Doc     json.RawMessage `json:"doc,omitempty"`

	List     string   `json:"list,omitempty"`
	From     model.ID `json:"from,omitempty"`
	To       model.ID `json:"to,omitempty"`
	Sequence *int64   `json:"sequence,omitempty"`

	// Snapshot marks an event of a first sync (Snapshot): the object or
	// entry exists; Key names it, and there is no GTID, Time or Token.
	Snapshot bool `json:"snapshot,omitempty"`

	// Token resumes the stream after this event.
	Token string `json:"token"`
}

// MarshalJSON writes e as one line of the stream; a Progress event has
// only its kind and token.
func (e Event) MarshalJSON() ([]byte, error) {
	type plain Event
	if e.Kind == Progress {
		return json.Marshal(struct {
			Kind  Kind   `json:"kind"`
			Token string `json:"token"`
		}{e.Kind, e.Token})
	}
	return json.Marshal(plain(e))
}

// IsObject reports whether e tells of an object (not a list entry).
func (e *Event) IsObject() bool { return e.Kind == Created || e.Kind == Updated || e.Kind == Deleted }
