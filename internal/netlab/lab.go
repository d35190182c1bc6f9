package netlab

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinstore/pinstore/internal/testenv"
)

// subnetBase is the first two octets of the lab's /24 (10.147.N.0/24, N
// chosen so that no interface of the machine has an address in it).
const subnetBase = "10.147"

const howTo = "run the test as root on Linux with iproute2 (apt-get install -y iproute2) and nftables in the kernel"

// labs counts the labs this process made: it tells their names apart.
var labs atomic.Int32

// Lab is a bridge in the root namespace and the nodes on it.
type Lab struct {
	tb     testing.TB
	prefix string // nl<pid><k>: every name the lab gives starts with it
	bridge string
	net    [3]byte // the /24's first three octets
	dir    string  // process logs and helper data

	mu    sync.Mutex
	nodes []*Node
	cuts  map[[2]*Node]bool // a pair, in node order, whose link is cut
	fw    *firewall
}

// Node is a network namespace with one address on the lab's bridge.
type Node struct {
	Name string // as the test calls it ("m", "s1")
	NS   string // the namespace's name, for `ip netns exec`
	IP   net.IP
	veth string // the bridge's end of its veth pair
}

// String is the node's name.
func (n *Node) String() string { return n.Name }

// New makes a lab: a bridge in the root namespace with an address on a
// free /24, and an nftables table of its own on the bridge's forward
// path. It removes what earlier runs whose process is gone left, and
// everything it made when tb ends. Without the capability it skips tb,
// or fails it with CI=true.
func New(tb testing.TB) *Lab {
	tb.Helper()
	if err := capable(); err != nil {
		unavailable(tb, err)
	}
	sweepStale()
	l := &Lab{
		tb:     tb,
		prefix: fmt.Sprintf("nl%d%c", os.Getpid(), 'a'+labs.Add(1)-1),
		cuts:   map[[2]*Node]bool{},
		dir:    tb.TempDir(),
	}
	l.bridge = l.prefix + "b"
	n, err := freeSubnet()
	if err != nil {
		tb.Fatalf("netlab: %v", err)
	}
	l.net = [3]byte{10, 147, n}
	tb.Cleanup(l.destroy)
	if err := ipCmd("link", "add", l.bridge, "type", "bridge"); err != nil {
		unavailable(tb, fmt.Errorf("cannot make a bridge: %w", err))
	}
	if err := ipCmd("addr", "add", l.addr(1).String()+"/24", "dev", l.bridge); err != nil {
		tb.Fatalf("netlab: %v", err)
	}
	if err := ipCmd("link", "set", l.bridge, "up"); err != nil {
		tb.Fatalf("netlab: %v", err)
	}
	fw, err := newFirewall("netlab_" + l.prefix)
	if err != nil {
		unavailable(tb, fmt.Errorf("nftables: %w", err))
	}
	l.fw = fw
	tb.Logf("netlab: lab %s on %s.%d.0/24 (bridge %s)", l.prefix, subnetBase, n, l.bridge)
	return l
}

// addr is the lab's address ending in last.
func (l *Lab) addr(last byte) net.IP { return net.IPv4(l.net[0], l.net[1], l.net[2], last) }

// HostIP is the root namespace's address on the bridge: where the nodes
// reach the test.
func (l *Lab) HostIP() net.IP { return l.addr(1) }

// Dir is a directory for the lab's files (process logs, helper data),
// deleted when the test ends.
func (l *Lab) Dir() string { return l.dir }

