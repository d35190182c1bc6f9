package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/pinstore/pinstore/model"
)

// OwnerCache answers who owns a pin: POST /v1/pins/owners, and the
// permission of a user token's write to a pin (asEditor, authz.go).
type OwnerCache interface {
	// Owners returns the owner of each live pin among pins (cache first,
	// MySQL for misses); unknown or deleted pins are absent from the map.
	Owners(ctx context.Context, pins []uint64) (map[uint64]uint64, error)
}

// owners: POST /v1/pins/owners. Every entry is checked before anything is
// looked up.
func (s *Server) owners(w http.ResponseWriter, r *http.Request) error {
	var req ownersRequest
	if err := decodeBody(w, r, s.maxBody, &req); err != nil {
		return err
	}
	if req.IDs == nil {
		return errorf(model.EInvalid, "ids is required")
	}
	if len(req.IDs) > MaxOwners {
		return errorf(model.EInvalid, "ids holds %d entries; at most %d are allowed", len(req.IDs), MaxOwners)
	}
	ids := make([]uint64, 0, len(req.IDs))
	order := make([]string, 0, len(req.IDs))
	seen := make(map[uint64]bool, len(req.IDs))
	for i, raw := range req.IDs {
		str, ok := digitString(raw)
		if !ok {
			if err := json.Unmarshal(raw, &str); err != nil {
				return errorf(model.EInvalid, "ids[%d] must be a decimal string, not %s", i, model.QuoteInput(string(raw)))
			}
		}
		id, err := ParseID("ids", str, typePin)
		if model.IsCode(err, model.ENotFound) {
			return errorf(model.EInvalid, "ids[%d] %s is not a pin id", i, model.QuoteInput(str))
		}
		if err != nil {
			_, err = ParseID("ids["+strconv.Itoa(i)+"]", str, typePin) // the same error, naming the entry
			return err
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
			order = append(order, str)
		}
	}
	if model.IdempotencyOf(r.Context()) != nil {
		if err := s.keys.UseKey(r.Context()); err != nil {
			return err
		}
	}
	owners := map[uint64]uint64{}
	if len(ids) > 0 {
		var err error
		if owners, err = s.ownerCache.Owners(r.Context(), ids); err != nil {
			return err
		}
		if err := s.hideSecretOwners(r.Context(), owners); err != nil {
			return err
		}
	}
	// An OwnersResponse, written in request order: every key is an ID
	// that ParseID accepted, so decimal digits that need no escaping.
	return writeBuilt(w, http.StatusOK, func(b []byte) ([]byte, error) {
		b = append(b, `{"owners":{`...)
		first := true
		for i, id := range ids {
			if owner, ok := owners[id]; ok {
				if !first {
					b = append(b, ',')
				}
				first = false
				b = append(append(append(b, '"'), order[i]...), `":"`...)
				b = append(strconv.AppendUint(b, owner, 10), '"')
			}
		}
		b = append(b, `},"not_found":[`...)
		first = true
		for i, id := range ids {
			if _, ok := owners[id]; !ok {
				if !first {
					b = append(b, ',')
				}
				first = false
				b = append(append(append(b, '"'), order[i]...), '"')
			}
		}
		return append(b, "]}\n"...), nil
	})
}

// digitString returns the content of a JSON string literal made only of
// decimal digits, the form every ID takes, without a full JSON decode;
// anything else is left to encoding/json.
func digitString(raw json.RawMessage) (string, bool) {
	if len(raw) < 3 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	for _, c := range raw[1 : len(raw)-1] {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return string(raw[1 : len(raw)-1]), true
}

// hideSecretOwners drops from owners the pins a user token may not see
// (secret pins of others), read only for the pins not its user's own.
func (s *Server) hideSecretOwners(ctx context.Context, owners map[uint64]uint64) error {
	viewer := actor(ctx)
	if viewer == 0 {
		return nil
	}
	var others []uint64
	for pin, owner := range owners {
		if owner != viewer {
			others = append(others, pin)
		}
	}
	if len(others) == 0 {
		return nil
	}
	seen, err := s.visibleIDs(ctx, others, typePin, viewer)
	if err != nil {
		return err
	}
	for _, pin := range others {
		if !seen[pin] {
			delete(owners, pin)
		}
	}
	return nil
}
