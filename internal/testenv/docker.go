package testenv

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
)

// docker holds the per-process Docker pool and the containers it started.
var docker struct {
	mu         sync.Mutex
	pool       *dockertest.Pool
	poolErr    error
	poolDone   bool
	containers []*dockertest.Resource
}

// dockerPool returns a pool on a Docker engine that answered a ping, or an
// error wrapping errUnavailable.
func dockerPool() (*dockertest.Pool, error) {
	docker.mu.Lock()
	defer docker.mu.Unlock()
	if !docker.poolDone {
		docker.poolDone = true
		docker.pool, docker.poolErr = newDockerPool()
	}
	return docker.pool, docker.poolErr
}

func newDockerPool() (*dockertest.Pool, error) {
	pool, err := dockertest.NewPool("")
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, errUnavailable)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	if err := pool.Client.PingWithContext(ctx); err != nil {
		return nil, fmt.Errorf("docker: %v: %w", err, errUnavailable)
	}
	pool.MaxWait = 2 * time.Minute
	return pool, nil
}

// runContainer starts opts, waits until ready(host:port of port) succeeds and
// returns that address. The container removes itself after 30 minutes even if
// Cleanup never runs.
func runContainer(opts *dockertest.RunOptions, port string, ready func(string) error) (string, error) {
	pool, err := dockerPool()
	if err != nil {
		return "", err
	}
	res, err := pool.RunWithOptions(opts, func(hc *dc.HostConfig) {
		hc.AutoRemove = true
		hc.RestartPolicy = dc.RestartPolicy{Name: "no"}
	})
	if err != nil {
		return "", fmt.Errorf("docker run %s:%s: %w", opts.Repository, opts.Tag, err)
	}
	docker.mu.Lock()
	docker.containers = append(docker.containers, res)
	docker.mu.Unlock()
	_ = res.Expire(30 * 60)
	addr := res.GetHostPort(port)
	if err := pool.Retry(func() error { return ready(addr) }); err != nil {
		return "", fmt.Errorf("docker %s:%s at %s never became ready: %w", opts.Repository, opts.Tag, addr, err)
	}
	return addr, nil
}

// purgeContainers removes every container runContainer started. It is
// idempotent.
func purgeContainers() {
	docker.mu.Lock()
	cs := docker.containers
	docker.containers = nil
	pool := docker.pool
	docker.mu.Unlock()
	for _, c := range cs {
		_ = pool.Purge(c)
	}
}

func dockerMySQL() (string, error) {
	addr, err := runContainer(&dockertest.RunOptions{
		Repository: "mariadb",
		Tag:        "10.11",
		Env:        []string{"MARIADB_ALLOW_EMPTY_ROOT_PASSWORD=1"},
		Cmd: []string{"--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci",
			"--skip-name-resolve", "--max-connections=500"},
	}, "3306/tcp", func(addr string) error { return pingMySQL(rootDSN(addr)) })
	if err != nil {
		return "", err
	}
	return rootDSN(addr), nil
}

func dockerRedis() (string, error) {
	return runContainer(&dockertest.RunOptions{
		Repository: "redis",
		Tag:        "7",
		Cmd:        []string{"redis-server", "--hash-max-listpack-entries", "1024"},
	}, "6379/tcp", pingRedis)
}
