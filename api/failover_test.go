package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// fakeFailover judges errDown failures (sent or not) as a master's that
// a failover ends, and returns from AwaitChange after d or at once.
type fakeFailover struct {
	window time.Duration
	waits  int
}

var (
	errDownUnsent = model.Wrap("store.Get", model.EUnavailable, "mysql host \"a\" is unavailable", errors.New("dial: refused"))
	errDownSent   = model.Wrap("store.Update", model.EUnavailable, "mysql host \"a\" is unavailable", errors.New("connection lost"))
)

func (f *fakeFailover) Window() time.Duration { return f.window }
func (f *fakeFailover) HostFailure(err error) (bool, bool) {
	switch {
	case errors.Is(err, errDownUnsent):
		return true, true
	case errors.Is(err, errDownSent):
		return true, false
	}
	return false, false
}
func (f *fakeFailover) AwaitChange(ctx context.Context, d time.Duration) { f.waits++ }

// TestFailoverHold: a request a failed master refused runs again once a
// new map comes when that repeats nothing: a read always; an edit whose
// write was never sent and that committed nothing; never an edit whose
// write was sent (it is answered as in doubt) or a request after one of
// its writes committed. Past the window, the last error is answered.
func TestFailoverHold(t *testing.T) {
	pinDoc := []byte(`{"board_id":"` + vecBoard + `","owner_id":"` + vecUser + `","active":true}`)
	failing := func(errs ...error) (func() error, *int) {
		n := 0
		return func() error {
			n++
			if n <= len(errs) {
				return errs[n-1]
			}
			return nil
		}, &n
	}
	cases := []struct {
		name         string
		method, path string
		body         string
		errs         []error
		commitFirst  bool
		window       time.Duration
		status       int
		calls        int
		detail       string
	}{
		{"a read runs again", "GET", "/v1/pins/" + vecPin, "", []error{errDownSent, errDownUnsent}, false, time.Minute, 200, 3, ""},
		{"an edit never sent runs again", "PATCH", "/v1/pins/" + vecPin, `{"description":"x"}`, []error{errDownUnsent}, false, time.Minute, 200, 2, ""},
		{"an edit sent is in doubt", "PATCH", "/v1/pins/" + vecPin, `{"description":"x"}`, []error{errDownSent}, false, time.Minute, 503, 1, "in doubt"},
		{"an edit after one of its writes committed is in doubt", "PATCH", "/v1/pins/" + vecPin, `{"description":"x"}`, []error{errDownUnsent}, true, time.Minute, 503, 1, "in doubt"},
		{"past the window", "GET", "/v1/pins/" + vecPin, "", []error{errDownUnsent, errDownUnsent, errDownUnsent}, false, 0, 503, 1, "unavailable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fail, calls := failing(c.errs...)
			st := fakeStore{
				get: func(ctx context.Context, id uint64, typ idcodec.Type) (model.Object, error) {
					if c.method == "GET" {
						if err := fail(); err != nil {
							return model.Object{}, err
						}
					}
					return model.Object{ID: id, Type: typ, Version: 1, Doc: pinDoc, Flags: storedFlags(typ, pinDoc)}, nil
				},
				update: func(ctx context.Context, id uint64, typ idcodec.Type, ifVersion int64, mutate func([]byte) ([]byte, error)) (model.Object, error) {
					if c.commitFirst {
						model.WritesOf(ctx).Commit()
					}
					if err := fail(); err != nil {
						return model.Object{}, err
					}
					return model.Object{ID: id, Type: typ, Version: 2, Doc: pinDoc, Flags: storedFlags(typ, pinDoc)}, nil
				},
			}
			f := &fakeFailover{window: c.window}
			s, _, _ := newTestServer(t, &st, asPrincipal(writeTok), func(cfg *Config) { cfg.Failover = f })
			w := do(s, c.method, c.path, c.body)
			if w.Code != c.status || *calls != c.calls {
				t.Fatalf("status %d after %d calls, want %d after %d: %s", w.Code, *calls, c.status, c.calls, w.Body)
			}
			if c.detail != "" && !strings.Contains(w.Body.String(), c.detail) {
				t.Fatalf("answer lacks %q: %s", c.detail, w.Body)
			}
			if w.Code == http.StatusOK && f.waits != c.calls-1 {
				t.Fatalf("%d waits for a new map, want %d", f.waits, c.calls-1)
			}
		})
	}
}
