package replicas

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Token is a consistency token: for each host (as the shard map names
// it), the GTID position its master had reached once the writes the token
// covers had committed. A read of a host's shard that carries a token
// goes to a replica only once the replica has applied the token's
// position for that host (or is already past it). Positions stay
// meaningful across a failover: the promoted replica goes on numbering
// the same domain.
//
// Its text form, sent in the Pinstore-Consistency header, is
// host=position;host=position with hosts sorted ("a=0-1-812;b=0-2-77,1-2-4").
type Token map[string]Pos

// Limits of a token a client sends: more than this is refused.
const (
	maxTokenLen   = 4096
	maxTokenHosts = 256
)

var tokenHostRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// ParseToken reads a token's text form; "" is the empty token. A token
// that does not parse, names a host twice or is too long is an error
// saying why.
func ParseToken(s string) (Token, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if len(s) > maxTokenLen {
		return nil, fmt.Errorf("consistency token longer than %d bytes", maxTokenLen)
	}
	t := Token{}
	for part := range strings.SplitSeq(s, ";") {
		host, pos, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || !tokenHostRE.MatchString(host) {
			return nil, fmt.Errorf("consistency token part %q is not host=position", part)
		}
		if _, dup := t[host]; dup {
			return nil, fmt.Errorf("consistency token names host %q twice", host)
		}
		p, err := ParsePos(pos)
		if err != nil {
			return nil, fmt.Errorf("consistency token for host %q: %v", host, err)
		}
		t[host] = p
		if len(t) > maxTokenHosts {
			return nil, fmt.Errorf("consistency token names more than %d hosts", maxTokenHosts)
		}
	}
	return t, nil
}

// String is the token's text form.
func (t Token) String() string {
	hosts := slices.Sorted(maps.Keys(t))
	parts := make([]string, 0, len(hosts))
	for _, h := range hosts {
		if len(t[h]) > 0 {
			parts = append(parts, h+"="+t[h].String())
		}
	}
	return strings.Join(parts, ";")
}

// Merge is the token covering t and u.
func (t Token) Merge(u Token) Token {
	out := make(Token, len(t)+len(u))
	for h, p := range t {
		out[h] = slices.Clone(p)
	}
	for h, p := range u {
		out[h] = out[h].Merge(p)
	}
	return out
}

type ctxKey int

const (
	requestKey ctxKey = iota // *request: the token sent, the commits made
	masterKey                // reads must go to masters (cache fills)
)

// request is one client request's consistency: the token it sent and the
// positions of the commits it made.
type request struct {
	sent  Token
	reads bool // a read request: its reads may go to replicas
	mu    sync.Mutex
	made  Token
}

// WithRequest returns ctx for a client request that sent token sent (nil:
// none). Commits made under ctx are noted for the token the response
// carries (ResponseToken). Only a read request's reads (write false: a
// GET) may go to replicas, honouring the token; every read of a write
// request (a permission check, a read-modify-write) and of work outside
// a request goes to masters.
func WithRequest(ctx context.Context, sent Token, write bool) context.Context {
	if !write && len(sent) == 0 {
		return context.WithValue(ctx, requestKey, plainRead) // the common read: no allocation of its own
	}
	return context.WithValue(ctx, requestKey, &request{sent: sent, reads: !write})
}

// plainRead is every read request that sent no token: it notes no commit
// (a read makes none) and answers no token.
var plainRead = &request{reads: true}

// readsReplicas reports whether ctx's reads may go to replicas.
func readsReplicas(ctx context.Context) bool {
	r, _ := ctx.Value(requestKey).(*request)
	return r != nil && r.reads && ctx.Value(masterKey) == nil
}

// ResponseToken is the token a response to the request of ctx carries:
// the token it sent merged with the positions of the commits it made
// ("" when both are empty).
func ResponseToken(ctx context.Context) string {
	r, _ := ctx.Value(requestKey).(*request)
	if r == nil || r == plainRead {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.made) == 0 {
		return r.sent.String()
	}
	return r.sent.Merge(r.made).String()
}

// note records that the request of ctx committed on host's master at pos.
func note(ctx context.Context, host string, pos Pos) {
	r, _ := ctx.Value(requestKey).(*request)
	if r == nil || r == plainRead || len(pos) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.made == nil {
		r.made = Token{}
	}
	r.made[host] = r.made[host].Merge(pos)
}

// sentFor is the position the request of ctx asks host's replicas to have
// applied, if it sent one.
func sentFor(ctx context.Context, host string) (Pos, bool) {
	r, _ := ctx.Value(requestKey).(*request)
	if r == nil {
		return nil, false
	}
	p, ok := r.sent[host]
	return p, ok && len(p) > 0
}

// collecting reports whether ctx is a client request's, whose commits
// go into its response's token.
func collecting(ctx context.Context) bool {
	r, _ := ctx.Value(requestKey).(*request)
	return r != nil
}

// OnMaster returns ctx whose reads go to masters whatever the replicas
// could serve: the object cache's fills, so that the cache is never
// filled with a copy older than one it invalidated (package store).
func OnMaster(ctx context.Context) context.Context {
	return context.WithValue(ctx, masterKey, true)
}

// Tokens is the consistency token of HTTP requests (it satisfies
// api.Consistency): Begin parses the token a request sent and starts its
// request (WithRequest); Token is ResponseToken.
type Tokens struct{}

// Begin parses token and returns ctx for the request.
func (Tokens) Begin(ctx context.Context, write bool, token string) (context.Context, error) {
	t, err := ParseToken(token)
	if err != nil {
		return ctx, err
	}
	return WithRequest(ctx, t, write), nil
}

// Token is the response's token.
func (Tokens) Token(ctx context.Context) string { return ResponseToken(ctx) }
