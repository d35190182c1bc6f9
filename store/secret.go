package store

import (
	"context"
	"time"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardsql"
	"github.com/pinstore/pinstore/store/topology"
)

// Secret boards: each pin's and section's document carries its board's
// secret flag, so
// every read that returns a pin can hide it without reading its board. A
// board's pins live on the board's shard, so the change of a board's flag
// rewrites the board and all its pins in one transaction (each pin's
// version rises and its cached copy goes, through the transaction's
// cache_outbox rows, like any update). The owner's counts of secret
// boards and pins (model.SecretCounted) change in the same transaction,
// since the owner, their boards and their pins share that shard too.
// Feeds hide such pins when they are read; nothing else is rewritten.

// setSecret gives board (its new document bd) and every live pin and
// section of it bd's flag, inside the board's update transaction, and
// moves them between its owner's counts of secret and other boards and
// pins.
func setSecret(ctx context.Context, tx *shardsql.Tx, op string, sh topology.Shard, board uint64, bd *model.BoardDoc, at time.Time) error {
	var pins int
	for _, m := range model.SecretCopies() {
		n, err := rewriteList(ctx, tx, op, sh, m, board, at, func(d model.Doc) bool {
			sd := d.(model.SecretDoc)
			if sd.IsSecret() == bd.Secret {
				return false
			}
			sd.SetSecret(bd.Secret)
			return true
		})
		if err != nil {
			return err
		}
		if m == model.BoardPins {
			pins = n
		}
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
