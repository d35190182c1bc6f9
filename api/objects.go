package api

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// The object routes' needs: creating, reading, patching and deleting one
// object (or a few, by id). Every method returns *model.Error values whose
// code the api maps to an HTTP status in one place (errors.go).

// Creator creates objects. Each create validates its document before any
// I/O (EInvalid, ETooLarge), the one validation a new document gets.
type Creator interface {
	// Create places a new object of typ, as typ's declaration says: a
	// user on a random open shard (its username claimed); any other type
	// under its parent (model.ObjectType.Parent: a board under its owner,
	// a pin under its board, the board's owner its owner, a comment
	// under its pin, a section last among its board's), taking what it
	// inherits from the parent as the create's transaction reads it (a
	// pin's or section's owner and secret flag). A pin also goes in its
	// section, its followers' feeds and the owner cache. ENotFound when
	// the parent (or a comment's author) is not live, or is another
	// user's secret board and actor is not 0; EForbidden when actor is
	// not 0 and may not create there (another user's public board).
	Create(ctx context.Context, typ idcodec.Type, doc model.Doc, actor uint64) (model.Object, error)
	// SavePin saves the pin source to board: a new pin there, owned by
	// the board's owner, naming source in saved_from; created is false
	// when the board already held a save of source (obj is that pin).
	// ENotFound when either is not live, or source is on a secret board
	// of another user than the board's owner; EForbidden when actor is
	// not 0 and the board is not actor's.
	SavePin(ctx context.Context, source, board, actor uint64) (obj model.Object, created bool, err error)
}

// ObjectReader reads live objects by id. The permissions read boards and
// comments with Get too (authz.go), and the feed its pins with GetMany.
type ObjectReader interface {
	// Get returns a live object of type typ. ENotFound when it is unknown,
	// deleted, or id is of another type; EInvalid when id is malformed or
	// its shard is outside the configured range.
	Get(ctx context.Context, id uint64, typ idcodec.Type) (model.Object, error)
	// GetMany returns the live objects among ids, in request order;
	// unknown, deleted or wrong-type ids are left out. One query per shard.
	GetMany(ctx context.Context, ids []uint64, typ idcodec.Type) ([]model.Object, error)
	// GetUserByUsername returns the live user of that name, in any case:
	// one index read and the user's. ENotFound when no user has it.
	GetUserByUsername(ctx context.Context, name string) (model.Object, error)
}

// ObjectWriter changes existing objects.
type ObjectWriter interface {
	// Update reads the document, calls mutate with it inside the shard
	// transaction, and writes what mutate returns with version+1.
	// ifVersion 0 means unconditional; otherwise EVersion on mismatch.
	Update(ctx context.Context, id uint64, typ idcodec.Type, ifVersion int64, mutate func(doc []byte) ([]byte, error)) (model.Object, error)
	// Delete soft-deletes the object and removes it from every list.
	Delete(ctx context.Context, id uint64, typ idcodec.Type, ifVersion int64) error
	// SetPinSection puts the pin in section (0: in none), a section of
	// its board, in one transaction; where it already is changes
	// nothing. ENotFound when the pin or section is not live; EInvalid
	// when section is another board's.
	SetPinSection(ctx context.Context, pin, section uint64) (model.Object, error)
}

const (
	typeUser    = idcodec.TypeUser
	typeBoard   = idcodec.TypeBoard
	typePin     = idcodec.TypePin
	typeComment = idcodec.TypeComment
	typeSection = idcodec.TypeSection
)

// collection is the path segment of typ's objects, as its declaration
// names it (model.ObjectType.Collection); "" for an undeclared type.
func collection(typ idcodec.Type) string {
	if t, ok := model.TypeOf(typ); ok {
		return t.Collection
	}
	return ""
}

// objectPath is the canonical URL path of an object.
func objectPath(o model.Object) string {
	return "/v1/" + collection(o.Type) + "/" + idString(o.ID)
}

// writeObject writes one object with its ETag; on 201 also its Location.
func writeObject(w http.ResponseWriter, status int, o model.Object) error {
	w.Header().Set("ETag", etag(o.Version))
	if status == http.StatusCreated {
		w.Header().Set("Location", objectPath(o))
	}
	return writeBuilt(w, status, func(b []byte) ([]byte, error) {
		b, err := appendObject(b, o)
		return append(b, '\n'), err
	})
}

