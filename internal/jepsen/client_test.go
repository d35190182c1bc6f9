package jepsen

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// requestTimeout is how long a writer waits for an answer: past it the
// write is in doubt.
const requestTimeout = 6 * time.Second

// client sends the writers' requests, with the service token.
type client struct{ hc *http.Client }

func newClient() *client {
	return &client{hc: &http.Client{
		Timeout:   requestTimeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second},
	}}
}

// answer is what came back: status 0 when nothing did (err says why).
type answer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

// do sends body as JSON; headers are name, value pairs.
func (c *client) do(ctx context.Context, method, url string, body any, headers ...string) answer {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return answer{err: err}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+serviceToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{err: err}
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// pin is the part of a pin the ledger compares.
type pin struct {
	ID          string `json:"id"`
	Version     int64  `json:"version"`
	Description string `json:"description"`
}

// decodePin reads a pin from an answer's body; ok false when it is none.
func (a answer) pin() (pin, bool) {
	var p pin
	if json.Unmarshal(a.body, &p) != nil || p.ID == "" || p.Version == 0 {
		return p, false
	}
	return p, true
}
