package auth

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pinstore/pinstore/model"
)

// Config configures an Authenticator. At least one of Service and
// UserSecret must be set.
type Config struct {
	// Service are the service tokens (from PINSTORE_TOKENS_FILE).
	Service *ServiceTokens
	// UserSecret signs user tokens (PINSTORE_TOKEN_SECRET); nil disables
	// user tokens.
	UserSecret []byte
	// Rate is the requests per second each token may make (<= 0: no
	// limit), Burst the bucket size.
	Rate  float64
	Burst int
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Authenticator turns an Authorization header into a Principal and rate
// limits principals.
type Authenticator struct {
	state   atomic.Pointer[authState] // swapped whole by SetServiceTokens
	signer  *Signer
	limiter *Limiter
	now     func() time.Time
}

// authState is the service tokens in force and the tokens verified since
// they were put in force (verified.go), which go with them.
type authState struct {
	service  *ServiceTokens
	verified *verified
}

func (a *Authenticator) setService(t *ServiceTokens) {
	a.state.Store(&authState{service: t, verified: newVerified()})
}

// ErrNoTokens: neither service tokens nor a user token secret.
var ErrNoTokens = errors.New("auth: no tokens configured (set PINSTORE_TOKENS_FILE and/or PINSTORE_TOKEN_SECRET)")

// New builds an Authenticator. ErrNoTokens when cfg names no tokens at
// all, ErrWeakSecret for a short secret.
func New(cfg Config) (*Authenticator, error) {
	a := &Authenticator{now: cfg.Now}
	a.setService(cfg.Service)
	if a.now == nil {
		a.now = time.Now
	}
	if cfg.UserSecret != nil {
		s, err := NewSigner(cfg.UserSecret)
		if err != nil {
			return nil, err
		}
		a.signer = s
	}
	if cfg.Service.Len() == 0 && a.signer == nil {
		return nil, ErrNoTokens
	}
	a.limiter = NewLimiter(cfg.Rate, cfg.Burst, a.now)
	return a, nil
}

// Authenticate returns the principal of an Authorization header value
// ("Bearer <token>"). Errors are *model.Error with code EUnauthorized and
// a client-safe message that holds no part of the token.
func (a *Authenticator) Authenticate(header string) (Principal, error) {
	p, err := a.authenticate(header, a.now())
	if err != nil {
		return Principal{}, err
	}
	return *p, nil
}

// authenticate is Authenticate at now, with the principal shared by every
// request of the token (never to be modified).
func (a *Authenticator) authenticate(header string, now time.Time) (*Principal, error) {
	const op = "auth.Authenticate"
	tok, ok := bearer(header)
	if !ok {
		if header == "" {
			return nil, model.Wrap(op, model.EUnauthorized, "a bearer token is required (Authorization: Bearer <token>)", nil)
		}
		return nil, model.Wrap(op, model.EUnauthorized, "the Authorization header must be \"Bearer <token>\"", nil)
	}
	st := a.state.Load()
	if p, ok := st.verified.get(tok, now); ok {
		return p, nil
	}
	if strings.HasPrefix(tok, UserTokenPrefix) {
		if a.signer == nil {
			return nil, model.Wrap(op, model.EUnauthorized, "invalid token", ErrNoSecret)
		}
		c, err := a.signer.Verify(tok, now)
		if err != nil {
			msg := "invalid token"
			if errors.Is(err, ErrExpired) {
				msg = "the token has expired"
			}
			return nil, model.Wrap(op, model.EUnauthorized, msg, err)
		}
		p := &Principal{Name: UserName(c.UserID), Kind: KindUser, Scopes: ScopeRead | ScopeWrite, UserID: c.UserID}
		st.verified.put(tok, p, c.Expires)
		return p, nil
	}
	t, ok := st.service.Lookup(tok)
	if !ok {
		return nil, model.Wrap(op, model.EUnauthorized, "invalid token", ErrBadToken)
	}
	p := &Principal{Name: t.Name, Kind: KindService, Scopes: t.Scopes}
	st.verified.put(tok, p, time.Time{})
	return p, nil
}

// bearer extracts the token of "Bearer <token>" (scheme case-insensitive,
// RFC 6750 token68 characters only).
func bearer(h string) (string, bool) {
	const scheme = "bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", false
	}
	tok := strings.TrimLeft(h[len(scheme):], " ")
	if tok == "" || len(tok) > maxTokenLen {
		return "", false
	}
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' || c == '=') {
			return "", false
		}
	}
	return tok, true
}

// RateLimitError is the error of a request over its token's rate. It
// carries code ERateLimited and how long to wait.
type RateLimitError struct {
	Err  *model.Error
	Wait time.Duration
}

func (e *RateLimitError) Error() string { return e.Err.Error() }
func (e *RateLimitError) Unwrap() error { return e.Err }

// RetryAfter is the Retry-After value, in whole seconds (at least 1).
func (e *RateLimitError) RetryAfter() string { return strconv.Itoa(RetryAfterSeconds(e.Wait)) }

// Allow takes one request from p's budget; a *RateLimitError when it is
// spent.
func (a *Authenticator) Allow(p Principal) error { return a.allow(p.Name, a.now()) }

func (a *Authenticator) allow(name string, now time.Time) error {
	ok, wait := a.limiter.allow(name, now)
	if ok {
		return nil
	}
	return &RateLimitError{Err: model.Wrap("auth.Allow", model.ERateLimited, "too many requests for this token; retry after Retry-After seconds", nil), Wait: wait}
}

// A PrincipalRecorder is a ResponseWriter that keeps a request's
// principal itself (an HTTP layer's record of the request), so Middleware
// hands it the principal instead of copying the request to put it in the
// context.
type PrincipalRecorder interface {
	RecordPrincipal(p *Principal) // p is shared by the token's requests: never modify it
}

// Middleware authenticates every request and limits its rate. An
// authenticated request continues with its Principal given to the
// ResponseWriter when it is a PrincipalRecorder, else in the context
// (FromContext). Otherwise fail answers it: with a *model.Error of code
// EUnauthorized (the middleware has set WWW-Authenticate: Bearer) or a
// *RateLimitError (code ERateLimited; the principal is recorded as for an
// authenticated request). fail decides the shape of the response.
func Middleware(a *Authenticator, fail func(w http.ResponseWriter, r *http.Request, err error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			now := a.now() // one clock read for the token's expiry and its rate
			p, err := a.authenticate(r.Header.Get("Authorization"), now)
			if err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="pinstore"`)
				fail(w, r, err)
				return
			}
			if rec, ok := w.(PrincipalRecorder); ok {
				rec.RecordPrincipal(p)
			} else {
				r = r.WithContext(context.WithValue(r.Context(), principalKey, p))
			}
			if err := a.allow(p.Name, now); err != nil {
				fail(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// TokenSyntaxOK reports whether tok can travel as a bearer token: 1 to 512
// characters of A-Z a-z 0-9 - . _ ~ + / =.
func TokenSyntaxOK(tok string) bool {
	got, ok := bearer("Bearer " + tok)
	return ok && got == tok
}
