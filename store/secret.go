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
// board's update transaction.
func setPinsSecret(ctx context.Context, tx *shardsql.Tx, op string, sh topology.Shard, board uint64, secret bool, at time.Time) error {
	entries, err := shardsql.ReadAllEntries(ctx, tx, sh.DB, model.BoardPins, board)
	if err != nil {
		return err
	}
	for _, e := range entries {
		local := idcodec.LocalOf(e.To)
		_, d, err := readLive(ctx, tx, op, sh, idcodec.TypePin, local, shardsql.ForUpdate)
		if model.IsCode(err, model.ENotFound) {
			continue // deleted, and leaving the list in this transaction's wake
		}
		if err != nil {
			return err
		}
		pin := d.(*model.PinDoc)
		if pin.Secret == secret {
			continue
		}
		pin.Secret = secret
		b, err := json.Marshal(pin)
		if err != nil {
			return model.Wrap(op, model.EInternal, "", err)
		}
		if err := shardsql.UpdateObject(ctx, tx, sh.DB, idcodec.TypePin, local, b, at); err != nil {
			return err
		}
	}
	return nil
}
