package api

import (
	"context"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// Store is what the HTTP layer needs from storage. *store.Store implements
// it; every method returns *model.Error values whose code the api maps to
// an HTTP status in one place.
type Store interface {
	// CreateUser places a new user on a random open shard.
	CreateUser(ctx context.Context, doc model.UserDoc) (model.Object, error)
	// CreateBoard places the board on its owner's shard and adds user_boards.
	// ENotFound when the owner does not exist.
	CreateBoard(ctx context.Context, doc model.BoardDoc) (model.Object, error)
	// CreatePin places the pin on its board's shard, sets doc.OwnerID to the
	// board's owner, adds board_pins and user_pins, and caches the owner.
	// ENotFound when the board does not exist.
	CreatePin(ctx context.Context, doc model.PinDoc, actor uint64) (model.Object, error)
	// CreateComment places the comment on its pin's shard and adds
	// pin_comments. ENotFound when the pin or the author does not exist.
	CreateComment(ctx context.Context, doc model.CommentDoc) (model.Object, error)

	// Get returns a live object of type typ. ENotFound when it is unknown,
	// deleted, or id is of another type; EInvalid when id is malformed or
	// its shard is outside the configured range.
	Get(ctx context.Context, id uint64, typ idcodec.Type) (model.Object, error)
	// GetMany returns the live objects among ids, in request order;
	// unknown, deleted or wrong-type ids are left out. One query per shard.
	GetMany(ctx context.Context, ids []uint64, typ idcodec.Type) ([]model.Object, error)
	// Update reads the document, calls mutate with it inside the shard
	// transaction, and writes what mutate returns with version+1.
	// ifVersion 0 means unconditional; otherwise EVersion on mismatch.
	Update(ctx context.Context, id uint64, typ idcodec.Type, ifVersion int64, mutate func(doc []byte) ([]byte, error)) (model.Object, error)
	// Delete soft-deletes the object and removes it from every list.
	Delete(ctx context.Context, id uint64, typ idcodec.Type, ifVersion int64) error

	// AddMapping adds from→to (and the inverse, if any); idempotent.
	// ENotFound when either object does not exist.
	AddMapping(ctx context.Context, m model.Mapping, from, to uint64) error
	// RemoveMapping removes from→to (and the inverse); idempotent.
	RemoveMapping(ctx context.Context, m model.Mapping, from, to uint64) error
	// List returns one page of the mapping, ordered by (sequence, to_id),
	// newest first when p.Desc, with the list's length in Count. ENotFound
	// when from is not live; EInvalid for a bad limit or cursor.
	List(ctx context.Context, m model.Mapping, from uint64, p model.Page) (model.List, error)
	// ListObjects is List plus the live objects of the page's entries, in
	// page order; entries whose object is gone are left out.
	ListObjects(ctx context.Context, m model.Mapping, from uint64, p model.Page) (model.List, []model.Object, error)
	// Count returns the number of entries of from's list.
	Count(ctx context.Context, m model.Mapping, from uint64) (int64, error)
	// Move puts item just before (before != 0) or just after (after != 0)
	// another entry of from's list, in the list's newest-first display order.
	// ENotFound when item or the anchor is not in the list.
	Move(ctx context.Context, m model.Mapping, from, item, before, after uint64) error
	// Feed returns the pins of the users that user follows, newest first.
	// ENotFound when user is not live.
	Feed(ctx context.Context, user uint64, p model.Page) (model.List, error)
	// Owners returns the owner of each live pin among pins (cache first,
	// MySQL for misses); unknown or deleted pins are absent from the map.
	Owners(ctx context.Context, pins []uint64) (map[uint64]uint64, error)

	// Ready checks every host and Redis; the error names what is down.
	Ready(ctx context.Context) []model.Health
	// ShardMapInfo describes the shard map in force, with each host's
	// health; never a DSN.
	ShardMapInfo(ctx context.Context) model.ShardMapInfo
}
