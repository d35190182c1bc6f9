package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/pinstore/pinstore/auth"
	"github.com/pinstore/pinstore/model"
)

// Idempotency keys (the IETF httpapi draft "The Idempotency-Key HTTP
// Header Field"). A POST that carries Idempotency-Key is done once per
// key: a retry with the same key, method, path and body within
// model.IdempotencyWindow answers the first response again, marked with
// Idempotent-Replayed: true; the same key with another request is 422
// idempotency_key_reused; a retry while the first still runs is 409
// idempotency_key_in_use. Keys belong to who sent them (keyScope). The
// store keeps each key on the shard its hash picks, its home, and the
// outcome with the object its create makes (store idempotency.go), so a
// key means the same on every route and shard.
const (
	IdempotencyKeyHeader = "Idempotency-Key"
	ReplayedHeader       = "Idempotent-Replayed"
)

// devScope is the scope of every key when the server runs without tokens.
const devScope = "dev"

// keyScope is the scope of p's keys: its service token's name, or its
// user token's user (every token of one user shares that user's keys).
func keyScope(p auth.Principal) string {
	if p.IsUser() {
		return "user:" + strconv.FormatUint(p.UserID, 10)
	}
	return "service:" + p.Name
}

// scopeOf is the scope of the request's keys: devScope with auth off.
func scopeOf(ctx context.Context) string {
	if sw, ok := ctx.Value(requestIDKey).(*statusWriter); ok && sw.guarded {
		return keyScope(sw.acting)
	}
	if sc, ok := ctx.Value(scopeKey).(string); ok {
		return sc
	}
	return devScope
}

// parseIdempotencyKey reads the header's key: one value, either the
// draft's structured-field string ("abc", with \" and \\ escapes) or the
// bare text, of 1 to model.MaxIdempotencyKey printable ASCII characters.
func parseIdempotencyKey(vs []string) (string, error) {
	if len(vs) != 1 {
		return "", errorf(model.EInvalid, "send one Idempotency-Key header")
	}
	k := vs[0]
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		var b strings.Builder
		for i := 1; i < len(k)-1; i++ {
			c := k[i]
			if c == '\\' && i+1 < len(k)-1 && (k[i+1] == '"' || k[i+1] == '\\') {
				i++
				c = k[i]
			} else if c == '"' || c == '\\' {
				return "", errorf(model.EInvalid, "Idempotency-Key is not a valid quoted string")
			}
			b.WriteByte(c)
		}
		k = b.String()
	}
	if !model.ValidIdempotencyKey(k) {
		return "", errorf(model.EInvalid, "Idempotency-Key must be 1 to %d printable ASCII characters", model.MaxIdempotencyKey)
	}
	return k, nil
}

// KeyUser records the use of a key by a request that creates nothing.
type KeyUser interface {
	// UseKey records that the request whose context carries the key
	// (model.IdempotencyOf) used it: the same key with another request,
	// on any POST route, is then EKeyReused, and EKeyReused is what UseKey
	// returns when the key was used with another request before. The
	// same request again simply runs again.
	UseKey(ctx context.Context) error
}

// storedResponse is the answer keys written by earlier versions kept
// (model.Outcome.Rendered): today's keep the created object itself, and
// the answer is rendered from it (replay).
type storedResponse struct {
	Status   int    `json:"status"`
	ETag     string `json:"etag"`
	Location string `json:"location"`
	Body     string `json:"body"` // a string, so it comes back byte for byte
}

// createdStatus is the status of a create's answer: 201 when it made the
// object, 200 when it found it made before.
func createdStatus(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}

// replay answers with the outcome of a key's first create, marked as
// replayed: the answer the create gave, rendered from the object as the
// create answered with it (writeObject, as the create's handler does).
func replay(w http.ResponseWriter, out model.Outcome) error {
	if out.Rendered == nil {
		w.Header().Set(ReplayedHeader, "true")
		return writeObject(w, createdStatus(out.Created), out.Object)
	}
	var sr storedResponse
	if err := json.Unmarshal(out.Rendered, &sr); err != nil || sr.Status == 0 {
		return errorf(model.EInternal, "the stored response of this Idempotency-Key does not decode")
	}
	h := w.Header()
	h.Set(ReplayedHeader, "true")
	if sr.ETag != "" {
		h.Set("ETag", sr.ETag)
	}
	if sr.Location != "" {
		h.Set("Location", sr.Location)
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(sr.Status)
	_, _ = io.WriteString(w, sr.Body+"\n")
	return nil
}

// idempotent serves a POST with its Idempotency-Key: absent, h runs as
// is; malformed, 400; otherwise h runs with the key in its context
// (model.WithIdempotency), and a create the store finds done before is
// answered from its stored outcome (replay). Routes that create nothing
// (a read by POST) record the key's use (KeyUser) once their input is
// valid, and run again when retried: they are safe to retry as they are.
func (s *Server) idempotent(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		vs := r.Header.Values(IdempotencyKeyHeader)
		if len(vs) == 0 {
			return h(w, r)
		}
		key, err := parseIdempotencyKey(vs)
		if err != nil {
			return err
		}
		// One byte over the limit is enough for h to refuse the body.
		body, err := io.ReadAll(io.LimitReader(r.Body, s.maxBody+1))
		if err != nil {
			return errorf(model.EInvalid, "could not read the request body")
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		keepBody(r, body)
		k := model.NewIdempotency(scopeOf(r.Context()), key, r.Method, r.URL.Path, body)
		if sw, ok := r.Context().Value(requestIDKey).(*statusWriter); ok {
			// Run again after a failover (failover.go): the claims it may
			// have written are its own.
			if sw.idem != nil && sw.idem.Hash == k.Hash {
				k.Claims = sw.idem.Claims
			}
			sw.idem = k
		}
		err = h(w, r.WithContext(model.WithIdempotency(r.Context(), k)))
		if errors.Is(err, model.ErrReplayed) {
			return replay(w, k.Replay)
		}
		return err
	}
}
