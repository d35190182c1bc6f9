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

// beginConsistency is the consistency token of a request to a /v1 route,
// which observe runs before anything else so the request's context is
// built once: it puts the token the request sent in ctx (an EInvalid
// error when it does not parse) and has sw set the response's token on a
// 2xx response when its status is written (statusWriter.beforeStatus):
// after the writes have committed. Other routes, and servers without
// Consistency, keep ctx as it is.
func (s *Server) beginConsistency(ctx context.Context, sw *statusWriter, r *http.Request) (context.Context, error) {
	if s.tokens == nil || !strings.HasPrefix(r.URL.Path, "/v1/") {
		return ctx, nil
	}
	write := r.Method != http.MethodGet && r.Method != http.MethodHead
	ctx, err := s.tokens.Begin(ctx, write, r.Header.Get(ConsistencyHeader))
	if err != nil {
		return ctx, model.Wrap("api.consistency", model.EInvalid, ConsistencyHeader+": "+err.Error(), err)
	}
	if !write && len(r.Header[ConsistencyHeader]) == 0 {
		// A read that sent no token commits nothing: its response
		// carries none.
		return ctx, nil
	}
	sw.beforeStatus = func(status int) {
		if status >= 200 && status < 300 {
			if t := s.tokens.Token(ctx); t != "" {
				sw.Header().Set(ConsistencyHeader, t)
			}
		}
	}
	return ctx, nil
}
