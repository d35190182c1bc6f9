package httpserve

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Lingering: a connection the server refused a request on (a body over
// the limit, headers over theirs, a malformed request) may still have
// bytes of it on the way. Closed at once, with those bytes unread, the
// socket would answer them with a reset, which can reach the client
// before it has read the refusal. So the server shuts its side, reads and
// drops at most lingerBytes more for at most lingerTime, then closes
// (2 MiB: a client that sent a megabyte-sized body reads its 413).
const (
	lingerTime  = time.Second
	lingerBytes = 2 << 20
)

// listener wraps every connection it accepts into a conn of its server.
type listener struct {
	net.Listener
	s *Server
}

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.s.track(c), nil
}

// conn is one accepted connection: the request in flight on it, whether
// its client has gone, and its place in the server's watcher.
type conn struct {
	net.Conn
	s  *Server
	id uint64

	mu      sync.Mutex
	req     *requestContext // the request in flight, nil between requests
	gone    bool            // the client closed or reset the connection
	linger  bool            // a request was refused: close gently (Close)
	watched bool            // registered with the server's watcher
	closed  atomic.Bool
}

// track registers c with s: in the set of open connections and, where the
// platform allows, with the watcher that sees its client go.
func (s *Server) track(nc net.Conn) *conn {
	c := &conn{Conn: nc, s: s, id: s.nextID.Add(1)}
	s.mu.Lock()
	s.conns[c.id] = c
	s.mu.Unlock()
	if s.watch != nil {
		c.watched = c.control(func(fd int) bool { return s.watch.add(fd, c.id) == nil })
	}
	return c
}

// control runs f on c's file descriptor, while it is sure to be open;
// false when the connection has none.
func (c *conn) control(f func(fd int) bool) bool {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	done := false
	if err := raw.Control(func(fd uintptr) { done = f(int(fd)) }); err != nil {
		return false
	}
	return done
}

// begin makes rc the request in flight on c; a connection whose client
// is gone, or a server past its shutdown's grace, cancels it at once.
func (c *conn) begin(rc *requestContext) {
	c.mu.Lock()
	c.req = rc
	gone := c.gone
	c.mu.Unlock()
	if gone || c.s.cancelled.Load() {
		rc.cancel()
	}
}

// end clears the request in flight.
func (c *conn) end() {
	c.mu.Lock()
	c.req = nil
	c.mu.Unlock()
}

// lost cancels the request in flight on c, and any that comes after:
// its client has gone (the watcher saw it), or the server gave up waiting.
func (c *conn) lost(gone bool) {
	c.mu.Lock()
	if gone {
		c.gone = true
	}
	rc := c.req
	c.mu.Unlock()
	if rc != nil {
		rc.cancel()
	}
}

// refused marks c to be closed gently: the request refused on it may still
// be arriving.
func (c *conn) refused() {
	c.mu.Lock()
	c.linger = true
	c.mu.Unlock()
}

// Close leaves the watcher and the server's set, then closes c: at once,
// or after lingering when a request was refused on it.
func (c *conn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	if c.watched {
		// Before the descriptor is closed, so its number, which a new
		// connection may get next, is never removed in its stead.
		c.control(func(fd int) bool { c.s.watch.remove(fd); return true })
	}
	c.s.mu.Lock()
	delete(c.s.conns, c.id)
	c.s.mu.Unlock()
	c.mu.Lock()
	linger := c.linger
	c.mu.Unlock()
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok && linger {
		if cw.CloseWrite() == nil && c.Conn.SetReadDeadline(time.Now().Add(lingerTime)) == nil {
			go func() {
				_, _ = io.CopyN(io.Discard, c.Conn, lingerBytes)
				_ = c.Conn.Close()
			}()
			return nil
		}
	}
	return c.Conn.Close()
}

// requestContext is a request's context: done when its client goes away,
// when the server gives up waiting for it at a shutdown, or when its
// handler returns. It carries no values and no deadline; the work a
// handler starts sets its own deadlines. It implements the AfterFunc
// method package context looks for, so the contexts derived from it
// (context.WithTimeout, context.AfterFunc) register with it instead of
// starting a goroutine each.
type requestContext struct {
	mu     sync.Mutex
	done   chan struct{} // made on the first Done, or closed by cancel
	err    error
	afters []*afterFunc
}

type afterFunc struct{ f func() }

// closedDone is the Done of a context cancelled before anyone asked.
var closedDone = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (c *requestContext) Deadline() (time.Time, bool) { return time.Time{}, false }

func (c *requestContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.err != nil {
			return closedDone
		}
		c.done = make(chan struct{})
	}
	return c.done
}

func (c *requestContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *requestContext) Value(any) any { return nil }

// AfterFunc runs f in a goroutine of its own once c is done; stop
// unregisters it and reports whether it did so before f was started.
func (c *requestContext) AfterFunc(f func()) (stop func() bool) {
	a := &afterFunc{f: f}
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	c.afters = append(c.afters, a)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.afters {
			if x == a {
				c.afters = append(c.afters[:i], c.afters[i+1:]...)
				return true
			}
		}
		return false
	}
}

// cancel ends c (context.Canceled); a second cancel does nothing.
func (c *requestContext) cancel() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = context.Canceled
	if c.done != nil {
		close(c.done)
	}
	afters := c.afters
	c.afters = nil
	c.mu.Unlock()
	for _, a := range afters {
		go a.f()
	}
}

func (c *requestContext) String() string { return "httpserve.requestContext" }
