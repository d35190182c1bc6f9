// Package api is pinstore's HTTP layer: the routes of REST API v1, their
// payload types, the one map from error code to HTTP status, and the
// middleware every request passes through.
//
// Invariants:
//   - Every route lives in routes(), under /v1 except the operational ones
//     (/healthz, /readyz, /metrics, /openapi.yaml, /docs); openapi.yaml
//     describes exactly these routes, and a test proves it.
//   - IDs travel as decimal strings. A malformed ID is 400 invalid_argument;
//     a well-formed ID of another type than the route's is 404 not_found.
//   - Every error is an RFC 9457 problem document whose detail is
//     client-safe (model.ErrorMessage); 5xx causes are logged, not shown.
//   - Handlers are thin: they parse, call one or a few Store methods, and
//     write. Transactions belong to the store.
package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	pinstore "github.com/pinstore/pinstore"
	"github.com/pinstore/pinstore/model"
)

// Config configures the HTTP layer.
type Config struct {
	// Store is the storage the handlers call. Required.
	Store Store
	// Logger receives access logs and the causes of 5xx errors. Default:
	// slog.Default().
	Logger *slog.Logger
	// AccessLog, when set, receives the one JSON line per request, each in
	// one Write, built without slog. Nil: the lines go to Logger.
	AccessLog io.Writer
	// Registry receives the HTTP metrics and is served at /metrics.
	// Default: a new, empty registry.
	Registry *prometheus.Registry
	// Limits bounds documents (the size of "data").
	Limits model.Limits
	// MaxBodyBytes bounds a request body. Default: DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Auth, when set, wraps every /v1 route (not the operational ones).
	// It answers unauthenticated requests itself, e.g. with a 401 problem.
	Auth func(http.Handler) http.Handler
	// Spec is the OpenAPI document served at /openapi.yaml and rendered at
	// /docs. Default: pinstore.OpenAPI.
	Spec []byte
}

// Server is the API's http.Handler.
type Server struct {
	store     Store
	logger    *slog.Logger
	accessLog io.Writer
	registry  *prometheus.Registry
	limits    model.Limits
	maxBody   int64
	spec      []byte
	docs      []byte
	metrics   *httpMetrics
	router    chi.Router
}

var _ http.Handler = (*Server)(nil)

// New builds the API. It fails when Store is missing, the metrics cannot
// be registered, or the spec cannot be rendered.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("api.New: Config.Store is required")
	}
	s := &Server{
		store:     cfg.Store,
		logger:    cfg.Logger,
		accessLog: cfg.AccessLog,
		registry:  cfg.Registry,
		limits:    cfg.Limits,
		maxBody:   cfg.MaxBodyBytes,
		spec:      cfg.Spec,
	}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	if s.registry == nil {
		s.registry = prometheus.NewRegistry()
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.spec == nil {
		s.spec = pinstore.OpenAPI
	}
	var err error
	if s.docs, err = renderDocs(s.spec); err != nil {
		return nil, err
	}
	if s.metrics, err = newHTTPMetrics(s.registry); err != nil {
		return nil, err
	}
	s.router = s.routes(cfg.Auth)
	return s, nil
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.router.ServeHTTP(w, r) }

// Routes exposes the router, for walking the route table.
func (s *Server) Routes() chi.Routes { return s.router }

