package netlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

// Environment of a helper process: which helper, and its arguments.
const (
	envHelper = "NETLAB_HELPER" // "etcd", "listen", "dial"
	envArg    = "NETLAB_ARG"
)

// Helper runs this process as the helper a lab asked for and exits, when
// it is one; otherwise it returns at once. Call it first in TestMain.
func Helper() {
	var err error
	switch os.Getenv(envHelper) {
	case "":
		return
	case "etcd":
		err = runEtcd(os.Getenv(envArg))
	case "listen":
		err = runListen(os.Getenv(envArg))
	case "dial":
		err = runDial(os.Getenv(envArg))
	default:
		err = fmt.Errorf("unknown helper %q", os.Getenv(envHelper))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "netlab helper: %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Etcd is a one-member etcd running in a node.
type Etcd struct {
	Node *Node
	Proc *Proc
}

// Endpoint is the member's client address (IP:2379).
func (e *Etcd) Endpoint() string { return net.JoinHostPort(e.Node.IP.String(), "2379") }

// StartEtcd starts a one-member etcd in node n (the embedded server of
// the etcd version the project's client uses, in a helper process) and
// waits until it answers. Its data lives in the lab's directory.
func (l *Lab) StartEtcd(n *Node) *Etcd {
	l.tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		l.tb.Fatalf("netlab: %v", err)
	}
	dir := filepath.Join(l.dir, "etcd-"+n.Name)
	e := &Etcd{Node: n}
	e.Proc = l.Start(n, "etcd-"+n.Name, []string{envHelper + "=etcd", envArg + "=" + n.IP.String() + "," + dir}, exe, "-test.run=^$")
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 2 * time.Second})
	if err != nil {
		l.tb.Fatalf("netlab: etcd client: %v", err)
	}
	defer cli.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cli.Status(ctx, e.Endpoint())
		cancel()
		if err == nil {
			return e
		}
		if e.Proc.Exited() || time.Now().After(deadline) {
			l.tb.Fatalf("netlab: etcd in %s did not answer: %v\n%s", n.Name, err, e.Proc.Tail(4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runEtcd serves one etcd member on arg's IP (client 2379, peer 2380)
// with its data in arg's directory ("IP,DIR") until SIGTERM.
func runEtcd(arg string) error {
	ip, dir, ok := strings.Cut(arg, ",")
	if !ok {
		return fmt.Errorf("etcd helper: %q is not IP,DIR", arg)
	}
	cfg := embed.NewConfig()
	cfg.Name = "e"
	cfg.Dir = dir
	client := url.URL{Scheme: "http", Host: net.JoinHostPort(ip, "2379")}
	peer := url.URL{Scheme: "http", Host: net.JoinHostPort(ip, "2380")}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = "e=" + peer.String()
	cfg.InitialClusterToken = filepath.Base(dir)
	cfg.LogLevel = "error"
	cfg.UnsafeNoFsync = true // tests don't simulate machine crashes
	cfg.TickMs, cfg.ElectionMs = 50, 500
	cfg.ListenMetricsUrls = nil
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-stop:
		return nil
	case err := <-e.Err():
		return err
	}
}

// runListen accepts TCP connections on arg (IP:PORT) and echoes what
// each sends, until SIGTERM: a peer for the lab's own tests.
func runListen(arg string) error {
	ln, err := net.Listen("tcp", arg)
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	return ln.Close()
}

// StartListener starts an echo server on n's IP and port in a helper
// process and returns its address once it accepts connections.
func (l *Lab) StartListener(n *Node, port int) string {
	l.tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		l.tb.Fatalf("netlab: %v", err)
	}
	addr := net.JoinHostPort(n.IP.String(), fmt.Sprint(port))
	p := l.Start(n, fmt.Sprintf("listen-%s-%d", n.Name, port), []string{envHelper + "=listen", envArg + "=" + addr}, exe, "-test.run=^$")
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return addr
		}
		if p.Exited() || time.Now().After(deadline) {
			l.tb.Fatalf("netlab: listener in %s: %v\n%s", n.Name, err, p.Tail(2000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Reach reports whether a TCP connection from node from to addr gets an
// echo back within timeout (a helper process in from dials it): nil, or
// what went wrong. Processes in the root namespace reach every node
// without it.
func (l *Lab) Reach(from *Node, addr string, timeout time.Duration) error {
	l.tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		l.tb.Fatalf("netlab: %v", err)
	}
	cmd := exec.Command("ip", "netns", "exec", from.NS, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"=dial", envArg+"="+addr+","+timeout.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("from %s to %s: %v: %s", from.Name, addr, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// runDial connects to arg's address ("IP:PORT,TIMEOUT"), sends a byte and
// reads it back, all within the timeout.
func runDial(arg string) error {
	addr, d, ok := strings.Cut(arg, ",")
	if !ok {
		return fmt.Errorf("dial helper: %q is not ADDR,TIMEOUT", arg)
	}
	timeout, err := time.ParseDuration(d)
	if err != nil {
		return err
	}
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte{1}); err != nil {
		return err
	}
	_, err = io.ReadFull(c, make([]byte, 1))
	return err
}
