package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisCluster starts a Redis Cluster of three masters, private
// redis-servers on free loopback ports (no persistence; extra arguments,
// "--name", "value", … go to each), gives each a third of the 16,384 hash
// slots, and returns their addresses once every node reports
// cluster_state:ok. The servers are killed when tb ends (and with the test
// binary). Without a redis-server binary it skips tb, or fails it when
// CI=true.
func RedisCluster(tb testing.TB, extra ...string) []string {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if inCI() {
			tb.Fatalf("CI=true and redis-server is not on PATH (%v): install redis-server", err)
		}
		tb.Skipf("redis-server not on PATH (%v); skipping", err)
	}
	const nodes, slots = 3, 16384
	addrs := make([]string, nodes)
	ports := make([]int, nodes)
	for i := range addrs {
		ports[i] = FreePort(tb)
		addrs[i] = localAddr(ports[i])
		dir := tb.TempDir()
		args := append([]string{
			"--port", strconv.Itoa(ports[i]), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--daemonize", "no",
			"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"),
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
		}, extra...)
		cmd := exec.Command(bin, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // with the test binary
		p, err := startProc(cmd)
		if err != nil {
			tb.Fatalf("start redis-server: %v", err)
		}
		tb.Cleanup(p.kill)
		if err := waitRedis(addrs[i], p, 10*time.Second); err != nil {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			tb.Fatalf("redis-server on %s: %v: %s", addrs[i], err, strings.TrimSpace(string(log)))
		}
	}
	ctx := context.Background()
	for i, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		err := c.Do(ctx, "cluster", "addslotsrange", i*slots/nodes, (i+1)*slots/nodes-1).Err()
		if err == nil && i > 0 {
			err = c.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(ports[0])).Err()
		}
		c.Close()
		if err != nil {
			tb.Fatalf("redis cluster on %s: %v", addr, err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(nodes)) {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				tb.Fatalf("redis cluster not ready on %s: %q %v", addr, info, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	return addrs
}

// waitRedis waits until the redis-server p started answers PING on addr.
func waitRedis(addr string, p *hostProc, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := pingRedis(addr)
		if err == nil {
			return nil
		}
		if p.hasExited() {
			return fmt.Errorf("exited: %v", p.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %w", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
