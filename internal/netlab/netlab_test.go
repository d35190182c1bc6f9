package netlab

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/internal/testenv"
)

func TestMain(m *testing.M) {
	Helper()
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

// TestCutAndHeal: nodes reach each other and are reached from the root
// namespace; a cut drops the packets between two nodes both ways, so a
// connection times out rather than being refused, and touches no other
// link; a heal restores it; the lab leaves nothing behind.
func TestCutAndHeal(t *testing.T) {
	var prefix, bridge string
	t.Run("lab", func(t *testing.T) {
		l := New(t)
		prefix, bridge = l.prefix, l.bridge
		a, b, c := l.Node("a"), l.Node("b"), l.Node("c")
		addr := l.StartListener(a, 7000)
		backAddr := l.StartListener(b, 7000)
		for _, n := range []*Node{b, c} {
			if err := l.Reach(n, addr, 2*time.Second); err != nil {
				t.Fatalf("before any cut: %v", err)
			}
		}

		l.Cut([]*Node{a}, []*Node{b})
		if got := l.Cuts(); got != "a-b" {
			t.Fatalf("Cuts() = %q, want a-b", got)
		}
		begin := time.Now()
		err := l.Reach(b, addr, time.Second)
		if err == nil {
			t.Fatal("b reaches a across the cut")
		}
		if !strings.Contains(err.Error(), "timeout") || time.Since(begin) < 900*time.Millisecond {
			t.Fatalf("a cut must drop packets silently (a timeout after 1s), got after %v: %v", time.Since(begin), err)
		}
		if err := l.Reach(a, backAddr, time.Second); err == nil {
			t.Fatal("a reaches b across the cut: it must hold both ways")
		}
		if err := l.Reach(c, addr, 2*time.Second); err != nil {
			t.Fatalf("c is not cut from a: %v", err)
		}
		if conn, err := net.DialTimeout("tcp", addr, 2*time.Second); err != nil {
			t.Fatalf("the root namespace is never cut: %v", err)
		} else {
			conn.Close()
		}

		l.HealAll()
		if err := l.Reach(b, addr, 2*time.Second); err != nil {
			t.Fatalf("after the heal: %v", err)
		}
	})
	if prefix == "" {
		return // skipped
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(out), prefix) {
		t.Errorf("namespaces left after the lab's test:\n%s", out)
	}
	if _, err := net.InterfaceByName(bridge); err == nil {
		t.Errorf("bridge %s left after the lab's test", bridge)
	}
}

// TestMariaDBInNode: a MariaDB host started in a node listens on the
// node's address, is reached from other nodes and the root namespace,
// and its root DSN (a Unix socket) works whatever is cut.
func TestMariaDBInNode(t *testing.T) {
	l := New(t)
	a, b := l.Node("db"), l.Node("client")
	h := testenv.ReplicationHostWith(t, "netlab-db", testenv.HostOptions{ServerID: 1, Netns: a.NS, IP: a.IP.String()})
	if !strings.HasPrefix(h.Addr(), a.IP.String()+":") {
		t.Fatalf("Addr() = %s, want the node's address %s", h.Addr(), a.IP)
	}
	if err := l.Reach(b, h.Addr(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	l.Cut([]*Node{a}, []*Node{b})
	if err := l.Reach(b, h.Addr(), time.Second); err == nil {
		t.Fatal("the client node reaches the database across the cut")
	}
	if got := h.Query(t, "SELECT @@server_id"); got != "1" {
		t.Fatalf("server_id over the socket = %q", got)
	}
	h.Kill(t)
	h.Start(t)
	if got := h.Query(t, "SELECT @@bind_address"); got != a.IP.String() {
		t.Fatalf("bind_address after a restart = %q, want %s", got, a.IP)
	}
}
