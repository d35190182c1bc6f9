package testenv

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
)

// ports remembers the ports FreePort handed out, so one process never hands
// out the same port twice (a stopped Host keeps its port).
var ports struct {
	mu   sync.Mutex
	used map[int]bool
}

// FreePort returns a TCP port on 127.0.0.1 that was free when it was chosen
// and that this process has not handed out before. Another process may still
// take it before the caller binds it.
func FreePort(tb testing.TB) int {
	tb.Helper()
	p, err := freePort()
	if err != nil {
		tb.Fatalf("testenv.FreePort: %v", err)
	}
	return p
}

func freePort() (int, error) {
	ports.mu.Lock()
	defer ports.mu.Unlock()
	if ports.used == nil {
		ports.used = map[int]bool{}
	}
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !ports.used[p] {
			ports.used[p] = true
			return p, nil
		}
	}
	return 0, errors.New("no unused port after 100 tries")
}

// localAddr returns "127.0.0.1:port", where every server this package starts
// listens.
func localAddr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
