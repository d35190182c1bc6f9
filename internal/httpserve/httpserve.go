// Package httpserve serves a net/http Handler over HTTP/1.1 with
// fasthttp's connection loop instead of net/http's.
//
// The API stays a plain http.Handler (chi, the middleware, the tests'
// httptest servers); only the connection loop changes. net/http's loop
// costs a cached read more CPU than everything pinstore does for it: for
// every request it starts and aborts a background read (a goroutine
// hand-off and two deadline changes), sets the server's read and write
// deadlines, and clones the header map to write it. fasthttp's loop reads
// a request and writes its response with one read and one write system
// call and no goroutine of its own per request.
//
// What a handler sees differs from net/http's server in two ways:
//   - the request body has been read whole before the handler runs
//     (Config.MaxBodyBytes bounds it: a body over it is refused as it
//     arrives, with 413, after at most that many bytes of it);
//   - a response is buffered whole and sent with its Content-Length: no
//     chunked responses, no Flush.
//
// A request's context is done, as under net/http's server, when its
// client closes or resets the connection (seen on Linux through an epoll
// instance of the server's own, which costs a request nothing), when its
// handler returns, and when a shutdown's grace ends with the request
// still running (Shutdown). It carries no deadline: the work a handler
// starts sets its own.
//
// Every request the loop refuses itself, before any handler (a body or
// headers over their limits, a request that is not HTTP/1.1, one that
// did not arrive in time), is answered by Config.Refuse, which the API
// makes one of its problem documents.
//
// Request strings (the URI, header names and values) are copied out of
// fasthttp's buffers, which it reuses after the request: a handler may keep
// any of them.
package httpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// DefaultMaxBodyBytes bounds a request body when Config.MaxBodyBytes is
// zero: the API's own bound (api.DefaultMaxBodyBytes).
const DefaultMaxBodyBytes = 64 << 10

// Config is the server's limits; zero values take the defaults given.
type Config struct {
	ReadTimeout    time.Duration // a request, headers and body (default 30s)
	WriteTimeout   time.Duration // a response (default 60s)
	IdleTimeout    time.Duration // a kept-alive connection between requests (default 120s)
	MaxHeaderBytes int           // a request's line and headers, and each connection's read buffer (default 16 KiB)
	MaxBodyBytes   int           // a request's body (default DefaultMaxBodyBytes)
	Logger         *slog.Logger  // the server's own errors, at warn (default slog.Default())
	// Refuse answers a request the loop refuses before any handler, with
	// status (400, 408, 413 or 431) and detail, a sentence safe to show.
	// r holds what the loop read of the request: its method, URL and
	// headers when they were read (a body over the limit), else a bare
	// request whose URL has no path. Default: an RFC 9457 problem document
	// of type about:blank.
	Refuse func(w http.ResponseWriter, r *http.Request, status int, detail string)
}

// Server serves one handler.
type Server struct {
	h      http.Handler
	srv    *fasthttp.Server
	proto  *http.Request // the requests' fields that never change
	log    *slog.Logger
	cfg    Config
	watch  *watcher // nil where the platform has none
	nextID atomic.Uint64

	mu        sync.Mutex
	conns     map[uint64]*conn // the open connections, by id
	cancelled atomic.Bool      // a shutdown's grace ended: every request is cancelled
}

// New returns a server of h.
func New(h http.Handler, c Config) *Server {
	if c.ReadTimeout == 0 {
		c.ReadTimeout = 30 * time.Second
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 60 * time.Second
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 120 * time.Second
	}
	if c.MaxHeaderBytes == 0 {
		c.MaxHeaderBytes = 16 << 10
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Refuse == nil {
		c.Refuse = refuseAboutBlank
	}
	s := &Server{h: h, log: c.Logger, cfg: c, proto: new(http.Request), conns: make(map[uint64]*conn)}
	s.srv = &fasthttp.Server{
		Handler:               s.serve,
		ReadTimeout:           c.ReadTimeout,
		WriteTimeout:          c.WriteTimeout,
		IdleTimeout:           c.IdleTimeout,
		ReadBufferSize:        c.MaxHeaderBytes,
		MaxRequestBodySize:    c.MaxBodyBytes,
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		CloseOnShutdown:       true, // a response during a shutdown's grace closes its connection
		// The handler reads every body as sent: fasthttp would otherwise
		// parse a multipart body first, refusing with a 400 one it cannot
		// parse and spilling big files to disk.
		DisablePreParseMultipartForm: true,
		SecureErrorLogMessage:        true, // no request bytes in the server's log lines
		Logger:                       printfLogger{c.Logger},
		ErrorHandler:                 s.refuse,
		ExpectHandler:                s.expect,
	}
	return s
}

// Serve accepts connections on ln until Shutdown; it returns nil after a
// shutdown, as http.Server's Serve returns http.ErrServerClosed.
func (s *Server) Serve(ln net.Listener) error {
	if w, err := newWatcher(); err == nil {
		s.watch = w
		go w.run(s.gone)
		defer w.close()
	}
	return s.srv.Serve(listener{Listener: ln, s: s})
}

// gone cancels the request in flight on connection id, whose client left.
func (s *Server) gone(id uint64) {
	s.mu.Lock()
	c := s.conns[id]
	s.mu.Unlock()
	if c != nil {
		c.lost(true)
	}
}

// afterGrace bounds the wait, once a shutdown's grace has ended, for the
// handlers whose contexts it cancelled to return.
const afterGrace = 5 * time.Second

// Shutdown stops accepting, closes idle connections and waits for the
// requests in flight to finish, or ctx to end. Then it cancels the
// contexts of the requests still running, so that the work they started
// stops, waits up to afterGrace for their handlers to return (their
// answers close their connections), and returns ctx's error.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.ShutdownWithContext(ctx)
	if err == nil || ctx.Err() == nil {
		return err
	}
	s.cancelled.Store(true)
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for _, c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.lost(false)
	}
	deadline := time.Now().Add(afterGrace)
	for time.Now().Before(deadline) && s.busy() > 0 {
		time.Sleep(10 * time.Millisecond)
	}
	return err
}

