package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/model"
)

// ctxKey types the api's context keys so no other package can collide.
type ctxKey int

const (
	requestIDKey ctxKey = iota // the request id (withRequestID)
	actorKey                   // the user a user token acts as (guard, authz.go)
	scopeKey                   // who the request's idempotency keys belong to (guard, authz.go)
	seenKey                    // the path objects the guard read (seenObjects, visibility.go)
)

// RequestIDHeader carries the request id in and out.
const RequestIDHeader = "X-Request-Id"

// maxRequestIDLen bounds an incoming request id that is accepted as is.
const maxRequestIDLen = 64

// RequestID returns the request id stored in ctx by the request-id
// middleware, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
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

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// withRequestID accepts a sane incoming X-Request-Id or generates one,
// stores it in the request context and echoes it in the response.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		if !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set(RequestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

// statusWriter records the status and size of a response. It unwraps for
// http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64

	principal string // who the request acted as (authz.go), for the access log

	// beforeStatus, when set, runs once just before the status is written,
	// with it: the consistency token goes into the headers there
	// (consistency.go).
	beforeStatus func(status int)
}

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

// recorder returns w as a *statusWriter, wrapping it unless an outer
// middleware already did.
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

// accessLog writes one structured line per request: to w directly when
// it is set, else through logger (INFO, WARN for a 5xx).
func accessLog(logger *slog.Logger, w io.Writer) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			start := time.Now()
			sw := recorder(rw)
			next.ServeHTTP(sw, r)
			status := sw.Status()
			if w != nil {
				bp := bufPool.Get().(*[]byte)
				b := appendAccessLine((*bp)[:0], start, r, status, sw)
				_, _ = w.Write(b)
				*bp = b[:0]
				bufPool.Put(bp)
				return
			}
			level := slog.LevelInfo
			if status >= 500 {
				level = slog.LevelWarn
			}
			logger.LogAttrs(r.Context(), level, "http request",
				slog.String("request_id", RequestID(r.Context())),
				slog.String("method", r.Method),
				slog.String("route", routePattern(r)),
				slog.String("path", r.URL.Path),
				slog.Int("status", status),
				slog.String("principal", sw.principal),
				slog.Int64("bytes", sw.bytes),
				slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
			)
		})
	}
}

// appendAccessLine appends the access line slog's JSON handler would
// write, built by hand: through slog it was ~7% of a get's server CPU.
func appendAccessLine(b []byte, start time.Time, r *http.Request, status int, sw *statusWriter) []byte {
	now := time.Now()
	b = append(b, `{"time":"`...)
	b = now.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"`...)
	if status >= 500 {
		b = append(b, "WARN"...)
	} else {
		b = append(b, "INFO"...)
	}
	b = append(b, `","msg":"http request","request_id":`...)
	b = appendJSONString(b, RequestID(r.Context()))
	b = append(b, `,"method":`...)
	b = appendJSONString(b, r.Method)
	b = append(b, `,"route":`...)
	b = appendJSONString(b, routePattern(r))
	b = append(b, `,"path":`...)
	b = appendJSONString(b, r.URL.Path)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"principal":`...)
	b = appendJSONString(b, sw.principal)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, sw.bytes, 10)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendFloat(b, float64(now.Sub(start).Microseconds())/1000, 'f', -1, 64)
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

// measure observes every request's latency and counts it.
func (m *httpMetrics) measure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := recorder(w)
		next.ServeHTTP(sw, r)
		method := r.Method
		if !knownMethods[method] {
			method = "OTHER"
		}
		class := strconv.Itoa(sw.Status()/100) + "xx"
		route := routePattern(r)
		m.duration.WithLabelValues(method, route, class).Observe(time.Since(start).Seconds())
		m.requests.WithLabelValues(method, route, class).Inc()
	})
}

// recoverPanics turns a handler's panic into a logged 500 problem. It
// re-panics http.ErrAbortHandler, which net/http uses to abort quietly.
func recoverPanics(logger *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sw := recorder(w)
			defer func() {
				rec := recover()
				if rec == nil {
					return
				}
				if rec == http.ErrAbortHandler {
					panic(rec)
				}
				logger.LogAttrs(r.Context(), slog.LevelError, "panic serving request",
					slog.String("request_id", RequestID(r.Context())),
					slog.String("method", r.Method),
					slog.String("path", r.URL.Path),
					slog.String("panic", fmt.Sprint(rec)),
					slog.String("stack", string(debug.Stack())))
				if sw.status == 0 {
					p, _ := problemFor(r, model.Errorf(model.EInternal, "internal error"))
					writeProblem(sw, p)
				}
			}()
			next.ServeHTTP(sw, r)
		})
	}
}
