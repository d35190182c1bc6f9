package ownercache_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
)

func pinID(shard uint32, local uint64) uint64 {
	return idcodec.MustEncode(shard, idcodec.TypePin, local)
}

func userID(shard uint32, local uint64) uint64 {
	return idcodec.MustEncode(shard, idcodec.TypeUser, local)
}

// newClient returns a go-redis client on addr configured the way pinstore
// should configure it: contexts bound socket I/O, short dial timeout.
func newClient(tb testing.TB, addr string, hooks ...redis.Hook) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		DialTimeout:           200 * time.Millisecond,
		ReadTimeout:           time.Second,
		WriteTimeout:          time.Second,
	})
	for _, h := range hooks {
		c.AddHook(h)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// sharedClient returns a client on the primary Redis (PINSTORE_TEST_REDIS_ADDR,
// default 127.0.0.1:6379); testenv skips the test when it is unreachable, or
// fails it when CI=true.
func sharedClient(tb testing.TB, hooks ...redis.Hook) *redis.Client {
	tb.Helper()
	return newClient(tb, testenv.RedisAddr(tb), hooks...)
}

// uniquePrefix returns a key prefix used by this test alone and deletes every
// key under it when the test ends.
func uniquePrefix(tb testing.TB, client redis.UniversalClient) string {
	tb.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatal(err)
	}
	prefix := "pinstore:test:ownercache:" + hex.EncodeToString(b[:]) + ":"
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := deleteKeys(ctx, client, prefix); err != nil {
			tb.Errorf("cleanup of %s*: %v", prefix, err)
		}
	})
	return prefix
}

// deleteKeys deletes every key that starts with prefix, which must hold no
// glob metacharacters.
func deleteKeys(ctx context.Context, client redis.UniversalClient, prefix string) error {
	var cursor uint64
	for {
		keys, next, err := client.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := client.Unlink(ctx, keys...).Err(); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

func countKeys(tb testing.TB, client redis.UniversalClient, prefix string) int {
	tb.Helper()
	n := 0
	iter := client.Scan(context.Background(), 0, prefix+"*", 1000).Iterator()
	for iter.Next(context.Background()) {
		n++
	}
	if err := iter.Err(); err != nil {
		tb.Fatal(err)
	}
	return n
}

// counter returns the value of the counter name on reg whose labels include
// the given name/value pairs (summed when several match), 0 if none.
func counter(tb testing.TB, reg *prometheus.Registry, name string, labels ...string) float64 {
	tb.Helper()
	families, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metrics
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// countHook counts what a go-redis client sends: single commands and
// pipelines (each pipeline is one write and one read of replies). It leaves
// out what go-redis sends on its own when it opens a connection (HELLO,
// CLIENT SETINFO, ...), which is not the cache's traffic.
type countHook struct {
	process, pipelines, pipelinedCmds atomic.Int64
}

func isConnSetup(cmd redis.Cmder) bool {
	switch cmd.Name() {
	case "hello", "client", "auth", "select", "readonly":
		return true
	}
	return false
}

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isConnSetup(cmd) {
			h.process.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && !isConnSetup(cmds[0]) {
			h.pipelines.Add(1)
			h.pipelinedCmds.Add(int64(len(cmds)))
		}
		return next(ctx, cmds)
	}
}

func (h *countHook) reset() {
	h.process.Store(0)
	h.pipelines.Store(0)
	h.pipelinedCmds.Store(0)
}

// redisServer is a private redis-server a test starts, stops, pauses and
// restarts on its own loopback port. It dies with the test.
type redisServer struct {
	tb   testing.TB
	bin  string
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// startRedis starts a private redis-server with no persistence plus the
// given extra arguments ("--name", "value", ...). Without a redis-server
// binary it skips the test, or fails it when CI=true.
func startRedis(tb testing.TB, extra ...string) *redisServer {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("CI=true and redis-server is not on PATH (%v): install redis-server", err)
		}
		tb.Skipf("redis-server not on PATH (%v); skipping", err)
	}
	s := &redisServer{tb: tb, bin: bin, port: testenv.FreePort(tb), dir: tb.TempDir(), args: extra}
	tb.Cleanup(s.Stop)
	s.Start()
	return s
}

func (s *redisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Start (re)starts the server on its port and waits until it answers PING.
func (s *redisServer) Start() {
	s.tb.Helper()
	args := append([]string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log"),
	}, s.args...)
	cmd := exec.Command(s.bin, args...)
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		s.tb.Fatalf("start redis-server: %v", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) { cmd.Wait(); close(done) }(s.done)

	c := redis.NewClient(&redis.Options{Addr: s.Addr(), DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil {
			return
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.tb.Fatalf("redis-server on port %d exited: %s", s.port, bytes.TrimSpace(log))
		default:
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("redis-server on port %d not ready: %v", s.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (SIGKILL, as a crash) and waits for it to exit.
func (s *redisServer) Stop() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT) // in case it is paused
	s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Pause freezes the server (SIGSTOP): connections stay open, nothing answers.
func (s *redisServer) Pause() { s.signal(syscall.SIGSTOP) }

// Resume undoes Pause.
func (s *redisServer) Resume() { s.signal(syscall.SIGCONT) }

func (s *redisServer) signal(sig syscall.Signal) {
	s.tb.Helper()
	if s.cmd == nil {
		s.tb.Fatal("redis-server is not running")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.tb.Fatalf("signal %v: %v", sig, err)
	}
}

func (s *redisServer) String() string { return fmt.Sprintf("redis-server %s", s.Addr()) }
