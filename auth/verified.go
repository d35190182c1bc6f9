package auth

import (
	"crypto/subtle"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// maxVerified bounds the tokens a verified cache holds: a server sees a
// few service tokens and, at most, its recently active users' tokens.
const maxVerified = 1 << 14

// verified remembers the principal of every token that verified, so the
// next request with the same token costs a keyed hash and a constant-time
// comparison instead of a SHA-256 (service tokens) or an HMAC (user
// tokens), and allocates nothing. A token that failed is never cached: an
// attacker cannot fill it. Entries are found by a hash under a random
// seed (hash/maphash) and confirmed by comparing the whole token with
// subtle.ConstantTimeCompare, so the time of a look-up tells nothing about
// how much of a cached token a guess shares. A user token's entry holds
// its expiry and is not served after it. When full, the cache is emptied
// and fills again from the next requests.
type verified struct {
	seed    maphash.Seed
	entries sync.Map // uint64 (the token's hash) → *verifiedToken
	n       atomic.Int64
}

type verifiedToken struct {
	token   string
	p       *Principal // shared by the requests of this token: never modified
	expires time.Time  // zero: none (a service token)
}

func newVerified() *verified { return &verified{seed: maphash.MakeSeed()} }

// get returns the principal of tok when tok verified before and, for a
// user token, has not expired at now.
func (v *verified) get(tok string, now time.Time) (*Principal, bool) {
	e, ok := v.entries.Load(maphash.String(v.seed, tok))
	if !ok {
		return nil, false
	}
	t := e.(*verifiedToken)
	if subtle.ConstantTimeCompare([]byte(t.token), []byte(tok)) != 1 {
		return nil, false // another token with the same hash: verify it in full
	}
	if !t.expires.IsZero() && !now.Before(t.expires) {
		return nil, false // expired: the full check says so
	}
	return t.p, true
}

// put remembers that tok verified as p, until expires when it is not zero.
func (v *verified) put(tok string, p *Principal, expires time.Time) {
	if v.n.Add(1) > maxVerified {
		v.entries.Clear()
		v.n.Store(1)
	}
	v.entries.Store(maphash.String(v.seed, tok), &verifiedToken{token: tok, p: p, expires: expires})
}
