package api

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"go.opentelemetry.io/otel/trace"

	"github.com/pinstore/pinstore/auth"
	"github.com/pinstore/pinstore/internal/tracing"
	"github.com/pinstore/pinstore/model"
)

// ctxKey types the api's context keys so no other package can collide.
type ctxKey int

const (
	requestIDKey ctxKey = iota // the request's *statusWriter (observe): its id, status, principal
	actorKey                   // the user a user token acts as (guard, authz.go, when not under observe)
	scopeKey                   // who the request's idempotency keys belong to (likewise)
	seenKey                    // the path objects the guard read (seenObjects, visibility.go)
)

// RequestIDHeader carries the request id in and out.
const RequestIDHeader = "X-Request-Id"

// maxRequestIDLen bounds an incoming request id that is accepted as is.
const maxRequestIDLen = 64

// RequestID returns the request id stored in ctx by the outermost
// middleware (observe), or "".
func RequestID(ctx context.Context) string {
	if sw, ok := ctx.Value(requestIDKey).(*statusWriter); ok {
		return sw.id
	}
	return ""
}

// validRequestID reports whether an incoming X-Request-Id is sane enough to
// log and echo: 1..64 characters of [A-Za-z0-9-_.].
func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// newRequestID is 32 hex digits of 128 random bits from the runtime's
// per-thread ChaCha8 generator (math/rand/v2): unique across servers
// without crypto/rand's system call or lock, and one allocation.
func newRequestID() string {
	var raw [16]byte
	binary.LittleEndian.PutUint64(raw[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(raw[8:], rand.Uint64())
	var b [32]byte
	hex.Encode(b[:], raw[:])
	return string(b[:])
}

// statusWriter is what the outermost middleware (observe) keeps of one
// request: its id, the status and size of its response, who it acted as
// and which route served it. It travels in the context once, so the
// layers inside record into it instead of each copying the request. It
// unwraps for http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64

	// A request held for a failover (failover.go): the error held, until
	// when it may wait, the body it read, whether a write committed.
	failover  Failover
	started   time.Time
	held      error
	holdUntil time.Time
	body      []byte
	writes    model.Writes
	idem      *model.Idempotency

	id        string        // the request id
	idHeader  [1]string     // the X-Request-Id header's value, without a slice of its own
	principal string        // who the request acted as (authz.go), for the access log
	route     *routeMetrics // the route that matched (routed); nil when none did

	// The principal auth.Middleware authenticated (RecordPrincipal), and
	// what guard (authz.go) let through: the principal the request acts
	// as, for actor and scopeOf. Neither needs a context of its own.
	authn   *auth.Principal
	acting  auth.Principal
	guarded bool

	// beforeStatus, when set, runs once just before the status is written,
	// with it: the consistency token goes into the headers there
	// (consistency.go).
	beforeStatus func(status int)

	ctx requestContext // the request's context, made by observe

	span trace.Span // the request's span when tracing is on (internal/tracing); else nil
}

// requestContext is the context observe gives a request: its parent's
// values, with the request's *statusWriter under requestIDKey and the
// router's routing context, so that chi finds its context already there
// instead of copying the request to add one. It lives in the
// statusWriter: one allocation for the writer and both values.
type requestContext struct {
	context.Context
	sw    *statusWriter
	route *chi.Context
}

func (c *requestContext) Value(key any) any {
	switch key {
	case requestIDKey:
		return c.sw
	case chi.RouteCtxKey:
		return c.route
	case model.WritesKey:
		return &c.sw.writes
	}
	return c.Context.Value(key)
}

// routeContexts are the routing contexts of requests in flight, reused as
// chi reuses its own.
var routeContexts = sync.Pool{New: func() any { return chi.NewRouteContext() }}

var _ auth.PrincipalRecorder = (*statusWriter)(nil)

// RecordPrincipal keeps the principal auth.Middleware authenticated, and
// names it in the access line.
func (w *statusWriter) RecordPrincipal(p *auth.Principal) { w.authn, w.principal = p, p.Name }

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.before(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
		w.before(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) before(status int) {
	if f := w.beforeStatus; f != nil {
		w.beforeStatus = nil
		f(status)
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Status is the status written, 200 if the handler wrote nothing.
func (w *statusWriter) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// recorder returns w as a *statusWriter, wrapping it unless the outermost
// middleware (observe) already did.
func recorder(w http.ResponseWriter) *statusWriter {
	if sw, ok := w.(*statusWriter); ok {
		return sw
	}
	return &statusWriter{ResponseWriter: w}
}

// routePattern is the chi pattern that served r ("unmatched" when none
// did): a bounded label, never the raw path.
func routePattern(r *http.Request) string {
	if rctx := chi.RouteContext(r.Context()); rctx != nil {
		if p := rctx.RoutePattern(); p != "" {
			return p
		}
	}
	return "unmatched"
}

// observe is the outermost middleware, in front of the router, in one
// function so a request pays for one wrapper, one copy of the request
// (which also carries chi's routing context) and two clock reads:
//   - the request id: a sane incoming X-Request-Id or a new one, in the
//     context (RequestID) and echoed in the response;
//   - the Date header, from dateHeader rather than net/http;
//   - the consistency token of a /v1 request in and the response's out
//     (beginConsistency), in the same context: one copy of the request;
//   - panic recovery: a handler's panic becomes a logged 500 problem
//     (http.ErrAbortHandler is re-panicked, which net/http uses to abort
//     quietly, and neither counted nor logged);
//   - the metrics: latency and count by method, route pattern and status
//     class, through the route's pre-curried observers (routed);
//   - the access log: one JSON line per request, to Config.AccessLog when
//     set, else through the logger (INFO, WARN for a 5xx).
func (s *Server) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, id: r.Header.Get(RequestIDHeader), failover: s.failover, started: start}
		if !validRequestID(sw.id) {
			sw.id = newRequestID()
		}
		sw.idHeader[0] = sw.id
		h := w.Header()
		h[RequestIDHeader] = sw.idHeader[:] // canonical already: no Set
		h["Date"] = s.date.at(start)
		ctx, cerr := s.beginConsistency(r.Context(), sw, r)
		if tracing.On() {
			ctx, sw.span = tracing.StartRequest(ctx, r)
		}
		route := routeContexts.Get().(*chi.Context)
		route.Reset()
		route.Routes = s.router
		sw.ctx = requestContext{Context: ctx, sw: sw, route: route}
		r = r.WithContext(&sw.ctx)
		defer func() {
			if rec := recover(); rec != nil {
				if rec == http.ErrAbortHandler {
					panic(rec)
				}
				s.logPanic(r, rec)
				if sw.status == 0 {
					p, _ := problemFor(r, model.Errorf(model.EInternal, "internal error"))
					writeProblem(sw, p)
				}
			}
			s.record(sw, r, start)
			routeContexts.Put(route)
		}()
		if cerr != nil {
			writeError(sw, r, s.logger, cerr)
			return
		}
		next.ServeHTTP(sw, r)
		s.rerun(next, sw, r)
	})
}

