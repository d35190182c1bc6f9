package model

import (
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"time"
)

// Idempotency keys (the Idempotency-Key header of a POST create). A key
// is the client's, scoped to who sent it: the same key from another
// principal is another key.
const (
	// MaxIdempotencyKey is the longest key accepted, in bytes.
	MaxIdempotencyKey = 255
	// IdempotencyWindow is how long a key's answer is kept: a retry
	// within it is answered with the first response; after it, the key
	// is new again.
	IdempotencyWindow = 24 * time.Hour
	// IdempotencyLease is how long a pending key (its first request still
	// running, or dead) refuses retries before a retry may take it over.
	IdempotencyLease = 30 * time.Second
)

// Error codes of idempotency keys.
const (
	EKeyInUse  = "idempotency_key_in_use" // the key's first request is still running
	EKeyReused = "idempotency_key_reused" // the key was used with another request
)

// Idempotency is a create's idempotency key, as the api hands it to the
// store with the request's context (WithIdempotency).
type Idempotency struct {
	// Hash identifies the key: SHA-256 of scope, a NUL byte, and the key.
	Hash [32]byte
	// Fingerprint identifies the request: SHA-256 of its method, path and
	// body. The same key with another fingerprint is EKeyReused.
	Fingerprint [32]byte
	// Replay is set by the store, with ErrReplayed, to the outcome kept
	// for the key when the request was made before.
	Replay Outcome
	// Claims are the claim tokens this request may have left for the key
	// (a claim whose insert was in doubt, or that its failed create could
	// not release): the same request, run again after its master failed
	// over, finds such a claim its own and takes it over at once instead
	// of waiting out its lease.
	Claims []uint64
}

// Claimed records that this request may have written claim.
func (k *Idempotency) Claimed(claim uint64) { k.Claims = append(k.Claims, claim) }

// Owns reports whether claim is one this request may have written.
func (k *Idempotency) Owns(claim uint64) bool { return slices.Contains(k.Claims, claim) }

// Outcome is what a create did, as its idempotency key keeps it, in the
// create's transaction: the object it answered with, as it was then, and
// whether it made it (Created false: it found the object made before, as
// a second save of a pin to a board does). The api renders the answer
// from it, the first time and on every replay alike.
type Outcome struct {
	Object  Object
	Created bool
	// Rendered, when not nil, is the answer itself, as keys written by an
	// earlier version kept it (the api's format); Object is then empty.
	Rendered []byte
}

// NewIdempotency returns the key named key for scope, for a request
// whose method, path and body are given.
func NewIdempotency(scope, key, method, path string, body []byte) *Idempotency {
	id := &Idempotency{}
	h := sha256.New()
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write([]byte(key))
	h.Sum(id.Hash[:0])
	h.Reset()
	h.Write([]byte(method + " " + path + "\n"))
	h.Write(body)
	h.Sum(id.Fingerprint[:0])
	return id
}

// ValidIdempotencyKey reports whether key may be an idempotency key: 1 to
// MaxIdempotencyKey bytes of printable ASCII (space to '~').
func ValidIdempotencyKey(key string) bool {
	if key == "" || len(key) > MaxIdempotencyKey {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// ErrReplayed is what a create returns when its key was used before by
// the same request: Idempotency.Replay holds the first create's outcome.
var ErrReplayed = errors.New("the request was made before; its response is replayed")

type idemKey struct{}

// WithIdempotency returns ctx carrying the create's key.
func WithIdempotency(ctx context.Context, k *Idempotency) context.Context {
	return context.WithValue(ctx, idemKey{}, k)
}

// IdempotencyOf returns the key ctx carries, or nil.
func IdempotencyOf(ctx context.Context) *Idempotency {
	k, _ := ctx.Value(idemKey{}).(*Idempotency)
	return k
}
