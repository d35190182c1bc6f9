package api

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/pinstore/pinstore/model"
)

// API-level error codes, in addition to model's. They describe HTTP
// situations that the domain has no word for.
const (
	EUnsupportedMediaType = "unsupported_media_type"
	EMethodNotAllowed     = "method_not_allowed"
	// EAmbiguousJSON is the code of a request body that is valid JSON but
	// that JSON parsers do not all read the same way (RFC 7493, I-JSON):
	// duplicate member names, numbers beyond an IEEE-754 double, integers
	// beyond ±(2^53−1), NUL in a member name, a byte-order mark. Stored,
	// such a document would reach each client as something else, or break
	// it.
	EAmbiguousJSON = "ambiguous_json"
	// The codes of the requests the connection loop refuses before the
	// API reads them (Refuse).
	EMalformedRequest = "malformed_request" // 400: not HTTP/1.1, or a request target that is no URI
	ERequestTimeout   = "request_timeout"   // 408: the request did not arrive in time
	EHeadersTooLarge  = "headers_too_large" // 431: the request line and headers are over their limit
)

// problemTypePrefix prefixes a problem's code to form its "type": a
// reference, relative to the server's base URL, to the code's section of
// the /docs page (the spec's "errors" tag holds one "## code" heading per
// code, which Redoc anchors as tag/errors/<code>).
const problemTypePrefix = "/docs#tag/errors/"

// ProblemType is the "type" of a problem with code: the reference to the
// code's section of /docs.
func ProblemType(code string) string { return problemTypePrefix + code }

