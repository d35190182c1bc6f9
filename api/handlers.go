package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

const (
	typeUser    = idcodec.TypeUser
	typeBoard   = idcodec.TypeBoard
	typePin     = idcodec.TypePin
	typeComment = idcodec.TypeComment
)

// collection is the path segment of a type's objects.
var collection = map[idcodec.Type]string{
	typeUser: "users", typeBoard: "boards", typePin: "pins", typeComment: "comments",
}

// objectPath is the canonical URL path of an object.
func objectPath(o model.Object) string {
	return "/v1/" + collection[o.Type] + "/" + idString(o.ID)
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

// The create handlers decode the body once and hand the document to the
// store, which validates it before any I/O (the one validator of a new
// document). A user token's user (actor) may only create as itself.

// createUser: POST /v1/users.
func (s *Server) createUser(w http.ResponseWriter, r *http.Request) error {
	var req createUserRequest
	if err := decodeBody(w, r, s.maxBody, &req); err != nil {
		return err
	}
	doc := model.UserDoc{Username: req.Username, DisplayName: req.DisplayName, Data: storedData(req.Data), Active: true}
	o, err := s.store.CreateUser(r.Context(), doc)
	if err != nil {
		return err
	}
	return writeObject(w, http.StatusCreated, o)
}

// requiredID parses a required ID field of a request body.
func requiredID(field, s string, want idcodec.Type) (uint64, error) {
	if s == "" {
		return 0, errorf(model.EInvalid, "%s is required", field)
	}
	return bodyID(field, s, want)
}

// createBoard: POST /v1/boards. A user token may only create boards for
// its own user (403).
func (s *Server) createBoard(w http.ResponseWriter, r *http.Request) error {
	var req createBoardRequest
	if err := decodeBody(w, r, s.maxBody, &req); err != nil {
		return err
	}
	owner, err := requiredID("owner_id", req.OwnerID, typeUser)
	if err != nil {
		return err
	}
	if err := actAs(r.Context(), owner, "a user token may only create boards for its own user"); err != nil {
		return err
	}
	doc := model.BoardDoc{OwnerID: model.ID(owner), Name: req.Name, Description: req.Description, Data: storedData(req.Data), Active: true}
	o, err := s.store.CreateBoard(r.Context(), doc)
	if err != nil {
		return err
	}
	return writeObject(w, http.StatusCreated, o)
}

// createPin: POST /v1/pins. The store sets the owner to the board's, and
// refuses (403) a user token's pin on another user's board, checked on the
// board row its transaction reads.
func (s *Server) createPin(w http.ResponseWriter, r *http.Request) error {
	var req createPinRequest
	if err := decodeBody(w, r, s.maxBody, &req); err != nil {
		return err
	}
	board, err := requiredID("board_id", req.BoardID, typeBoard)
	if err != nil {
		return err
	}
	doc := model.PinDoc{BoardID: model.ID(board), Link: req.Link, Description: req.Description, ImageURL: req.ImageURL, Data: storedData(req.Data), Active: true}
	o, err := s.store.CreatePin(r.Context(), doc, actor(r.Context()))
	if err != nil {
		return err
	}
	return writeObject(w, http.StatusCreated, o)
}

// createComment: POST /v1/pins/{id}/comments. A user token may only
// comment as its own user (403).
func (s *Server) createComment(w http.ResponseWriter, r *http.Request) error {
	pin, err := pathID(r, "id", typePin)
	if err != nil {
		return err
	}
	var req createCommentRequest
	if err := decodeBody(w, r, s.maxBody, &req); err != nil {
		return err
	}
	author, err := requiredID("author_id", req.AuthorID, typeUser)
	if err != nil {
		return err
	}
	if err := actAs(r.Context(), author, "a user token may only comment as its own user"); err != nil {
		return err
	}
	doc := model.CommentDoc{PinID: model.ID(pin), AuthorID: model.ID(author), Text: req.Text, Data: storedData(req.Data), Active: true}
	o, err := s.store.CreateComment(r.Context(), doc)
	if err != nil {
		return err
	}
	return writeObject(w, http.StatusCreated, o)
}

// getObject: GET /v1/{collection}/{id}.
func (s *Server) getObject(typ idcodec.Type) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id", typ)
		if err != nil {
			return err
		}
		o, err := s.store.Get(r.Context(), id, typ)
		if err != nil {
			return err
		}
		return writeObject(w, http.StatusOK, o)
	}
}

// patchObject: PATCH /v1/{collection}/{id}, a JSON merge patch applied to
// the stored document inside the store's transaction.
func (s *Server) patchObject(typ idcodec.Type) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		id, err := pathID(r, "id", typ)
		if err != nil {
			return err
		}
		ifVersion, err := parseIfMatch(r)
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
		o, err := s.store.Update(r.Context(), id, typ, ifVersion, func(doc []byte) ([]byte, error) {
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
		id, err := pathID(r, "id", typ)
		if err != nil {
			return err
		}
		ifVersion, err := parseIfMatch(r)
		if err != nil {
			return err
		}
		if err := s.store.Delete(r.Context(), id, typ, ifVersion); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
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
			if objs, err = s.store.GetMany(r.Context(), ids, typ); err != nil {
				return err
			}
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

// list: GET /v1/{collection}/{id}/{mapping}, one page of a mapping with
// the objects of its entries and the list's total count. An unknown or
// deleted owner of the list is 404 (the store's List checks it).
func (s *Server) list(m model.Mapping) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		from, err := pathID(r, "id", m.From())
		if err != nil {
			return err
		}
		p, err := ParsePage(r.URL.Query(), pageOptions{offset: true, order: true})
		if err != nil {
			return err
		}
		l, objs, err := s.store.ListObjects(r.Context(), m, from, p) // ENotFound when from is not live
		if err != nil {
			return err
		}
		return writeList(w, objs, l.NextCursor, &l.Count)
	}
}

