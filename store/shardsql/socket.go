package shardsql

import (
	"bytes"
	"context"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// A transaction's deadline is kept on its connection's socket.
//
// go-sql-driver hands every statement whose context can be cancelled to
// the connection's watcher goroutine, and database/sql starts one more
// goroutine for the rows of every read: two or three goroutine switches
// a statement, up to a tenth of the CPU pinstore spends on a create. So
// the statements of a Tx on a connection that Connector opened go
// without them: Bound sets the transaction's deadline on the socket,
// where Go's network poller holds every read and write of every
// statement to it, and the statements then run under their contexts
// without the cancellation (a context already done still stops a
// statement before it is sent). The bound is the whole transaction's,
// whatever context each statement carries, until Rollback gives the
// connection back; a statement's own deadline, when it is earlier, is
// checked as the statement is sent.
//
// The server is told too. A statement whose transaction's context ends
// (its deadline, or its request cancelled: its client gone, its server
// shutting down) would otherwise run on in the server after the socket
// gave up on it: MariaDB does not notice a client gone while a statement
// waits for a lock or computes. So when the context Bound was given ends
// first, the socket's deadline is moved to now (the statement's read
// fails at once) and the connection is killed (KILL, from a connection
// of its own): the statement stops, the transaction rolls back and its
// locks go. The connection is not used again. The server's id of each
// connection is read from its handshake, as the driver reads it.

// sockets maps each connection Connector opened (the driver's
// driver.Conn) to its socket.
var sockets sync.Map

// socket is a connection's network connection, known in sockets while it
// is open.
type socket struct {
	net.Conn
	mu     sync.Mutex
	conn   driver.Conn // the key in sockets; nil until Connect returns
	closed bool

	// The server's id of the connection (its thread id), from its
	// handshake; 0 until it is read.
	threadID  atomic.Uint32
	handshake []byte           // the bytes of the handshake read so far, while threadID is 0
	killer    driver.Connector // opens the connection that kills this one (interrupt)
	// committing: a COMMIT is in flight. It is never killed: a master
	// waiting for a replica's acknowledgement (semi-synchronous) commits a
	// killed transaction without one, visible to others though no replica
	// has it. Its socket's deadline still ends the wait for the client.
	committing atomic.Bool
}

// killTimeout bounds the KILL of a connection whose statement's context
// ended.
const killTimeout = 5 * time.Second

// Read is the connection's, and reads the server's id of the connection
// in its first packet, the handshake: a 4-byte header, the protocol
// version, the server's version ending in NUL, then the id (4 bytes,
// little-endian).
func (s *socket) Read(p []byte) (int, error) {
	n, err := s.Conn.Read(p)
	if s.handshake != nil && n > 0 {
		s.sniff(p[:n])
	}
	return n, err
}

// sniff adds b to the handshake read so far and takes the id from it once
// it is whole; past 256 bytes without one it gives up.
func (s *socket) sniff(b []byte) {
	s.handshake = append(s.handshake, b...)
	h := s.handshake
	if len(h) > 5 {
		if end := bytes.IndexByte(h[5:], 0); end >= 0 && len(h) >= 5+end+1+4 {
			at := 5 + end + 1
			s.threadID.Store(binary.LittleEndian.Uint32(h[at : at+4]))
			s.handshake = nil
			return
		}
	}
	if len(h) > 256 {
		s.handshake = nil
	}
}

// interrupt ends the statement in flight on s, when its transaction's
// context ends: its read fails at once (the socket's deadline is now), and
// the server kills the connection, which stops the statement and rolls
// the transaction back. Runs in a goroutine of its own (context.AfterFunc).
func (s *socket) interrupt() {
	_ = s.Conn.SetDeadline(time.Now())
	id := s.threadID.Load()
	if id == 0 || s.killer == nil || s.committing.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
	defer cancel()
	kc, err := s.killer.Connect(ctx)
	if err != nil {
		return // the server is out of reach: it ends the connection when it sees the socket closed
	}
	defer kc.Close()
	if ex, ok := kc.(driver.ExecerContext); ok {
		_, _ = ex.ExecContext(ctx, "KILL "+strconv.FormatUint(uint64(id), 10), nil)
	}
}

// SyscallConn lets the driver check an idle connection's socket before it
// reuses it, as it does on the sockets it dials itself.
func (s *socket) SyscallConn() (syscall.RawConn, error) {
	if c, ok := s.Conn.(syscall.Conn); ok {
		return c.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

func (s *socket) Close() error {
	s.mu.Lock()
	s.closed = true
	if s.conn != nil {
		sockets.Delete(s.conn)
	}
	s.mu.Unlock()
	return s.Conn.Close()
}

// socketSlot is the context key under which a Connect learns the socket
// its dial opened.
type socketSlot struct{}

// dial is the driver's dial, keeping the socket where Connect finds it.
// net.Dialer turns TCP keep-alives on, as the driver does for its own.
func dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	slot, ok := ctx.Value(socketSlot{}).(**socket)
	if !ok {
		return c, nil // a connection of interrupt's, or Connect's own check
	}
	s := &socket{Conn: c, handshake: make([]byte, 0, 128)}
	*slot = s
	return s, nil
}

// Connector is mysql.NewConnector(cfg), with connections whose
// transactions can keep their deadline on the socket (Tx.Bound) and whose
// round trips m records (meter.go; nil: none). On a network of the
// caller's own (mysql.RegisterDialContext), its transactions' statements
// keep their contexts and nothing is recorded.
func Connector(cfg *mysql.Config, m *Meter) (driver.Connector, error) {
	cfg = cfg.Clone()
	own := cfg.Net == "tcp" || cfg.Net == "unix"
	if own {
		cfg.DialFunc = dial
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil || !own {
		return c, err
	}
	return connector{c, m}, nil
}

type connector struct {
	driver.Connector
	m *Meter
}

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	var s *socket
	start := time.Now()
	conn, err := c.Connector.Connect(context.WithValue(ctx, socketSlot{}, &s))
	if err != nil {
		c.m.done(start, err) // a dial that failed: a failed round trip
	}
	if err != nil || s == nil {
		return conn, err
	}
	conn = meter(conn, c.m) // the key in sockets: what database/sql holds
	s.mu.Lock()
	s.killer = c.Connector
	if !s.closed {
		s.conn = conn
		sockets.Store(conn, s)
	}
	s.mu.Unlock()
	return conn, nil
}

// Bound makes ctx's deadline the deadline of the whole of t: of every
// read and write on its connection's socket until Rollback, when
// Connector opened the connection; and when ctx ends before Rollback
// (its deadline, or its cancellation), the statement in flight is
// stopped in the server too (socket.interrupt). t's statements then go
// without the driver watching their contexts. On another connection, or
// with a ctx that can neither end nor be cancelled, it does nothing.
func (t *Tx) Bound(ctx context.Context) {
	d, hasDeadline := ctx.Deadline()
	if ctx.Done() == nil || t.sock != nil {
		return
	}
	_ = t.conn.Raw(func(dc any) error {
		v, ok := sockets.Load(dc)
		if !ok {
			return nil
		}
		s := v.(*socket)
		s.committing.Store(false)
		if hasDeadline && s.SetDeadline(d) != nil {
			return nil
		}
		t.sock, t.deadline = s, d
		t.stopInterrupt = context.AfterFunc(ctx, s.interrupt)
		return nil
	})
}

// unbound lifts t's deadline from the socket, before the connection
// sends anything else or goes back to its pool. It reports whether the
// connection was interrupted (Bound's context ended first): then it must
// not be used again.
func (t *Tx) unbound() (interrupted bool) {
	if t.sock == nil {
		return false
	}
	switch {
	case t.stopInterrupt != nil && !t.stopInterrupt():
		interrupted = true
	case !t.deadline.IsZero() && !time.Now().Before(t.deadline):
		// The socket's deadline can fail a statement before ctx's timer
		// fires: the statement may still run in the server.
		go t.sock.interrupt()
		interrupted = true
	default:
		_ = t.sock.SetDeadline(time.Time{})
	}
	t.sock, t.stopInterrupt, t.deadline = nil, nil, time.Time{}
	return interrupted
}

// run is the context a statement of t is sent with: ctx, or, when the
// socket holds t's deadline, ctx without its cancellation, which the
// driver then need not watch. A ctx already done is kept, so that the
// statement fails before it is sent.
func (t *Tx) run(ctx context.Context) context.Context {
	if t.sock == nil || ctx.Done() == nil || ctx.Err() != nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}
