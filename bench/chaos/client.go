package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"
)

// outcome is what a write's answer says about whether it took effect.
type outcome int

const (
	// acked: a 2xx answer; the write took effect.
	acked outcome = iota
	// rejected: a 4xx answer; the server refused the write before changing
	// anything.
	rejected
	// notSent: the connection was refused; the request never reached a
	// server.
	notSent
	// unknownSettled: a 5xx answer, or the connection died with the request
	// on it (the server was killed). The write may or may not have taken
	// effect, but nothing of it runs any more.
	unknownSettled
	// unknownPending: the client gave up waiting (timeout). The write may
	// still take effect later, after writes sent after it.
	unknownPending
)

func (o outcome) String() string {
	return [...]string{"acked", "rejected", "not_sent", "unknown", "unknown_pending"}[o]
}

// answer is one HTTP exchange.
type answer struct {
	status  int
	body    []byte
	err     error
	outcome outcome
	kind    string // "ok", "http_404:not_found", "refused", "reset", "timeout", …
	// replayed: the answer is the stored response of an earlier request
	// with the same Idempotency-Key (Idempotent-Replayed: true)
	replayed bool
	start    time.Time
	end      time.Time
}

type client struct {
	base string
	hc   *http.Client
}

func newClient(base string, conns int, timeout time.Duration) *client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &client{base: base, hc: &http.Client{Transport: tr, Timeout: timeout}}
}

// do sends one request. body, when not nil, is JSON-encoded (a []byte is
// sent as is). It never returns an error: the answer classifies it.
func (c *client) do(ctx context.Context, method, path string, body any, ctype string) answer {
	return c.doKey(ctx, method, path, body, ctype, "")
}

// doKey is do with an Idempotency-Key header (none when key is "").
func (c *client) doKey(ctx context.Context, method, path string, body any, ctype, key string) answer {
	a := answer{start: time.Now()}
	defer func() { a.end = time.Now() }()
	var rd io.Reader
	if body != nil {
		b, ok := body.([]byte)
		if !ok {
			var err error
			if b, err = json.Marshal(body); err != nil {
				panic(err)
			}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		panic(err)
	}
	if body != nil {
		if ctype == "" {
			ctype = "application/json"
		}
		req.Header.Set("Content-Type", ctype)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.hc.Do(req)
	if err == nil {
		a.body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		a.status = resp.StatusCode
		a.replayed = resp.Header.Get("Idempotent-Replayed") == "true"
	}
	a.end = time.Now()
	if err != nil {
		a.err = err
		a.kind, a.outcome = classifyErr(err)
		return a
	}
	switch {
	case a.status >= 200 && a.status < 300:
		a.kind, a.outcome = "ok", acked
	case a.status >= 400 && a.status < 500:
		a.kind, a.outcome = fmt.Sprintf("http_%d:%s", a.status, problemCode(a.body)), rejected
	default:
		a.kind, a.outcome = fmt.Sprintf("http_%d:%s", a.status, problemCode(a.body)), unknownSettled
	}
	return a
}

// classifyErr names a transport error and says what it implies for a
// write.
func classifyErr(err error) (string, outcome) {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return "refused", notSent
		}
		return "dial_error", notSent
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return "timeout", unknownPending
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout", unknownPending
	}
	if errors.Is(err, syscall.ECONNRESET) {
		return "reset", unknownSettled
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "eof", unknownSettled
	}
	return "transport_error", unknownSettled
}

func problemCode(b []byte) string {
	var p struct {
		Code string `json:"code"`
	}
	if json.Unmarshal(b, &p) != nil || p.Code == "" {
		return "?"
	}
	return p.Code
}

// wireObject is the part of an object's wire form the harness reads.
type wireObject struct {
	ID          string `json:"id"`
	Type        string `json:"type"`
	Username    string `json:"username"`
	OwnerID     string `json:"owner_id"`
	BoardID     string `json:"board_id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Link        string `json:"link"`
	Version     int64  `json:"version"`
	Data        struct {
		Marker string `json:"marker"` // the create's unique marker (create.go)
	} `json:"data"`
}

func (o wireObject) field(name string) string {
	switch name {
	case "username":
		return o.Username
	case "owner_id":
		return o.OwnerID
	case "board_id":
		return o.BoardID
	case "name":
		return o.Name
	case "description":
		return o.Description
	case "link":
		return o.Link
	}
	panic("unknown field " + name)
}

type listPage struct {
	Items      []wireObject `json:"items"`
	NextCursor string       `json:"next_cursor"`
	Count      *int64       `json:"count"`
}