// dateHeader is the Date header's value for the current second, made once
// a second instead of by net/http for every response (through the
// general-purpose time layout, about 2% of a cached read's CPU).
type dateHeader struct {
	cur atomic.Pointer[dateValue]
}

type dateValue struct {
	sec int64
	v   []string // one element, capacity one: an Add by a handler copies it
}

// at is the header's value at t (http.TimeFormat, in UTC), shared by the
// responses of one second: net/http copies the handler's header before it
// writes it, and nothing writes into the slice.
func (d *dateHeader) at(t time.Time) []string {
	sec := t.Unix()
	if v := d.cur.Load(); v != nil && v.sec == sec {
		return v.v
	}
	v := &dateValue{sec: sec, v: []string{time.Unix(sec, 0).UTC().Format(http.TimeFormat)}}
	d.cur.Store(v)
	return v.v
}

// logPanic logs a handler's panic with its stack.
func (s *Server) logPanic(r *http.Request, rec any) {
	s.logger.LogAttrs(r.Context(), slog.LevelError, "panic serving request",
		slog.String("request_id", RequestID(r.Context())),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.String("panic", fmt.Sprint(rec)),
		slog.String("stack", string(debug.Stack())))
}

// record counts a served request and writes its access line.
func (s *Server) record(sw *statusWriter, r *http.Request, start time.Time) {
	now := time.Now()
	status := sw.Status()
	took := now.Sub(start)
	var route string
	if m := sw.route; m != nil && m.method == r.Method {
		route = m.pattern
		m.observe(status, took)
	} else {
		route = routePattern(r)
		s.metrics.observe(metricMethod(r.Method), route, status, took)
	}
	if sw.span != nil {
		kind := ""
		if sw.authn != nil {
			kind = principalKinds[sw.authn.Kind]
		}
		tracing.EndRequest(sw.span, r.Method, route, status, kind)
	}
	if s.accessLog != nil {
		bp := bufPool.Get().(*[]byte)
		b := appendAccessLine((*bp)[:0], now, took, sw, r.Method, route, r.URL.Path)
		_, _ = s.accessLog.Write(b)
		*bp = b[:0]
		bufPool.Put(bp)
		return
	}
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelWarn
	}
	traceID := slog.Attr{} // an empty Attr is left out
	if sw.span != nil {
		traceID = slog.String("trace_id", tracing.TraceID(sw.span))
	}
	s.logger.LogAttrs(r.Context(), level, "http request",
		slog.String("request_id", sw.id),
		slog.String("method", r.Method),
		slog.String("route", route),
		slog.String("path", r.URL.Path),
		slog.Int("status", status),
		slog.String("principal", sw.principal),
		slog.Int64("bytes", sw.bytes),
		slog.Float64("duration_ms", float64(took.Microseconds())/1000),
		traceID,
	)
}

