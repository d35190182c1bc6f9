package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"
)

// leanClient is a minimal HTTP/1.1 keep-alive client for the load runs:
// it writes a request with one buffered write and reads the response with
// a reused buffer. The load generator shares the machine's cores with the
// server, MariaDB and Redis; net/http's client spends several times more
// CPU per request (a read and a write goroutine per connection, header
// maps, channel hand-offs), and that CPU would be taken from the server
// being measured. It speaks only what pinstore answers: Content-Length or
// chunked bodies, keep-alive.
type leanClient struct {
	host string // host:port
	auth string // the Authorization header's value, "" for none
	idle chan *leanConn
}

type leanConn struct {
	c   net.Conn
	r   *bufio.Reader
	w   []byte
	buf []byte
}

func newLeanClient(base, auth string, conns int) (*leanClient, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("bad -addr %q", base)
	}
	if u.Scheme != "http" {
		return nil, fmt.Errorf("the lean client speaks plain http only (use -client net for %s)", u.Scheme)
	}
	return &leanClient{host: u.Host, auth: auth, idle: make(chan *leanConn, 2*conns)}, nil
}

func (l *leanClient) get() (*leanConn, error) {
	select {
	case c := <-l.idle:
		return c, nil
	default:
	}
	c, err := net.DialTimeout("tcp", l.host, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &leanConn{c: c, r: bufio.NewReaderSize(c, 64<<10)}, nil
}

func (l *leanClient) put(c *leanConn) {
	select {
	case l.idle <- c:
	default:
		c.c.Close()
	}
}

// do sends one request; out (optional) receives the decoded JSON body. A
// non-2xx status is an *httpError.
func (l *leanClient) do(ctx context.Context, method, path, ctype string, body []byte, out any) error {
	c, err := l.get()
	if err != nil {
		return err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(30 * time.Second)
	}
	c.c.SetDeadline(deadline)
	w := append(c.w[:0], method...)
	w = append(w, ' ')
	w = append(w, path...)
	w = append(w, " HTTP/1.1\r\nHost: "...)
	w = append(w, l.host...)
	w = append(w, "\r\n"...)
	if l.auth != "" {
		w = append(w, "Authorization: "...)
		w = append(w, l.auth...)
		w = append(w, "\r\n"...)
	}
	if body != nil || method != "GET" {
		w = append(w, "Content-Length: "...)
		w = strconv.AppendInt(w, int64(len(body)), 10)
		w = append(w, "\r\n"...)
	}
	if ctype != "" {
		w = append(w, "Content-Type: "...)
		w = append(w, ctype...)
		w = append(w, "\r\n"...)
	}
	w = append(w, "\r\n"...)
	w = append(w, body...)
	c.w = w
	if _, err := c.c.Write(w); err != nil {
		c.c.Close()
		return err
	}
	status, resp, keep, err := c.readResponse(method)
	if err != nil {
		c.c.Close()
		return err
	}
	if keep {
		l.put(c)
	} else {
		c.c.Close()
	}
	if status/100 != 2 {
		return &httpError{status, string(resp)}
	}
	if out != nil {
		return json.Unmarshal(resp, out)
	}
	return nil
}

var errBadResponse = errors.New("malformed HTTP response")

// readResponse reads the status line, the headers it needs and the body
// into c.buf (valid until the next request on c).
func (c *leanConn) readResponse(method string) (status int, body []byte, keep bool, err error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, nil, false, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, nil, false, errBadResponse
	}
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, false, errBadResponse
	}
	length, chunked, keep := -1, false, true
	for {
		h, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, nil, false, err
		}
		h = bytes.TrimRight(h, "\r\n")
		if len(h) == 0 {
			break
		}
		k, v, ok := bytes.Cut(h, []byte(":"))
		if !ok {
			return 0, nil, false, errBadResponse
		}
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(v)); err != nil {
				return 0, nil, false, errBadResponse
			}
		case bytes.EqualFold(k, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(v, []byte("chunked"))
		case bytes.EqualFold(k, []byte("Connection")):
			keep = !bytes.EqualFold(v, []byte("close"))
		}
	}
	c.buf = c.buf[:0]
	switch {
	case method == "HEAD" || status == 204 || status == 304:
	case chunked:
		for {
			l, err := c.r.ReadSlice('\n')
			if err != nil {
				return 0, nil, false, err
			}
			l, _, _ = bytes.Cut(bytes.TrimRight(l, "\r\n"), []byte(";"))
			n, err := strconv.ParseInt(string(l), 16, 64)
			if err != nil || n < 0 {
				return 0, nil, false, errBadResponse
			}
			if n == 0 {
				if _, err := c.r.Discard(2); err != nil { // no trailers from pinstore
					return 0, nil, false, err
				}
				break
			}
			start := len(c.buf)
			c.buf = append(c.buf, make([]byte, n)...)
			if _, err := io.ReadFull(c.r, c.buf[start:]); err != nil {
				return 0, nil, false, err
			}
			if _, err := c.r.Discard(2); err != nil {
				return 0, nil, false, err
			}
		}
	case length >= 0:
		if cap(c.buf) < length {
			c.buf = make([]byte, length)
		}
		c.buf = c.buf[:length]
		if _, err := io.ReadFull(c.r, c.buf); err != nil {
			return 0, nil, false, err
		}
	default:
		return 0, nil, false, errors.New("response without a length")
	}
	return status, c.buf, keep, nil
}
