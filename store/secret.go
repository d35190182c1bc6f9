package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// Secret boards: each pin's document carries its board's secret flag, so
// every read that returns a pin can hide it without reading its board. A
// board's pins live on the board's shard, so the change of a board's flag
// rewrites the board and all its pins in one transaction (each pin's
// version rises and its cached copy goes, through the transaction's
// cache_outbox rows, like any update). The owner's counts of secret
// boards and pins (model.SecretCounted) change in the same transaction,
// since the owner, their boards and their pins share that shard too.
// Feeds hide such pins when they are read; nothing else is rewritten.

// setSecret gives board (its new document bd) and every live pin of it
// bd's flag, inside the board's update transaction, and moves them
// between its owner's counts of secret and other boards and pins.
func setSecret(ctx context.Context, tx *shardsql.Tx, op string, sh topology.Shard, board uint64, bd *model.BoardDoc, at time.Time) error {
	pins, err := setPinsSecret(ctx, tx, op, sh, board, bd.Secret, at)
	if err != nil {
		return err
	}
	delta := int64(1)
	if !bd.Secret {
		delta = -1
	}
	owner := uint64(bd.OwnerID)
	if err := shardsql.AddSecret(ctx, tx, sh.DB, model.UserBoards, owner, delta); err != nil {
		return err
	}
	return shardsql.AddSecret(ctx, tx, sh.DB, model.UserPins, owner, delta*int64(pins))
}

// setPinsSecret gives every live pin of board the flag secret, inside the
// board's update transaction: one statement reads the list, one per 500
// pins locks and reads them, one per 500 writes those that change. It
// returns how many changed.
func setPinsSecret(ctx context.Context, tx *shardsql.Tx, op string, sh topology.Shard, board uint64, secret bool, at time.Time) (int, error) {
	entries, err := shardsql.ReadAllEntries(ctx, tx, sh.DB, model.BoardPins, board)
	if err != nil || len(entries) == 0 {
		return 0, err
	}
	locals := make([]uint64, len(entries))
	for i, e := range entries {
		locals[i] = idcodec.LocalOf(e.To)
	}
	docs, err := shardsql.LockDocs(ctx, tx, sh.DB, idcodec.TypePin, locals)
	if err != nil {
		return 0, err
	}
	changed := make(map[uint64][]byte, len(docs))
	for local, raw := range docs {
		d, err := model.DecodeDoc(idcodec.TypePin, raw)
		if err != nil {
			return 0, model.Wrap(op, model.EInternal, "", err)
		}
		pin := d.(*model.PinDoc)
		if !pin.Active || pin.Secret == secret {
			continue // deleted (and leaving the list), or already so
		}
		pin.Secret = secret
		if changed[local], err = json.Marshal(pin); err != nil {
			return 0, model.Wrap(op, model.EInternal, "", err)
		}
	}
	return len(changed), shardsql.UpdateDocs(ctx, tx, sh.DB, idcodec.TypePin, changed, at)
}