// routes is the one list of routes, and of the middleware, in order, that
// every request passes through.
func (s *Server) routes(auth func(http.Handler) http.Handler) chi.Router {
	r := chi.NewRouter()
	r.Use(
		withRequestID,                    // first: everything after logs and answers with it
		s.metrics.measure,                // latency and count per route pattern
		accessLog(s.logger, s.accessLog), // one JSON line per request
		recoverPanics(s.logger),          // a panic becomes a logged 500 problem
	)
	r.NotFound(s.handle(func(w http.ResponseWriter, r *http.Request) error {
		return errorf(model.ENotFound, "no route for %s", r.URL.Path)
	}))
	r.MethodNotAllowed(s.methodNotAllowed)

	// Operational routes: never behind Auth.
	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.With(s.adminOnly(auth)...).Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{})) // admin when auth is on
	r.Get("/openapi.yaml", s.openAPI)
	r.Get("/docs", s.docsPage)

	r.Group(func(r chi.Router) {
		if auth != nil {
			r.Use(auth, s.authorize) // bearer tokens, then per-route permissions (authz.go)
		}

		r.Post("/v1/users", s.handle(s.createUser))
		r.Get("/v1/users", s.handle(s.getMany(typeUser)))
		r.Get("/v1/users/{id}", s.handle(s.getObject(typeUser)))
		r.Patch("/v1/users/{id}", s.handle(s.patchObject(typeUser)))
		r.Delete("/v1/users/{id}", s.handle(s.deleteObject(typeUser)))
		r.Get("/v1/users/{id}/boards", s.handle(s.list(model.UserBoards)))
		r.Get("/v1/users/{id}/pins", s.handle(s.list(model.UserPins)))
		r.Get("/v1/users/{id}/following", s.handle(s.list(model.UserFollowing)))
		r.Get("/v1/users/{id}/followers", s.handle(s.list(model.UserFollowers)))
		r.Put("/v1/users/{id}/following/{target_id}", s.handle(s.putMapping(model.UserFollowing, "target_id")))
		r.Delete("/v1/users/{id}/following/{target_id}", s.handle(s.deleteMapping(model.UserFollowing, "target_id")))
		r.Get("/v1/users/{id}/likes", s.handle(s.list(model.UserLikes)))
		r.Put("/v1/users/{id}/likes/{pin_id}", s.handle(s.putMapping(model.UserLikes, "pin_id")))
		r.Delete("/v1/users/{id}/likes/{pin_id}", s.handle(s.deleteMapping(model.UserLikes, "pin_id")))
		r.Get("/v1/users/{id}/feed", s.handle(s.feed))

		r.Post("/v1/boards", s.handle(s.createBoard))
		r.Get("/v1/boards", s.handle(s.getMany(typeBoard)))
		r.Get("/v1/boards/{id}", s.handle(s.getObject(typeBoard)))
		r.Patch("/v1/boards/{id}", s.handle(s.patchObject(typeBoard)))
		r.Delete("/v1/boards/{id}", s.handle(s.deleteObject(typeBoard)))
		r.Get("/v1/boards/{id}/pins", s.handle(s.list(model.BoardPins)))
		r.Put("/v1/boards/{id}/pins/{pin_id}/position", s.handle(s.movePin))

		r.Post("/v1/pins", s.handle(s.createPin))
		r.Get("/v1/pins", s.handle(s.getMany(typePin)))
		r.Post("/v1/pins/owners", s.handle(s.owners))
		r.Get("/v1/pins/{id}", s.handle(s.getObject(typePin)))
		r.Patch("/v1/pins/{id}", s.handle(s.patchObject(typePin)))
		r.Delete("/v1/pins/{id}", s.handle(s.deleteObject(typePin)))
		r.Get("/v1/pins/{id}/likers", s.handle(s.list(model.PinLikers)))
		r.Post("/v1/pins/{id}/comments", s.handle(s.createComment))
		r.Get("/v1/pins/{id}/comments", s.handle(s.list(model.PinComments)))

		r.Get("/v1/comments/{id}", s.handle(s.getObject(typeComment)))
		r.Patch("/v1/comments/{id}", s.handle(s.patchObject(typeComment)))
		r.Delete("/v1/comments/{id}", s.handle(s.deleteObject(typeComment)))

		r.Get("/v1/ids/{id}", s.handle(s.decodeID))

		r.Get("/v1/admin/shard-map", s.handle(s.shardMap)) // scope admin (authz.go)
	})
	return r
}

// handlerFunc is a handler that returns its error instead of writing it.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle adapts a handlerFunc: a returned error becomes a problem response.
func (s *Server) handle(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			writeError(w, r, s.logger, err)
		}
	}
}

// methodNotAllowed answers 405 with the Allow header listing the methods
// that the path does route.
func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if s.router.Match(chi.NewRouteContext(), m, r.URL.Path) {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
	}
	writeError(w, r, s.logger, errorf(EMethodNotAllowed, "%s is not allowed on %s", r.Method, r.URL.Path))
}

// writeJSON writes v as a JSON response with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return model.Wrap("api.writeJSON", model.EInternal, "internal error", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
	return nil
}
