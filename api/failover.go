package api

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/pinstore/pinstore/model"
)

// Failover holds a request that a shard's master failed (dead, cut off,
// or fenced by a failover) in the server until the map names a new
// master, then runs it again, so that a failover inside the write buffer
// window is not seen by clients (Config.Failover). A request runs again
// only when that cannot do anything twice: nothing of the failed write
// was sent and no write of the request had committed, or the request is
// safe to repeat whole (GET, HEAD, PUT, and a POST with an
// Idempotency-Key, whose replay answers the first create).
type Failover interface {
	// Window is how long a request may wait (the write buffer's).
	Window() time.Duration
	// HostFailure says whether err is a master's failure a failover can
	// end, and whether nothing of the failed write was sent.
	HostFailure(err error) (failed, unsent bool)
	// AwaitChange returns when the next map is in force, after d, or
	// when ctx ends.
	AwaitChange(ctx context.Context, d time.Duration)
}

// failoverRetry is how often a held request tries again when no new map
// comes (the master may simply answer again).
const failoverRetry = 200 * time.Millisecond

// holdForFailover reports whether writeError should hold err instead of
// answering it: the request then runs again (observe).
func (w *statusWriter) holdForFailover(r *http.Request, err error) bool {
	f := w.failover
	if f == nil || w.status != 0 {
		return false
	}
	failed, unsent := f.HostFailure(err)
	if !failed {
		return false
	}
	repeatable := r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodPut ||
		r.Method == http.MethodPost && r.Header.Get(IdempotencyKeyHeader) != ""
	if !repeatable && !(unsent && !w.writes.Committed()) {
		return false
	}
	if w.holdUntil.IsZero() {
		w.holdUntil = w.started.Add(f.Window())
	}
	if !time.Now().Before(w.holdUntil) {
		return false
	}
	w.held = err
	return true
}

// inDoubt is err, for a write its master failed after it was sent and
// that will not run again: its answer says that the write may have been
// applied, and how to find out.
func (w *statusWriter) inDoubt(r *http.Request, err error) error {
	if w.failover == nil || r.Method == http.MethodGet || r.Method == http.MethodHead {
		return err
	}
	if failed, unsent := w.failover.HostFailure(err); !failed || unsent && !w.writes.Committed() {
		return err
	}
	return model.Wrap("", model.EUnavailable, "the write is in doubt: its database host failed while it ran, so it may or may not have been applied; "+
		"read it back, or retry it safely: a create with its Idempotency-Key, an edit with If-Match (412 then means it was applied)", err)
}

// rerun runs a held request again, after a new map or a moment, until it
// is answered or its window ends (then the last error is answered).
func (s *Server) rerun(next http.Handler, sw *statusWriter, r *http.Request) {
	for sw.held != nil {
		err := sw.held
		sw.held = nil
		sw.failover.AwaitChange(r.Context(), min(failoverRetry, time.Until(sw.holdUntil)))
		if r.Context().Err() != nil || !time.Now().Before(sw.holdUntil) {
			sw.failover = nil // answer this time
			writeError(sw, r, s.logger, err)
			return
		}
		if sw.body != nil {
			r.Body = io.NopCloser(bytes.NewReader(sw.body))
		}
		h := sw.Header()
		h.Del("ETag")
		h.Del("Location")
		next.ServeHTTP(sw, r)
	}
}

// keepBody keeps the body a handler read, for a rerun (rerun).
func keepBody(r *http.Request, b []byte) {
	if sw, ok := r.Context().Value(requestIDKey).(*statusWriter); ok {
		sw.body = b
	}
}