// requiredID parses a required ID field of a request body.
func requiredID(field, s string, want idcodec.Type) (uint64, error) {
	if s == "" {
		return 0, errorf(model.EInvalid, "%s is required", field)
	}
	return bodyID(field, s, want)
}

// getObject: GET /v1/{collection}/{id}.
func (s *Server) getObject(typ idcodec.Type) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id", typ)
		if err != nil {
			return err
		}
		o, err := s.getSeen(r.Context(), id, typ) // the route's pathObjects check read it for a user token
		if err != nil {
			return err
		}
		return writeObject(w, http.StatusOK, shownTo(o, actor(r.Context())))
	}
}

// userByUsername: GET /v1/usernames/{username}.
func (s *Server) userByUsername(w http.ResponseWriter, r *http.Request) error {
	o, err := s.objects.GetUserByUsername(r.Context(), chi.URLParam(r, "username"))
	if err != nil {
		return err
	}
	return writeObject(w, http.StatusOK, shownTo(o, actor(r.Context())))
}

// patchObject: PATCH /v1/{collection}/{id}, a JSON merge patch applied to
// the stored document inside the store's transaction.
func (s *Server) patchObject(typ idcodec.Type) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		id, ifVersion, err := versionedID(r, typ)
		if err != nil {
			return err
		}
		patch, err := readBody(w, r, s.maxBody, "application/merge-patch+json", "application/json")
		if err != nil {
			return err
		}
		// Refuse bad JSON and read-only or unknown fields before any I/O.
		var members map[string]json.RawMessage
		if err := decodeStrict(patch, &members); err != nil {
			return err
		}
		if err := model.CheckPatch(typ, patch); err != nil {
			return err
		}
		o, err := s.edits.Update(r.Context(), id, typ, ifVersion, func(doc []byte) ([]byte, error) {
			return model.PatchDoc(typ, doc, patch, s.limits)
		})
		if err != nil {
			return err
		}
		return writeObject(w, http.StatusOK, o)
	}
}

// deleteObject: DELETE /v1/{collection}/{id}.
func (s *Server) deleteObject(typ idcodec.Type) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		id, ifVersion, err := versionedID(r, typ)
		if err != nil {
			return err
		}
		return noContent(w, s.edits.Delete(r.Context(), id, typ, ifVersion))
	}
}

// versionedID reads the path's {id}, of type typ, and the version
// If-Match expects (parseIfMatch), in that order.
func versionedID(r *http.Request, typ idcodec.Type) (id uint64, ifVersion int64, err error) {
	if id, err = pathID(r, "id", typ); err != nil {
		return 0, 0, err
	}
	if ifVersion, err = parseIfMatch(r); err != nil {
		return 0, 0, err
	}
	return id, ifVersion, nil
}

// getMany: GET /v1/{collection}?ids=a,b,c.
func (s *Server) getMany(typ idcodec.Type) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		raw, _, err := queryValue(r.URL.Query(), "ids")
		if err != nil {
			return err
		}
		ids, order, err := parseIDList(raw, MaxMultiGet, typ)
		if err != nil {
			return err
		}
		var objs []model.Object
		if len(ids) > 0 {
			if objs, err = s.objects.GetMany(r.Context(), ids, typ); err != nil {
				return err
			}
			objs = shownAll(visible(objs, actor(r.Context())), actor(r.Context()))
		}
		byID := make(map[string]model.Object, len(objs))
		for _, o := range objs {
			byID[idString(o.ID)] = o
		}
		found := make([]model.Object, 0, len(objs))
		notFound := []string{}
		for _, key := range order {
			o, ok := byID[key]
			if !ok { // unknown, deleted, or of another type
				notFound = append(notFound, key)
				continue
			}
			found = append(found, o)
		}
		return writeBuilt(w, http.StatusOK, func(b []byte) ([]byte, error) {
			b, err := appendItems(append(b, '{'), found)
			if err != nil {
				return b, err
			}
			if b, err = appendJSON(append(b, `,"not_found":`...), notFound); err != nil {
				return b, err
			}
			return append(b, '}', '\n'), nil
		})
	}
}