// Problem is an RFC 9457 problem document, the body of every error.
type Problem struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	Code      string `json:"code"`
	Instance  string `json:"instance,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// errorStatus is the one map from error code to HTTP status, title, and
// the Retry-After a client should honour ("": none).
var errorStatus = map[string]struct {
	status     int
	title      string
	retryAfter string
}{
	model.EInvalid:        {http.StatusBadRequest, "Invalid argument", ""},
	EMalformedRequest:     {http.StatusBadRequest, "Malformed request", ""},
	ERequestTimeout:       {http.StatusRequestTimeout, "Request timeout", ""},
	EHeadersTooLarge:      {http.StatusRequestHeaderFieldsTooLarge, "Headers too large", ""},
	EAmbiguousJSON:        {http.StatusBadRequest, "Ambiguous JSON", ""},
	model.EUnauthorized:   {http.StatusUnauthorized, "Unauthorized", ""},
	model.EForbidden:      {http.StatusForbidden, "Forbidden", ""},
	model.ENotFound:       {http.StatusNotFound, "Not found", ""},
	EMethodNotAllowed:     {http.StatusMethodNotAllowed, "Method not allowed", ""},
	model.EConflict:       {http.StatusConflict, "Conflict", ""},
	model.EUsernameTaken:  {http.StatusConflict, "Username taken", ""},
	model.EKeyInUse:       {http.StatusConflict, "Idempotency key in use", "1"},
	model.EKeyReused:      {http.StatusUnprocessableEntity, "Idempotency key reused", ""},
	model.EVersion:        {http.StatusPreconditionFailed, "Version mismatch", ""},
	model.ETooLarge:       {http.StatusRequestEntityTooLarge, "Too large", ""},
	EUnsupportedMediaType: {http.StatusUnsupportedMediaType, "Unsupported media type", ""},
	model.ERateLimited:    {http.StatusTooManyRequests, "Rate limited", "1"},
	model.EInternal:       {http.StatusInternalServerError, "Internal error", ""},
	model.EUnavailable:    {http.StatusServiceUnavailable, "Unavailable", "1"},
	model.EMoving:         {http.StatusServiceUnavailable, "Shard moving", "2"},
	model.EShardFull:      {http.StatusServiceUnavailable, "Shard full", ""},
}

// StatusOf returns the HTTP status for an error code; unknown codes are
// internal errors (500).
func StatusOf(code string) int {
	if s, ok := errorStatus[code]; ok {
		return s.status
	}
	return http.StatusInternalServerError
}

// problemFor builds the problem document for err, as seen by r. The detail
// is model.ErrorMessage(err): client-safe, never SQL, a DSN or a stack.
func problemFor(r *http.Request, err error) (Problem, string) {
	code, detail := model.ErrorCodeAndMessage(err)
	s, ok := errorStatus[code]
	if !ok {
		code = model.EInternal
		s = errorStatus[code]
	}
	return Problem{
		Type:      ProblemType(code),
		Title:     s.title,
		Status:    s.status,
		Detail:    detail,
		Code:      code,
		Instance:  r.URL.Path,
		RequestID: RequestID(r.Context()),
	}, s.retryAfter
}

// writeError answers r with the problem document for err. 5xx errors are
// logged in full (with their cause) under the request id; a client only
// sees the client-safe message.
func writeError(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	if sw, ok := r.Context().Value(requestIDKey).(*statusWriter); ok {
		if sw.holdForFailover(r, err) {
			return // answered by a rerun (failover.go)
		}
		err = sw.inDoubt(r, err)
	}
	p, retryAfter := problemFor(r, err)
	if p.Status >= 500 {
		logger.LogAttrs(r.Context(), slog.LevelError, "request failed",
			slog.String("request_id", p.RequestID),
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.String("code", p.Code),
			slog.String("error", err.Error()))
	}
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	writeProblem(w, p)
}

func writeProblem(w http.ResponseWriter, p Problem) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Del("ETag")
	h.Del("Location")
	w.WriteHeader(p.Status)
	n := 96 + len(p.Type) + len(p.Title) + len(p.Detail) + len(p.Code) + len(p.Instance) + len(p.RequestID)
	_, _ = w.Write(p.appendJSON(make([]byte, 0, n)))
}

// appendJSON appends p as encoding/json writes it (its fields in order,
// the empty optional ones left out) and a newline, without reflection:
// a 404 is the answer to every check of an edge that is not there.
func (p Problem) appendJSON(b []byte) []byte {
	b = append(b, `{"type":`...)
	b = appendJSONString(b, p.Type)
	b = append(b, `,"title":`...)
	b = appendJSONString(b, p.Title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(p.Status), 10)
	if p.Detail != "" {
		b = append(b, `,"detail":`...)
		b = appendJSONString(b, p.Detail)
	}
	b = append(b, `,"code":`...)
	b = appendJSONString(b, p.Code)
	if p.Instance != "" {
		b = append(b, `,"instance":`...)
		b = appendJSONString(b, p.Instance)
	}
	if p.RequestID != "" {
		b = append(b, `,"request_id":`...)
		b = appendJSONString(b, p.RequestID)
	}
	return append(b, "}\n"...)
}

// errorf returns a client error with the given code and message.
func errorf(code, format string, args ...any) error { return model.Errorf(code, format, args...) }

// refusalCodes are the codes of the statuses the connection loop refuses
// a request with.
var refusalCodes = map[int]string{
	http.StatusBadRequest:                  EMalformedRequest,
	http.StatusRequestTimeout:              ERequestTimeout,
	http.StatusRequestEntityTooLarge:       model.ETooLarge,
	http.StatusRequestHeaderFieldsTooLarge: EHeadersTooLarge,
}

// Refuse answers a request the connection loop refused before the API
// read it (internal/httpserve's Config.Refuse): a body over the API's
// limit, headers over theirs, a request that is not HTTP/1.1, one that
// did not arrive in time. The answer is the API's: the problem document
// of the status's code (too_large, headers_too_large, malformed_request,
// request_timeout) with detail, the request id (the client's X-Request-Id
// when the loop read the headers) and the Date header, and the request
// is counted and logged as every other. r needs a URL, which may be
// empty.
func (s *Server) Refuse(w http.ResponseWriter, r *http.Request, status int, detail string) {
	code, ok := refusalCodes[status]
	if !ok {
		code = EMalformedRequest
	}
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w, id: r.Header.Get(RequestIDHeader)}
	if !validRequestID(sw.id) {
		sw.id = newRequestID()
	}
	sw.idHeader[0] = sw.id
	h := w.Header()
	h[RequestIDHeader] = sw.idHeader[:]
	h["Date"] = s.date.at(start)
	sw.ctx = requestContext{Context: r.Context(), sw: sw}
	r = r.WithContext(&sw.ctx)
	writeError(sw, r, s.logger, errorf(code, "%s", detail))
	s.record(sw, r, start)
}
