package shardsql

import (
	"context"
	"database/sql/driver"
	"errors"
	"net"
	"sync"
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
	s := &socket{Conn: c}
	if slot, ok := ctx.Value(socketSlot{}).(**socket); ok {
		*slot = s
	}
	return s, nil
}

// Connector is mysql.NewConnector(cfg), with connections whose
// transactions can keep their deadline on the socket (Tx.Bound). On a
// network of the caller's own (mysql.RegisterDialContext), its
// transactions' statements keep their contexts.
func Connector(cfg *mysql.Config) (driver.Connector, error) {
	cfg = cfg.Clone()
	own := cfg.Net == "tcp" || cfg.Net == "unix"
	if own {
		cfg.DialFunc = dial
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil || !own {
		return c, err
	}
	return connector{c}, nil
}

type connector struct{ driver.Connector }

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	var s *socket
	conn, err := c.Connector.Connect(context.WithValue(ctx, socketSlot{}, &s))
	if err != nil || s == nil {
		return conn, err
	}
	s.mu.Lock()
	if !s.closed {
		s.conn = conn
		sockets.Store(conn, s)
	}
	s.mu.Unlock()
	return conn, nil
}

// Bound makes ctx's deadline the deadline of the whole of t: of every
// read and write on its connection's socket until Rollback, when
// Connector opened the connection. t's statements then go without the
// driver watching their contexts. Without a deadline in ctx, or on
// another connection, it does nothing.
func (t *Tx) Bound(ctx context.Context) {
	d, ok := ctx.Deadline()
	if !ok || t.sock != nil {
		return
	}
	_ = t.conn.Raw(func(dc any) error {
		if v, ok := sockets.Load(dc); ok && v.(*socket).SetDeadline(d) == nil {
			t.sock = v.(*socket)
		}
		return nil
	})
}

// unbound lifts t's deadline from the socket, before the connection
// sends anything else or goes back to its pool.
func (t *Tx) unbound() {
	if t.sock != nil {
		_ = t.sock.SetDeadline(time.Time{})
		t.sock = nil
	}
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