// Node adds a node called name: a namespace with loopback up and a veth
// on the bridge with the next free address.
func (l *Lab) Node(name string) *Node {
	l.tb.Helper()
	l.mu.Lock()
	i := len(l.nodes)
	n := &Node{Name: name, NS: l.prefix + "-" + name, IP: l.addr(byte(10 + i)), veth: fmt.Sprintf("%s%d", l.prefix, i)}
	l.nodes = append(l.nodes, n)
	l.mu.Unlock()
	if i >= 200 {
		l.tb.Fatalf("netlab: too many nodes")
	}
	steps := [][]string{
		{"netns", "add", n.NS},
		{"link", "add", n.veth, "type", "veth", "peer", "name", "eth0", "netns", n.NS},
		{"link", "set", n.veth, "master", l.bridge, "up"},
		{"-n", n.NS, "addr", "add", n.IP.String() + "/24", "dev", "eth0"},
		{"-n", n.NS, "link", "set", "eth0", "up"},
		{"-n", n.NS, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := ipCmd(s...); err != nil {
			l.tb.Fatalf("netlab: node %s: %v", name, err)
		}
	}
	return n
}

// destroy removes the lab's table, namespaces and links. Processes in
// the namespaces were stopped by their own cleanups (registered later, so
// run earlier).
func (l *Lab) destroy() {
	if l.fw != nil {
		if err := l.fw.remove(); err != nil {
			l.tb.Errorf("netlab: removing nftables table: %v", err)
		}
	}
	l.mu.Lock()
	nodes := l.nodes
	l.mu.Unlock()
	for _, n := range nodes {
		killIn(n.NS)
		_ = ipCmd("netns", "del", n.NS)
		_ = ipCmd("link", "del", n.veth) // gone with the namespace, normally
	}
	if err := ipCmd("link", "del", l.bridge); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
		l.tb.Errorf("netlab: %v", err)
	}
}

// capable says what is missing for a lab, or nil.
func capable() error {
	if os.Geteuid() != 0 {
		return errors.New("not root: network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("the ip command (iproute2) is not on the PATH")
	}
	return nil
}

// unavailable ends tb for a missing capability: a skip, or a failure with
// CI=true.
func unavailable(tb testing.TB, err error) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("\n*** netlab: CI=true and %v; this is a failure, not a skip ***\nTo fix: %s", err, howTo)
	}
	tb.Skipf("netlab: %v; skipping (set CI=true to make this a failure). To run it: %s", err, howTo)
}

// ipCmd runs ip with args; the error holds its output.
func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// freeSubnet returns N such that no interface has an address in
// 10.147.N.0/24, starting from a number derived from the process id so
// that two runs at once rarely try the same one.
func freeSubnet() (byte, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return 0, fmt.Errorf("listing addresses: %w", err)
	}
	used := map[byte]bool{}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip4 := ipn.IP.To4(); ip4 != nil && ip4[0] == 10 && ip4[1] == 147 {
				used[ip4[2]] = true
			}
		}
	}
	start := os.Getpid() % 250
	for i := range 250 {
		n := byte(1 + (start+i)%250)
		if !used[n] {
			return n, nil
		}
	}
	return 0, errors.New("no free /24 in 10.147.0.0/16")
}

// staleRe matches the names a lab gives, capturing the owner's pid.
var staleRe = regexp.MustCompile(`^(?:netlab_)?nl(\d+)[a-z]`)

// staleOwner returns whether name is a lab's and its owner is gone.
func staleOwner(name string) bool {
	m := staleRe.FindStringSubmatch(name)
	if m == nil {
		return false
	}
	pid, err := strconv.Atoi(m[1])
	return err == nil && pid != os.Getpid() && !testenv.ProcessAlive(pid)
}

var sweepOnce sync.Once

// sweepStale removes the namespaces, links and nftables tables of labs
// whose process is gone (a run that was killed), once per process.
func sweepStale() {
	sweepOnce.Do(func() {
		if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
			for _, line := range strings.Split(string(out), "\n") {
				f := strings.Fields(line)
				if len(f) > 0 && staleOwner(f[0]) {
					killIn(f[0])
					_ = ipCmd("netns", "del", f[0])
				}
			}
		}
		if ifs, err := net.Interfaces(); err == nil {
			for _, i := range ifs {
				if staleOwner(i.Name) {
					_ = ipCmd("link", "del", i.Name)
				}
			}
		}
		removeStaleTables(staleOwner)
	})
}

// killIn kills the processes left in namespace ns (normally none: they
// die with the binary that started them) and waits briefly for them.
func killIn(ns string) {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for testenv.ProcessAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}
