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
// What a handler sees differs from net/http's server in three ways:
//   - the request's context is never cancelled: not when the client goes
//     away, nor at a shutdown (which lets requests in flight finish, as
//     serve's did already);
//   - the request body has been read whole before the handler runs
//     (Config.MaxBodyBytes bounds it; a bigger one is refused with 413);
//   - a response is buffered whole and sent with its Content-Length: no
//     chunked responses, no Flush.
//
// Request strings (the URI, header names and values) are copied out of
// fasthttp's buffers, which it reuses after the request: a handler may keep
// any of them.
package httpserve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"
)

// Config is the server's limits; zero values take the defaults given.
type Config struct {
	ReadTimeout    time.Duration // a request, headers and body (default 30s)
	WriteTimeout   time.Duration // a response (default 60s)
	IdleTimeout    time.Duration // a kept-alive connection between requests (default 120s)
	MaxHeaderBytes int           // a request's line and headers, and each connection's read buffer (default 16 KiB)
	MaxBodyBytes   int           // a request's body (default 16 MiB)
	Logger         *slog.Logger  // the server's own errors, at warn (default slog.Default())
}

// Server serves one handler.
type Server struct {
	h     http.Handler
	srv   *fasthttp.Server
	proto *http.Request // carries the requests' context
	log   *slog.Logger
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
		c.MaxBodyBytes = 16 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	s := &Server{h: h, log: c.Logger, proto: new(http.Request).WithContext(context.Background())}
	s.srv = &fasthttp.Server{
		Handler:               s.serve,
		ReadTimeout:           c.ReadTimeout,
		WriteTimeout:          c.WriteTimeout,
		IdleTimeout:           c.IdleTimeout,
		ReadBufferSize:        c.MaxHeaderBytes,
		MaxRequestBodySize:    c.MaxBodyBytes,
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		// The handler reads every body as sent: fasthttp would otherwise
		// parse a multipart body first, refusing with a 400 one it cannot
		// parse and spilling big files to disk.
		DisablePreParseMultipartForm: true,
		SecureErrorLogMessage:        true, // no request bytes in the server's log lines
		Logger:                       printfLogger{c.Logger},
		ErrorHandler:                 refuse,
	}
	return s
}

// Serve accepts connections on ln until Shutdown; it returns nil after a
// shutdown, as http.Server's Serve returns http.ErrServerClosed.
func (s *Server) Serve(ln net.Listener) error {
	return s.srv.Serve(ln)
}

// Shutdown stops accepting, closes idle connections and waits for the
// requests in flight to finish, or ctx to end (then it returns ctx's
// error, and the connections still busy end with the process).
func (s *Server) Shutdown(ctx context.Context) error {
	return s.srv.ShutdownWithContext(ctx)
}

// serve runs the handler on one request.
func (s *Server) serve(fc *fasthttp.RequestCtx) {
	r := new(http.Request)
	*r = *s.proto
	if err := convert(fc, r); err != nil {
		fc.Error("malformed request: "+err.Error(), http.StatusBadRequest)
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
func refuse(fc *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		fc.Error("request body too large", http.StatusRequestEntityTooLarge)
	case errors.As(err, &small):
		fc.Error("request headers too large", http.StatusRequestHeaderFieldsTooLarge)
	case errors.As(err, &ne) && ne.Timeout():
		fc.Error("request timeout", http.StatusRequestTimeout)
	default:
		fc.Error("malformed request", http.StatusBadRequest)
	}
}

// printfLogger takes fasthttp's log lines.
type printfLogger struct{ l *slog.Logger }

func (p printfLogger) Printf(format string, args ...any) {
	p.l.Warn(fmt.Sprintf(format, args...))
}
