package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/pinstore/pinstore/model"
)

// ConsistencyHeader carries a consistency token: in a response, what the
// request wrote (merged with the token it sent); in a request, what its
// reads must not be older than (openapi.yaml, Consistency).
const ConsistencyHeader = "Pinstore-Consistency"

// Consistency reads a request's consistency token into its context and
// gives the token its response carries (package store/replicas implements
// it; cmd wires it in Config.Consistency).
type Consistency interface {
	// Begin returns ctx for a request that sent token (may be ""); write
	// is false for a GET or HEAD, whose reads may go to replicas. A token
	// that does not parse is an error saying why.
	Begin(ctx context.Context, write bool, token string) (context.Context, error)
	// Token is the token the response to the request of ctx carries (""
	// for none).
	Token(ctx context.Context) string
}

// consistency is the middleware of consistency tokens on /v1 routes: it
// puts the request's token in its context (400 when it does not parse)
// and sets the response's token on a 2xx response when its status is
// written (statusWriter.beforeStatus): after the writes have committed.
func (s *Server) consistency(next http.Handler) http.Handler {
	if s.tokens == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/") {
			next.ServeHTTP(w, r)
			return
		}
		write := r.Method != http.MethodGet && r.Method != http.MethodHead
		ctx, err := s.tokens.Begin(r.Context(), write, r.Header.Get(ConsistencyHeader))
		if err != nil {
			writeError(w, r, s.logger, model.Wrap("api.consistency", model.EInvalid, ConsistencyHeader+": "+err.Error(), err))
			return
		}
		if !write && len(r.Header[ConsistencyHeader]) == 0 {
			// A read that sent no token commits nothing: its response
			// carries none.
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		sw := recorder(w)
		sw.beforeStatus = func(status int) {
			if status >= 200 && status < 300 {
				if t := s.tokens.Token(ctx); t != "" {
					sw.Header().Set(ConsistencyHeader, t)
				}
			}
		}
		next.ServeHTTP(sw, r.WithContext(ctx))
	})
}
