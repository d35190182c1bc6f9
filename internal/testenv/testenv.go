// Package testenv gives integration tests the servers they run against: the
// primary MariaDB and Redis, extra MariaDB hosts a test starts, stops and
// restarts itself, and database-name prefixes that keep test data away from
// real shards.
//
// Invariants:
//
//   - A server that isn't there never passes silently in CI: when MariaDB or
//     Redis is unreachable and no Docker engine can supply one, the test is
//     skipped, unless the environment variable CI is "true", in which case it
//     fails with a message naming the address and how to start the server.
//   - Every DSN this package returns names no database
//     ("root@tcp(127.0.0.1:3306)/"); callers append a database name or
//     "?param=value" themselves.
//   - Database names a test creates start with a prefix from [UniquePrefix],
//     which ends in "_", so they can never equal a real shard name
//     ("db%05d", no underscore), and [DropDatabases] and [DropKeys] only
//     drop names that start with such a prefix.
//   - Every mariadbd this package starts dies with the test binary (Pdeathsig),
//     even when the binary is killed; [Cleanup] also deletes their data
//     directories, and a later run removes directories left by a killed one.
//   - [Cleanup] must be called from TestMain, after m.Run, in every package
//     that uses [SharedHost] or may fall back to Docker: shared hosts and
//     containers live until then.
//
// The package keeps per-process state (the resolved servers, the hosts it
// started): that is the point of it, since one test binary shares one server
// among its tests and must stop what it started when it exits.
//
// Where things are: testenv.go resolves the primary servers and decides
// between skip and failure; mysql.go and redis.go hold each primary's
// address, ping and drop helper; docker.go the containers started when a
// primary is missing; host.go the [Host] type and its life; mariadbd.go
// running the server binary; cleanup.go data directories and what removes
// them; prefix.go and ports.go the names and ports handed out once per
// process.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// Environment variables and defaults naming the primary servers.
const (
	EnvMySQLDSN      = "PINSTORE_TEST_MYSQL_DSN"
	EnvRedisAddr     = "PINSTORE_TEST_REDIS_ADDR"
	DefaultMySQLDSN  = "root@tcp(127.0.0.1:3306)/"
	DefaultRedisAddr = "127.0.0.1:6379"
)

// pingTimeout bounds every "is it there?" check: a primary, a container, the
// Docker engine.
const pingTimeout = 3 * time.Second

// errUnavailable marks a missing server or binary: a skip outside CI, a
// failure in CI. Any other error is always a failure.
var errUnavailable = errors.New("unavailable")

// inCI reports whether missing servers must fail the test rather than skip it.
func inCI() bool { return os.Getenv("CI") == "true" }

// report ends tb according to err: nothing when err is nil, Skip or Fatal (in
// CI) when err wraps errUnavailable, Fatal otherwise.
func report(tb testing.TB, err error, howTo string) {
	tb.Helper()
	switch {
	case err == nil:
	case !errors.Is(err, errUnavailable):
		tb.Fatalf("testenv: %v", err)
	case inCI():
		tb.Fatalf("\n*** testenv: CI=true and a required server is missing; this is a failure, not a skip ***\n%v\nTo fix: %s", err, howTo)
	default:
		tb.Skipf("testenv: %v; skipping (set CI=true to make this a failure). To run it: %s", err, howTo)
	}
}

// primary is one primary server (MariaDB or Redis): where to look for it,
// how to check it and how to start one in Docker, and the per-process answer
// to "where is it?".
type primary struct {
	what   string // "MariaDB", "Redis": for messages
	env    string // environment variable naming it
	def    string // address when env is unset
	howTo  string // how to start one, for the skip or failure message
	ping   func(addr string) error
	docker func() (string, error)

	once sync.Once
	addr string
	err  error
}

// get resolves p once per process and returns its address, or skips or
// fails tb as [report] does.
func (p *primary) get(tb testing.TB) string {
	tb.Helper()
	p.once.Do(func() {
		p.addr, p.err = resolve(p.what, envOr(p.env, p.def), p.ping, p.docker)
	})
	report(tb, p.err, p.howTo)
	return p.addr
}

// resolve returns addr if ping accepts it, else the address of a server
// started by docker. It wraps errUnavailable when ping fails and docker
// reports errUnavailable.
func resolve(what, addr string, ping func(string) error, docker func() (string, error)) (string, error) {
	perr := ping(addr)
	if perr == nil {
		return addr, nil
	}
	daddr, derr := docker()
	if derr == nil {
		return daddr, nil
	}
	if errors.Is(derr, errUnavailable) {
		return "", fmt.Errorf("%s is not reachable at %s (%v) and no Docker engine can start one (%v): %w",
			what, addr, perr, derr, errUnavailable)
	}
	return "", fmt.Errorf("%s is not reachable at %s (%v) and starting it in Docker failed: %v", what, addr, perr, derr)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
