// Package auth authenticates pinstore's callers and bounds their request
// rate. It knows two kinds of bearer token:
//
//   - Service tokens: opaque secrets whose SHA-256 (hex) the operator lists,
//     with a name and scopes, in a file (PINSTORE_TOKENS_FILE). The file
//     never holds a secret. A presented token is hashed and compared, in
//     constant time, with every listed hash.
//   - User tokens: "pu1.<user id>.<expiry unix seconds>.<signature>", the
//     signature being the base64url HMAC-SHA256 of everything before it
//     under the server secret (PINSTORE_TOKEN_SECRET). A user token acts
//     only as its user, with scopes read and write.
//
// A token that verified is remembered (verified.go), so a client's next
// request with it costs neither the SHA-256 nor the HMAC again.
//
// A Principal is who a request acts as. Its Name is the one thing about a
// token that may be logged: the service token's name or "user:<id>". No
// function of this package puts a token or a secret in an error or a log.
//
// The package holds no HTTP handlers; Middleware adapts an Authenticator
// to net/http, and leaves the shape of error responses to its caller.
package auth

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Scope is a right a principal holds. Scopes nest: admin implies write,
// and write implies read.
type Scope uint8

const (
	ScopeRead  Scope = 1 << iota // read any object or list
	ScopeWrite                   // create, edit and delete (services: for any user)
	ScopeAdmin                   // operator routes: /metrics, the shard map, repair, moves
)

// scopeNames are the scopes' names in token files.
var scopeNames = []struct {
	s    Scope
	name string
}{{ScopeRead, "read"}, {ScopeWrite, "write"}, {ScopeAdmin, "admin"}}

// ParseScope returns the scope named s ("read", "write" or "admin").
func ParseScope(s string) (Scope, bool) {
	for _, n := range scopeNames {
		if n.name == s {
			return n.s, true
		}
	}
	return 0, false
}

// ParseScopes parses a comma-separated list of scope names.
func ParseScopes(list string) (Scope, error) {
	var out Scope
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		s, ok := ParseScope(f)
		if !ok {
			return 0, fmt.Errorf("unknown scope %q (want read, write or admin)", f)
		}
		out |= s
	}
	return out, nil
}

// Names lists the scopes in s, in the order read, write, admin.
func (s Scope) Names() []string {
	var out []string
	for _, n := range scopeNames {
		if s&n.s != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

func (s Scope) String() string { return strings.Join(s.Names(), ",") }

// Kind says what kind of token authenticated a principal.
type Kind uint8

const (
	KindService Kind = iota + 1
	KindUser
)

// Principal is who a request acts as.
type Principal struct {
	// Name identifies the token in logs: the service token's name, or
	// "user:<id>" for a user token. Never a secret.
	Name   string
	Kind   Kind
	Scopes Scope
	// UserID is the user a user token acts as; 0 for service tokens.
	UserID uint64
}

// UserName is the Name of the principal of a user token for id.
func UserName(id uint64) string { return "user:" + strconv.FormatUint(id, 10) }

// Has reports whether p holds scope s, counting the scopes that imply it
// (admin ⊃ write ⊃ read).
func (p Principal) Has(s Scope) bool {
	switch s {
	case ScopeRead:
		return p.Scopes&(ScopeRead|ScopeWrite|ScopeAdmin) != 0
	case ScopeWrite:
		return p.Scopes&(ScopeWrite|ScopeAdmin) != 0
	case ScopeAdmin:
		return p.Scopes&ScopeAdmin != 0
	}
	return false
}

// IsUser reports whether p is a user token's principal, limited to acting
// as p.UserID.
func (p Principal) IsUser() bool { return p.Kind == KindUser }

// MayActAs reports whether p may write as user: a service principal with
// write may act for any user; a user principal only as itself.
func (p Principal) MayActAs(user uint64) bool {
	if !p.Has(ScopeWrite) {
		return false
	}
	if p.IsUser() {
		return user != 0 && p.UserID == user
	}
	return true
}

// ctxKey types this package's context keys.
type ctxKey int

const principalKey ctxKey = iota

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey, p)
}

// FromContext returns the principal stored by WithPrincipal or Middleware.
func FromContext(ctx context.Context) (Principal, bool) {
	switch p := ctx.Value(principalKey).(type) {
	case Principal:
		return p, true
	case *Principal: // Middleware's, shared by the requests of one token
		return *p, true
	}
	return Principal{}, false
}
