package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pinstore/pinstore/internal/progress"
	"github.com/pinstore/pinstore/migrations"
	"github.com/pinstore/pinstore/store/topology"
)

// MigrateOptions tunes Migrate.
type MigrateOptions struct {
	PerHost  int           // shards migrated at once on one host; default 4
	Progress io.Writer     // receives "migrate: N/M shards, R shards/s, about T left" lines; nil for none
	Every    time.Duration // how often; default a second
}

// Migrate creates every shard database the map names (and only those) and
// brings each to the newest embedded migration. It runs hosts in parallel
// and at most PerHost shards at once per host. Each shard records applied
// versions in its schema_migrations table and every statement is
// idempotent, so an interrupted run is finished by running it again, and
// a run on an up-to-date fleet only reads one version per shard. On each
// host it records the deployment (migrations.RecordDeployment) once that
// host's shards are migrated, and it refuses a host whose record says the
// prefix holds another shard count: another deployment's databases.
func (s *Ops) Migrate(ctx context.Context, opt MigrateOptions) error {
	ms, err := migrations.All()
	if err != nil {
		return err
	}
	if opt.PerHost <= 0 {
		opt.PerHost = 4
	}
	if opt.Every <= 0 {
		opt.Every = time.Second
	}
	t := s.router.Current()
	total := t.Len()
	var done atomic.Int64
	stopProgress := func() {}
	start := time.Now()
	if opt.Progress != nil {
		stopProgress = every(opt.Every, func() {
			n, el := done.Load(), time.Since(start)
			fmt.Fprintf(opt.Progress, "migrate: %d/%d shards, %.1f shards/s, %s\n", n, total, float64(n)/el.Seconds(), progress.Left(n, int64(total), el))
		})
	}
	var wg sync.WaitGroup
	hosts := t.Hosts()
	m := t.Map()
	for _, h := range hosts {
		// Never migrate into another deployment's databases.
		if n, ok, err := migrations.RecordedDeployment(ctx, h.DB, m.DBPrefix); err != nil {
			return fmt.Errorf("migrate host %q: read the deployment's record: %w", h.Name, classify("store.Migrate", topology.Shard{Host: h}, err))
		} else if ok && n != m.Shards {
			return fmt.Errorf("migrate: mysql host %q holds a deployment of %d shards under the prefix %q, and this map has %d: it is another deployment's (choose another PINSTORE_DB_PREFIX), or the map's shard count is wrong", h.Name, n, m.DBPrefix, m.Shards)
		}
	}
	errs := make([]error, len(hosts))
	for i, h := range hosts {
		shards := t.ShardsOf(h)
		wg.Go(func() {
			if errs[i] = s.migrateHost(ctx, h, t, shards, ms, opt.PerHost, &done); errs[i] == nil {
				// Recorded once every shard of the host is migrated: a
				// server checks the record before it writes (provision.go).
				if err := migrations.RecordDeployment(ctx, h.DB, m.DBPrefix, m.Shards); err != nil {
					errs[i] = fmt.Errorf("migrate host %q: record the deployment: %w", h.Name, err)
				}
			}
		})
	}
	wg.Wait()
	stopProgress()
	if opt.Progress != nil {
		fmt.Fprintf(opt.Progress, "migrate: %d/%d shards in %v\n", done.Load(), total, time.Since(start).Round(time.Millisecond))
	}
	return errors.Join(errs...)
}

func (s *Ops) migrateHost(ctx context.Context, h *topology.Host, t *topology.Topology, shards []int, ms []migrations.Migration, par int, done *atomic.Int64) error {
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range min(par, len(shards)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				sh, _ := t.Shard(n)
				err := s.pace(ctx, h.Name)
				if err == nil {
					err = migrations.Apply(ctx, h.DB, sh.Name, ms)
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("migrate host %q shard %d: %w", h.Name, n, classify("store.Migrate", sh, err))
					}
					mu.Unlock()
					continue
				}
				done.Add(1)
			}
		}()
	}
	for _, n := range shards {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed || ctx.Err() != nil {
			break
		}
		work <- n
	}
	close(work)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

// pace holds background work on host back while Config.Pace says so.
func (s *core) pace(ctx context.Context, host string) error {
	if s.cfg.Pace == nil {
		return nil
	}
	return s.cfg.Pace(ctx, host)
}

// SetPace sets Config.Pace: the commands that migrate or repair set it
// once they have read their flags, before the work starts.
func (s *Ops) SetPace(pace func(ctx context.Context, host string) error) { s.cfg.Pace = pace }

// every calls fn every d until the returned stop is called; stop returns
// once fn is no longer running. It reports progress of long operations.
func every(d time.Duration, fn func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(d)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				fn()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