// busy counts the requests in flight.
func (s *Server) busy() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.conns {
		c.mu.Lock()
		if c.req != nil {
			n++
		}
		c.mu.Unlock()
	}
	return n
}

// serve runs the handler on one request.
func (s *Server) serve(fc *fasthttp.RequestCtx) {
	rc := new(requestContext)
	c, _ := fc.Conn().(*conn)
	if c != nil {
		c.begin(rc)
	}
	defer func() {
		if c != nil {
			c.end()
		}
		rc.cancel() // as net/http does when the handler returns
	}()
	if s.cancelled.Load() {
		rc.cancel()
		fc.SetConnectionClose()
	}
	r := s.proto.WithContext(rc)
	if err := convert(fc, r); err != nil {
		s.refuseRequest(fc, http.StatusBadRequest, "the request target is not a valid URI", false)
		fc.SetConnectionClose()
		return
	}
	w := &responseWriter{fc: fc, h: make(http.Header, 4)}
	defer func() {
		if p := recover(); p != nil {
			// The handler aborted (http.ErrAbortHandler) or panicked past
			// the API's own recovery: drop what it wrote and the connection.
			if p != http.ErrAbortHandler {
				s.log.Error("http handler panicked", "panic", fmt.Sprint(p), "method", r.Method, "path", r.URL.Path)
			}
			fc.Response.Reset()
			fc.SetStatusCode(http.StatusInternalServerError)
			fc.SetConnectionClose()
		}
	}()
	s.h.ServeHTTP(w, r)
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if s.cancelled.Load() {
		fc.SetConnectionClose() // a request the shutdown cancelled ends its connection
	}
}

// convert fills r from fc with strings of its own: the URI and every
// header name and value are copied into one string, which r's fields
// slice.
func convert(fc *fasthttp.RequestCtx, r *http.Request) error {
	h := &fc.Request.Header
	uri := fc.RequestURI()
	size, n := len(uri), 0
	for k, v := range h.All() {
		size += len(k) + len(v)
		n++
	}
	var b strings.Builder
	b.Grow(size)
	b.Write(uri)
	for k, v := range h.All() {
		b.Write(k)
		b.Write(v)
	}
	all := b.String()
	r.RequestURI, all = all[:len(uri)], all[len(uri):]
	u, err := url.ParseRequestURI(r.RequestURI)
	if err != nil {
		return err
	}
	r.URL = u
	r.Method = method(fc.Method())
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.1", 1, 1
	if !h.IsHTTP11() {
		r.Proto, r.ProtoMinor = "HTTP/1.0", 0
	}
	r.Header = make(http.Header, n)
	values := make([]string, n)
	i := 0
	for k, v := range h.All() {
		key := textproto.CanonicalMIMEHeaderKey(all[:len(k)])
		val := all[len(k) : len(k)+len(v)]
		all = all[len(k)+len(v):]
		switch key {
		case "Host":
			r.Host = val
		case "Transfer-Encoding", "Trailer":
			// fasthttp has read the body whole; it reaches the handler plain.
		default:
			values[i] = val
			if vv, ok := r.Header[key]; ok {
				r.Header[key] = append(vv, val)
			} else {
				r.Header[key] = values[i : i+1 : i+1]
			}
			i++
		}
	}
	body := fc.PostBody()
	r.ContentLength = int64(len(body))
	r.Body = http.NoBody
	if len(body) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(body)) // reads copy out of fasthttp's buffer
	}
	r.RemoteAddr = fc.RemoteAddr().String()
	return nil
}

