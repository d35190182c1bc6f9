package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// The access line written by hand carries what slog's JSON handler wrote
// for the same request, field for field, whatever the path holds.
func TestAccessLineMatchesSlog(t *testing.T) {
	pin := idcodec.MustEncode(3, idcodec.TypePin, 9)
	st := &fakeStore{get: func(_ context.Context, id uint64, typ idcodec.Type) (model.Object, error) {
		if id == pin {
			return model.Object{ID: pin, Type: typ, Version: 1, Doc: []byte(`{"board_id":"1","owner_id":"2","active":true}`)}, nil
		}
		return model.Object{}, model.Wrap("get", model.EInternal, "", nil)
	}}
	viaSlog, _, slogged := newTestServer(t, st)
	var direct bytes.Buffer
	byHand, _, _ := newTestServer(t, st, func(c *Config) { c.AccessLog = &direct })

	for _, path := range []string{
		"/v1/pins/" + idString(pin),                                        // 200
		"/v1/pins/" + idString(idcodec.MustEncode(3, idcodec.TypePin, 10)), // 500 from the store
		`/v1/nothing/"quoted"\back%5C%22%E2%80%A8%FF%01tab%09`,             // 404, escapes and invalid UTF-8
		"/v1/ids/ünïcode",
	} {
		slogged.Reset()
		direct.Reset()
		for _, h := range []http.Handler{viaSlog, byHand} {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.URL.RawPath, r.URL.Path = "", ""
			u, err := r.URL.Parse(path)
			if err != nil {
				t.Fatal(err)
			}
			r.URL = u
			r.Header.Set(RequestIDHeader, "req-1")
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
		if strings.Count(direct.String(), "\n") != 1 || !strings.HasSuffix(direct.String(), "\n") {
			t.Fatalf("%s: not one line: %q", path, direct.String())
		}
		want, got := decodeLine(t, slogged.String()), decodeLine(t, direct.String())
		if _, err := time.Parse(time.RFC3339Nano, got["time"].(string)); err != nil {
			t.Errorf("%s: time %v", path, err)
		}
		if _, ok := got["duration_ms"].(float64); !ok {
			t.Errorf("%s: duration_ms %v", path, got["duration_ms"])
		}
		for _, m := range []map[string]any{want, got} {
			delete(m, "time")
			delete(m, "duration_ms")
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\nby hand %v\nslog    %v", path, got, want)
		}
	}
}

// decodeLine decodes the access line among log lines.
func decodeLine(t *testing.T, logs string) map[string]any {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		if m["msg"] == "http request" {
			return m
		}
	}
	t.Fatalf("no access line in %q", logs)
	return nil
}

// BenchmarkAccessLine: an access line by hand and through slog.
func BenchmarkAccessLine(b *testing.B) {
	r := httptest.NewRequest(http.MethodGet, "/v1/pins/123456789", nil)
	sw := &statusWriter{status: 200, bytes: 312, id: "0123456789abcdef0123456789abcdef"}
	r = r.WithContext(context.WithValue(r.Context(), requestIDKey, sw))
	start := time.Now()
	b.Run("by-hand", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 512)
		for b.Loop() {
			now := time.Now()
			buf = appendAccessLine(buf[:0], now, now.Sub(start), sw, r.Method, "/v1/pins/{id}", r.URL.Path)
		}
	})
	b.Run("slog", func(b *testing.B) {
		b.ReportAllocs()
		logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
		for b.Loop() {
			logger.LogAttrs(r.Context(), slog.LevelInfo, "http request",
				slog.String("request_id", RequestID(r.Context())),
				slog.String("method", r.Method),
				slog.String("route", routePattern(r)),
				slog.String("path", r.URL.Path),
				slog.Int("status", 200),
				slog.String("principal", sw.principal),
				slog.Int64("bytes", sw.bytes),
				slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
			)
		}
	})
}

// Every route's metrics are labelled with the pattern chi itself reports
// for it, so the pre-curried observers count under the same series as a
// look-up by chi's pattern did.
func TestRouteMetricsUseChisPatterns(t *testing.T) {
	st := &fakeStore{get: func(context.Context, uint64, idcodec.Type) (model.Object, error) {
		return model.Object{}, model.Errorf(model.ENotFound, "not found")
	}}
	s, _, _ := newTestServer(t, st)
	n := 0
	for _, rt := range s.routeTable() {
		path := strings.NewReplacer("{id}", vecPin, "{target_id}", vecUser, "{pin_id}", vecPin, "{username}", "someone").Replace(rt.pattern)
		var chiPattern string
		var routed *routeMetrics
		probe := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			chiPattern = routePattern(r)
			routed = w.(*statusWriter).route
		})
		// The route's own handler is replaced by the probe, behind the same
		// wrapper newRouter puts in front of it.
		r := chi.NewRouter()
		r.Use(s.observe)
		r.Method(rt.method, rt.pattern, s.metrics.route(rt.method, rt.pattern).routed(probe))
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(rt.method, path, nil))
		if routed == nil || routed.pattern != chiPattern || routed.pattern != rt.pattern || routed.method != rt.method {
			t.Errorf("%s %s: routed %+v, chi's pattern %q", rt.method, rt.pattern, routed, chiPattern)
		}
		n++
	}
	if n < 40 {
		t.Fatalf("only %d routes checked", n)
	}
}

// A request id is generated when none (or an insane one) comes in, echoed,
// and different for every request.
func TestRequestIDs(t *testing.T) {
	s, _, _ := newTestServer(t, &fakeStore{})
	seen := map[string]bool{}
	for range 1000 {
		w := do(s, "GET", "/healthz", "", RequestIDHeader, "bad id")
		id := w.Header().Get(RequestIDHeader)
		if len(id) != 32 || !validRequestID(id) || seen[id] {
			t.Fatalf("generated request id %q (seen before: %v)", id, seen[id])
		}
		seen[id] = true
	}
	if got := do(s, "GET", "/healthz", "", RequestIDHeader, "req-7").Header().Values(RequestIDHeader); len(got) != 1 || got[0] != "req-7" {
		t.Fatalf("incoming id echoed as %q", got)
	}
}

// Every response carries one Date header of the second it was served in,
// in net/http's format, through a real server: the value made once a
// second replaces net/http's own, never adds a second one.
func TestDateHeader(t *testing.T) {
	s, _, _ := newTestServer(t, &fakeStore{})
	srv := httptest.NewServer(s)
	defer srv.Close()
	for range 3 {
		before := time.Now().Truncate(time.Second)
		res, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		after := time.Now()
		got := res.Header.Values("Date")
		if len(got) != 1 {
			t.Fatalf("Date headers %q, want one", got)
		}
		at, err := http.ParseTime(got[0])
		if err != nil || got[0] != at.UTC().Format(http.TimeFormat) || at.Before(before) || at.After(after) {
			t.Fatalf("Date %q (%v) not the second served in [%v, %v]", got[0], err, before, after)
		}
		time.Sleep(600 * time.Millisecond)
	}
	var d dateHeader
	t0 := time.Date(2026, 11, 26, 8, 0, 1, 200, time.FixedZone("CET", 3600))
	a, b, c := d.at(t0), d.at(t0.Add(500*time.Millisecond)), d.at(t0.Add(time.Second))
	if a[0] != "Thu, 26 Nov 2026 07:00:01 GMT" || &a[0] != &b[0] || c[0] != "Thu, 26 Nov 2026 07:00:02 GMT" || cap(a) != 1 {
		t.Fatalf("same second %q %q, next %q", a, b, c)
	}
}
