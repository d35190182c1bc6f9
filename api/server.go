// Package api is pinstore's HTTP layer: the routes of REST API v1, their
// payload types, the one map from error code to HTTP status, and the
// middleware every request passes through.
//
// Invariants:
//   - Every route lives in routeTable (routes.go), under /v1 except the
//     operational ones (/healthz, /readyz, /metrics, /openapi.yaml, /docs,
//     /fleet),
//     each with the permission that guards it when auth is on (authz.go)
//     and the way it decides what its caller may see of secret boards
//     (visibility.go); openapi.yaml describes exactly these routes, and a
//     test proves it.
//   - IDs travel as decimal strings. A malformed ID is 400 invalid_argument;
//     a well-formed ID of another type than the route's is 404 not_found.
//   - Every error is an RFC 9457 problem document whose detail is
//     client-safe (model.ErrorMessage); 5xx causes are logged, not shown.
//   - Handlers are thin: they parse, call one or a few Store methods, and
//     write. Transactions belong to the store.
package api

import (
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
	// Store is the storage the handlers call (store.go). Required.
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
	// Consistency, when set, reads the Pinstore-Consistency header of /v1
	// requests and sets it on their responses (consistency.go); nil: the
	// header is ignored and never sent.
	Consistency Consistency
	// Changes, when set, is the change stream GET /v1/changes serves
	// (changes.go); nil: the route answers 503.
	Changes ChangeFeed
	// Failover, when set, holds a request whose shard's master failed it
	// until a failover names a new one, and runs it again when that is
	// safe (failover.go); nil: such a request is answered 503 at once.
	Failover Failover
	// Fleet, when set, reads the move in progress and the map's last
	// rewrite from where the map lives, for GET /v1/admin/fleet
	// (fleet.go); nil: the route shows neither.
	Fleet FleetHome
}

// Server is the API's http.Handler.
type Server struct {
	// The storage, through the interface each handler declares.
	creates    Creator
	objects    ObjectReader
	edits      ObjectWriter
	lists      Lister
	mappings   MappingWriter
	feeds      FeedReader
	edges      EdgeReader
	ownerCache OwnerCache
	ops        Ops
	keys       KeyUser

	tokens  Consistency
	changes ChangeFeed
	// failover holds requests a failed master refused (failover.go)
	failover  Failover
	fleetHome FleetHome
	rates     requestRates // GET /v1/admin/fleet: the last look at the request counters

	logger    *slog.Logger
	accessLog io.Writer
	registry  *prometheus.Registry
	limits    model.Limits
	maxBody   int64
	spec      []byte
	metrics   *httpMetrics
	prom      http.Handler // /metrics
	router    chi.Router
	handler   http.Handler // router behind observe
	date      dateHeader   // the Date header of this second (middleware.go)
}

var _ http.Handler = (*Server)(nil)

// New builds the API. It fails when Store is missing, the metrics cannot
// be registered, the spec does not load or validate, or a route declares no
// permission.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("api.New: Config.Store is required")
	}
	st := cfg.Store
	s := &Server{
		creates: st, objects: st, edits: st, lists: st, mappings: st, feeds: st, edges: st, ownerCache: st, ops: st, keys: st,

		logger:    cfg.Logger,
		accessLog: cfg.AccessLog,
		registry:  cfg.Registry,
		limits:    cfg.Limits,
		maxBody:   cfg.MaxBodyBytes,
		spec:      cfg.Spec,
		tokens:    cfg.Consistency,
		changes:   cfg.Changes,
		failover:  cfg.Failover,
		fleetHome: cfg.Fleet,
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
	if err := checkSpec(s.spec); err != nil {
		return nil, err
	}
	var err error
	if s.metrics, err = newHTTPMetrics(s.registry); err != nil {
		return nil, err
	}
	s.prom = promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{})
	if s.router, err = s.newRouter(cfg.Auth, s.routeTable()); err != nil {
		return nil, err
	}
	s.handler = s.observe(s.router)
	return s, nil
}

// ServeHTTP serves the API: every request through observe, then the
// router.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Routes exposes the router, for walking the route table.
func (s *Server) Routes() chi.Routes { return s.router }

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