// principalKinds name a principal's kind on the request's span.
var principalKinds = map[auth.Kind]string{auth.KindService: "service", auth.KindUser: "user"}

// appendAccessLine appends the access line slog's JSON handler would
// write, built by hand: through slog it was ~7% of a get's server CPU.
func appendAccessLine(b []byte, now time.Time, took time.Duration, sw *statusWriter, method, route, path string) []byte {
	status := sw.Status()
	b = append(b, `{"time":"`...)
	b = now.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"`...)
	if status >= 500 {
		b = append(b, "WARN"...)
	} else {
		b = append(b, "INFO"...)
	}
	b = append(b, `","msg":"http request","request_id":`...)
	b = appendJSONString(b, sw.id)
	b = append(b, `,"method":`...)
	b = appendJSONString(b, method)
	b = append(b, `,"route":`...)
	b = appendJSONString(b, route)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, path)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"principal":`...)
	b = appendJSONString(b, sw.principal)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, sw.bytes, 10)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendFloat(b, float64(took.Microseconds())/1000, 'f', -1, 64)
	if sw.span != nil {
		b = append(b, `,"trace_id":"`...)
		b = append(b, tracing.TraceID(sw.span)...)
		b = append(b, '"')
	}
	return append(b, "}\n"...)
}

// appendJSONString appends s as a JSON string; anything but printable
// ASCII without quotes or backslashes takes encoding/json's escaping
// (which also replaces invalid UTF-8).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// httpMetrics are the per-route request metrics.
type httpMetrics struct {
	duration *prometheus.HistogramVec
	requests *prometheus.CounterVec
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	labels := []string{"method", "route", "status_class"}
	m := &httpMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "pinstore_http_request_duration_seconds",
			Help:    "Time to serve an HTTP request, by method, chi route pattern and status class.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, labels),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pinstore_http_requests_total",
			Help: "HTTP requests served, by method, chi route pattern and status class.",
		}, labels),
	}
	for _, c := range []prometheus.Collector{m.duration, m.requests} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("api: register metrics: %w", err)
		}
	}
	return m, nil
}

// knownMethods bounds the method label.
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

// metricMethod is the method label: the method, or OTHER for one not in
// knownMethods.
func metricMethod(method string) string {
	if !knownMethods[method] {
		return "OTHER"
	}
	return method
}

// statusClasses are the status_class labels of 1xx to 5xx.
var statusClasses = [...]string{"", "1xx", "2xx", "3xx", "4xx", "5xx"}

// observe counts one request by its labels (the path of requests no route
// matched; a route's own go through routeMetrics).
func (m *httpMetrics) observe(method, route string, status int, took time.Duration) {
	class := strconv.Itoa(status/100) + "xx"
	m.duration.WithLabelValues(method, route, class).Observe(took.Seconds())
	m.requests.WithLabelValues(method, route, class).Inc()
}

// routeMetrics are one route's observers, curried by method and pattern
// when the router is built and by status class on first use, so a request
// the route serves looks nothing up by label.
type routeMetrics struct {
	m               *httpMetrics
	method, pattern string
	classes         [len(statusClasses)]atomic.Pointer[classMetrics]
}

type classMetrics struct {
	duration prometheus.Observer
	requests prometheus.Counter
}

func (m *httpMetrics) route(method, pattern string) *routeMetrics {
	return &routeMetrics{m: m, method: metricMethod(method), pattern: pattern}
}

// routed marks the requests next serves as this route's, for observe.
func (rm *routeMetrics) routed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sw, ok := w.(*statusWriter); ok {
			sw.route = rm
		}
		next.ServeHTTP(w, r)
	})
}

// observe counts one request the route served.
func (rm *routeMetrics) observe(status int, took time.Duration) {
	c := status / 100
	if c < 1 || c >= len(statusClasses) {
		rm.m.observe(rm.method, rm.pattern, status, took)
		return
	}
	cm := rm.classes[c].Load()
	if cm == nil {
		cm = &classMetrics{
			duration: rm.m.duration.WithLabelValues(rm.method, rm.pattern, statusClasses[c]),
			requests: rm.m.requests.WithLabelValues(rm.method, rm.pattern, statusClasses[c]),
		}
		rm.classes[c].Store(cm) // a racing first request stores the same children
	}
	cm.duration.Observe(took.Seconds())
	cm.requests.Inc()
}