// methods are the usual request methods, which method returns without an
// allocation.
var methods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodHead, http.MethodOptions}

// method returns m as a string.
func method(m []byte) string {
	for _, k := range methods {
		if string(m) == k {
			return k
		}
	}
	return string(m)
}

// responseWriter is the handler's http.ResponseWriter: the status and
// headers go to fasthttp's response when the handler first writes, the
// body into its buffer.
type responseWriter struct {
	fc    *fasthttp.RequestCtx
	h     http.Header
	wrote bool
}

func (w *responseWriter) Header() http.Header { return w.h }

func (w *responseWriter) WriteHeader(code int) {
	if w.wrote || code < 200 {
		return // a second status is ignored, as net/http does; 1xx are not sent
	}
	w.wrote = true
	resp := &w.fc.Response
	resp.SetStatusCode(code)
	for k, vv := range w.h {
		for _, v := range vv {
			resp.Header.Add(k, v)
		}
	}
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		if _, ok := w.h["Content-Type"]; !ok && len(p) > 0 {
			w.h["Content-Type"] = []string{http.DetectContentType(p)}
		}
		w.WriteHeader(http.StatusOK)
	}
	return w.fc.Write(p)
}

// refuse answers a request fasthttp could not read, before any handler:
// 413 for a body over the limit, 431 for headers over theirs, 408 for a
// request that did not arrive in time, else 400.
func (s *Server) refuse(fc *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		s.refuseRequest(fc, http.StatusRequestEntityTooLarge, s.tooLarge(), true)
	case errors.As(err, &small):
		s.refuseRequest(fc, http.StatusRequestHeaderFieldsTooLarge,
			fmt.Sprintf("the request line and headers are larger than %d bytes", s.cfg.MaxHeaderBytes), false)
	case errors.As(err, &ne) && ne.Timeout():
		s.refuseRequest(fc, http.StatusRequestTimeout,
			fmt.Sprintf("the request did not arrive within %s", s.cfg.ReadTimeout), false)
	default:
		s.refuseRequest(fc, http.StatusBadRequest, "the request is not well-formed HTTP/1.1", false)
	}
}

func (s *Server) tooLarge() string {
	return fmt.Sprintf("the request body is larger than %d bytes", s.cfg.MaxBodyBytes)
}

// expect answers a request that asks to go on (Expect: 100-continue): a
// body it declares over the limit is refused before the client sends it.
func (s *Server) expect(fc *fasthttp.RequestCtx) int {
	if n := fc.Request.Header.ContentLength(); n > s.cfg.MaxBodyBytes {
		s.refuseRequest(fc, http.StatusRequestEntityTooLarge, s.tooLarge(), true)
		return http.StatusRequestEntityTooLarge
	}
	return fasthttp.StatusContinue
}

// refuseRequest answers fc with Config.Refuse, and has its connection
// closed gently (conn.Close): the refused request may still be arriving.
// parsed says the request's line and headers were read whole.
func (s *Server) refuseRequest(fc *fasthttp.RequestCtx, status int, detail string, parsed bool) {
	if c, ok := fc.Conn().(*conn); ok {
		c.refused()
	}
	r := s.proto.WithContext(closedContext{})
	if !parsed || convert(fc, r) != nil {
		r = s.proto.WithContext(closedContext{})
		r.URL, r.Header = new(url.URL), make(http.Header)
		r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/1.1", 1, 1
		r.RemoteAddr = fc.RemoteAddr().String()
	}
	r.Body, r.ContentLength = http.NoBody, 0
	fc.Response.Reset()
	w := &responseWriter{fc: fc, h: make(http.Header, 4)}
	s.cfg.Refuse(w, r, status, detail)
	if !w.wrote {
		w.WriteHeader(status)
	}
}

// closedContext is the context of a refused request: nothing is to run
// for it.
type closedContext struct{}

func (closedContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (closedContext) Done() <-chan struct{}       { return closedDone }
func (closedContext) Err() error                  { return context.Canceled }
func (closedContext) Value(any) any               { return nil }

// refuseAboutBlank is Config.Refuse's default: an RFC 9457 problem of
// type about:blank.
func refuseAboutBlank(w http.ResponseWriter, _ *http.Request, status int, detail string) {
	b, _ := json.Marshal(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail,omitempty"`
	}{"about:blank", http.StatusText(status), status, detail})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// printfLogger takes fasthttp's log lines.
type printfLogger struct{ l *slog.Logger }

func (p printfLogger) Printf(format string, args ...any) {
	p.l.Warn(fmt.Sprintf(format, args...))
}
