package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/pinstore/pinstore/model"
)

// ChangeFeed is the change stream as GET /v1/changes reads it.
type ChangeFeed interface {
	// Changes tells emit every change after the token after, filtered by
	// types and lists (comma-separated names; "" is every one), one line
	// of NDJSON at a time with the token that resumes after it; event is
	// false for a line that only carries progress. It returns when ctx
	// ends or emit fails. A malformed token or filter is EInvalid, a token
	// the hosts' binlogs no longer hold EConflict, a host that cannot feed
	// the stream EUnavailable.
	Changes(ctx context.Context, after, types, lists string, emit func(line []byte, token string, event bool) error) error
}

// Limits of one GET /v1/changes.
const (
	defaultChangeLimit = 1000
	maxChangeLimit     = 10000
	defaultChangeWait  = 10 // seconds
	maxChangeWait      = 30
	// changeLinger is how long a batch that has events waits for more
	// before it is answered.
	changeLinger = 100 * time.Millisecond
)

// changeBatch is GET /v1/changes: the changes after the token, as NDJSON,
// a batch at a time. It answers once it holds limit events, once
// changeLinger passed with no new event after the first, or after wait
// seconds; the last line always carries the token that resumes after the
// batch, and the client asks again with it. (The server buffers each
// response whole, so a batch is answered at once, not line by line.)
func (s *Server) changeBatch(w http.ResponseWriter, r *http.Request) error {
	if s.changes == nil {
		return errorf(model.EUnavailable, "this server has no change stream")
	}
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), defaultChangeLimit, 1, maxChangeLimit, "limit")
	if err != nil {
		return err
	}
	wait, err := intParam(q.Get("wait"), defaultChangeWait, 1, maxChangeWait, "wait")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Duration(wait)*time.Second)
	defer cancel()
	var (
		mu    sync.Mutex
		body  []byte
		n     int
		last  string
		timer = time.AfterFunc(time.Hour, cancel)
	)
	timer.Stop()
	defer timer.Stop()
	err = s.changes.Changes(ctx, q.Get("after"), q.Get("types"), q.Get("lists"), func(line []byte, token string, event bool) error {
		mu.Lock()
		defer mu.Unlock()
		last = token
		if !event {
			return nil
		}
		body = append(append(body, line...), '\n')
		n++
		if n >= limit {
			cancel()
			return context.Canceled
		}
		timer.Reset(changeLinger)
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if last == "" || ctx.Err() == nil {
		if err == nil || ctx.Err() != nil {
			err = errorf(model.EUnavailable, "the change stream did not start in %ds", wait)
		}
		return err
	}
	end, _ := json.Marshal(struct {
		Kind  string `json:"kind"`
		Token string `json:"token"`
	}{"progress", last})
	body = append(append(body, end...), '\n')
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(body)
	return err
}

// intParam reads an integer query parameter in [lo, hi]; "" is def.
func intParam(s string, def, lo, hi int, name string) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, errorf(model.EInvalid, "%s must be an integer from %d to %d", name, lo, hi)
	}
	return n, nil
}
