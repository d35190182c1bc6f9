package store

import (
	"context"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// Owners returns the owner of each live pin among pins: from the Redis
// cache, and for misses from MySQL (one query per host), filling the
// cache. Unknown or deleted pins are absent from the result.
func (s *Objects) Owners(ctx context.Context, pins []uint64) (map[uint64]uint64, error) {
	const op = "store.Owners"
	for _, id := range pins {
		if _, _, err := s.route(op, id, idcodec.TypePin); err != nil {
			return nil, err
		}
	}
	return s.owners.Lookup(ctx, pins, s.loadOwners)
}

// loadOwners reads the owners of live pins from MySQL.
func (s *Objects) loadOwners(ctx context.Context, pins []uint64) (map[uint64]uint64, error) {
	objs, err := s.objectsByID(ctx, pins, idcodec.TypePin)
	if err != nil {
		return nil, err
	}
	out := make(map[uint64]uint64, len(objs))
	for _, o := range objs {
		d, err := model.DecodeDoc(idcodec.TypePin, o.Doc)
		if err != nil {
			return nil, model.Wrap("store.loadOwners", model.EInternal, "", err)
		}
		out[o.ID] = uint64(d.(*model.PinDoc).OwnerID)
	}
	return out, nil
}
