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
// cache_outbox rows, like any update). Feeds hide such pins when they are
// read; nothing else is rewritten.

// setPinsSecret gives every live pin of board the flag secret, inside the
// board's update transaction: one statement reads the list, one per 500
// pins locks and reads them, one per 500 writes those that change.
func setPinsSecret(ctx context.Context, tx *shardsql.Tx, op string, sh topology.Shard, board uint64, secret bool, at time.Time) error {
	entries, err := shardsql.ReadAllEntries(ctx, tx, sh.DB, model.BoardPins, board)
	if err != nil || len(entries) == 0 {
		return err
	}
	locals := make([]uint64, len(entries))
	for i, e := range entries {
		locals[i] = idcodec.LocalOf(e.To)
	}
	docs, err := shardsql.LockDocs(ctx, tx, sh.DB, idcodec.TypePin, locals)
	if err != nil {
		return err
	}
	changed := make(map[uint64][]byte, len(docs))
	for local, raw := range docs {
		d, err := model.DecodeDoc(idcodec.TypePin, raw)
		if err != nil {
			return model.Wrap(op, model.EInternal, "", err)
		}
		pin := d.(*model.PinDoc)
		if !pin.Active || pin.Secret == secret {
			continue // deleted (and leaving the list), or already so
		}
		pin.Secret = secret
		if changed[local], err = json.Marshal(pin); err != nil {
			return model.Wrap(op, model.EInternal, "", err)
		}
	}
	return shardsql.UpdateDocs(ctx, tx, sh.DB, idcodec.TypePin, changed, at)
}