// entryObjects fetches the live objects of a page's entries, in the page's
// order; entries whose object is gone are skipped.
func (s *Server) entryObjects(ctx context.Context, entries []model.Entry, typ idcodec.Type) ([]model.Object, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	ids := make([]uint64, len(entries))
	for i, e := range entries {
		ids[i] = e.To
	}
	return s.store.GetMany(ctx, ids, typ)
}

// feed: GET /v1/users/{id}/feed, the pins of followed users, newest first.
func (s *Server) feed(w http.ResponseWriter, r *http.Request) error {
	user, err := pathID(r, "id", typeUser)
	if err != nil {
		return err
	}
	p, err := ParsePage(r.URL.Query(), pageOptions{})
	if err != nil {
		return err
	}
	ctx := r.Context()
	l, err := s.store.Feed(ctx, user, p) // ENotFound when user is not live
	if err != nil {
		return err
	}
	objs, err := s.entryObjects(ctx, l.Entries, typePin)
	if err != nil {
		return err
	}
	return writeList(w, objs, l.NextCursor, nil)
}

// putMapping: PUT /v1/users/{id}/{mapping}/{target}; idempotent.
func (s *Server) putMapping(m model.Mapping, param string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		from, to, err := mappingIDs(r, m, param)
		if err != nil {
			return err
		}
		if err := s.store.AddMapping(r.Context(), m, from, to); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

// deleteMapping: DELETE /v1/users/{id}/{mapping}/{target}; idempotent.
func (s *Server) deleteMapping(m model.Mapping, param string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		from, to, err := mappingIDs(r, m, param)
		if err != nil {
			return err
		}
		if err := s.store.RemoveMapping(r.Context(), m, from, to); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

func mappingIDs(r *http.Request, m model.Mapping, param string) (from, to uint64, err error) {
	if from, err = pathID(r, "id", m.From()); err != nil {
		return 0, 0, err
	}
	if to, err = pathID(r, param, m.To()); err != nil {
		return 0, 0, err
	}
	if m == model.UserFollowing && from == to {
		return 0, 0, errorf(model.EInvalid, "a user cannot follow themselves")
	}
	return from, to, nil
}

// movePin: PUT /v1/boards/{id}/pins/{pin_id}/position.
func (s *Server) movePin(w http.ResponseWriter, r *http.Request) error {
	board, err := pathID(r, "id", typeBoard)
	if err != nil {
		return err
	}
	pin, err := pathID(r, "pin_id", typePin)
	if err != nil {
		return err
	}
	var req moveRequest
	if err := decodeBody(w, r, s.maxBody, &req); err != nil {
		return err
	}
	if (req.Before == nil) == (req.After == nil) {
		return errorf(model.EInvalid, "give exactly one of before and after")
	}
	var before, after uint64
	if req.Before != nil {
		before, err = requiredID("before", *req.Before, typePin)
	} else {
		after, err = requiredID("after", *req.After, typePin)
	}
	if err != nil {
		return err
	}
	if before == pin || after == pin {
		return errorf(model.EInvalid, "a pin cannot be moved next to itself")
	}
	if err := s.store.Move(r.Context(), model.BoardPins, board, pin, before, after); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
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
	owners := map[uint64]uint64{}
	if len(ids) > 0 {
		var err error
		if owners, err = s.store.Owners(r.Context(), ids); err != nil {
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

// decodeID: GET /v1/ids/{id}, pure arithmetic.
func (s *Server) decodeID(w http.ResponseWriter, r *http.Request) error {
	id, p, err := parseKnownID("id", chi.URLParam(r, "id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, IDInfo{ID: idString(id), Shard: p.Shard, Type: uint16(p.Type), TypeName: p.Type.String(), LocalID: p.Local})
}

// shardMap: GET /v1/admin/shard-map, the map this server routes by, its
// version and each host's health, so an operator can see that every server
// has picked up an edited map.
func (s *Server) shardMap(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusOK, s.store.ShardMapInfo(ctx))
}

// healthz: the process is up.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyTimeout bounds a readiness check.
const readyTimeout = 2 * time.Second

// readyz: every host and Redis answer.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	checks := s.store.Ready(ctx)
	resp := ReadyResponse{Status: "ok", Checks: checks}
	status := http.StatusOK
	for _, c := range checks {
		if !c.OK {
			resp.Status, status = "unavailable", http.StatusServiceUnavailable
		}
	}
	if resp.Checks == nil {
		resp.Checks = []model.Health{}
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeJSON(w, status, resp)
}

// serveMetrics: GET /metrics, the registry in Prometheus' text format.
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	s.prom.ServeHTTP(w, r)
	return nil
}

// openAPI serves the spec.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/yaml")
	_, _ = w.Write(s.spec)
	return nil
}

// docsPage serves the HTML rendering of the spec.
func (s *Server) docsPage(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	_, _ = w.Write(s.docs)
	return nil
}
