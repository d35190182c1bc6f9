package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/pinstore/pinstore/api"
	"github.com/pinstore/pinstore/cluster/backup"
	"github.com/pinstore/pinstore/cluster/etcdtopo"
	"github.com/pinstore/pinstore/cluster/failover"
	"github.com/pinstore/pinstore/internal/httpserve"
	"github.com/pinstore/pinstore/internal/tracing"
	"github.com/pinstore/pinstore/store"
	"github.com/pinstore/pinstore/store/replicas"
	"github.com/pinstore/pinstore/store/shardmap"
	"github.com/pinstore/pinstore/store/topology"
)

// The store serves every interface the API declares (api.Store: Creator,
// ObjectReader, ObjectWriter, Lister, MappingWriter, FeedReader,
// OwnerCache, Ops).
var _ api.Store = (*store.Store)(nil)

// Consistency tokens are package replicas' (api.Config.Consistency).
var _ api.Consistency = replicas.Tokens{}

// defaultGCPercent is the garbage collector's target when GOGC is not set.
const defaultGCPercent = 400

// defaultShutdownTimeout bounds the graceful shutdown when
// PINSTORE_SHUTDOWN_TIMEOUT does not say otherwise: requests in flight get
// this long to finish once the context is cancelled; then their contexts
// are cancelled, which stops their statements.
const defaultShutdownTimeout = 15 * time.Second

// shutdownTimeout reads PINSTORE_SHUTDOWN_TIMEOUT (a Go duration).
func shutdownTimeout(getenv func(string) string) (time.Duration, error) {
	return durationFromEnv(getenv, "PINSTORE_SHUTDOWN_TIMEOUT", defaultShutdownTimeout, false)
}

// runServe is `pinstore serve`: it opens the store, serves the API on
// --addr until ctx is cancelled, then shuts down gracefully (in-flight
// requests finish, up to PINSTORE_SHUTDOWN_TIMEOUT, then are cancelled)
// and closes the store. Logs are
// JSON lines on stderr; the first one after start-up says where it
// listens ("msg":"listening","addr":…), with the real port when --addr
// asked for port 0.
func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "serve [--addr HOST:PORT] [--backups DIR]\n\nruns the HTTP API until interrupted", stderr)
	env := readServeEnv(getenv)
	addr := fs.String("addr", env.addr, "address to listen on (env PINSTORE_ADDR)")
	backups := fs.String("backups", "", "a directory of backups (pinstore backup --to DIR under it): /metrics reports each host's last good backup's age")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected arguments %q", fs.Args())
	}
	logger, err := serveLogger(env.logLevel, stderr)
	if err != nil {
		return err
	}
	if getenv("GOGC") == "" {
		// The live heap is small (about 10 MB) and a request leaves a few
		// KiB of garbage: at Go's default of 100 the collector ran some 40
		// times a second under load.
		debug.SetGCPercent(defaultGCPercent)
	}
	authMW, authn, err := serveAuth(env.auth, *addr, logger) // token.go: refuses to start without tokens
	if err != nil {
		return err
	}
	tokensEvery, err := tokensPoll(getenv)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	grace, err := shutdownTimeout(getenv)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if *backups != "" {
		reg.MustRegister(backup.NewCollector(*backups))
	}

	cfg, err := storeConfig(getenv)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	autoOn, autoAfter, err := autoFailover(getenv)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if autoOn && getenv("PINSTORE_TOPOLOGY") == "" {
		return errors.New("serve: PINSTORE_FAILOVER=auto needs the topology in etcd (PINSTORE_TOPOLOGY): the servers elect the one that fails over there, and report there which masters they see down")
	}
	admin, err := mysqlAccess(getenv)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	cfg.Logger = logger
	cfg.Registerer = reg
	cfg.Replicas.Registerer = reg
	if cfg.FeedSweep, err = feedSweep(getenv); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if cfg.PairSweep, err = pairSweep(getenv); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	topo, err := openTopology(ctx, getenv, &cfg)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer topo.close()
	var source *topologySource
	if topo != nil {
		source = &topologySource{t: topo}
		cfg.Source = source
		logger.Info("shard map read from etcd", "topology", topo.c.URL().String(), "revision", topo.rev, "version", cfg.Map.Version(), "summary", cfg.Map.Summary())
	}
	// Before the store opens: its Redis client is instrumented only
	// when tracing is on.
	stopTracing, err := tracing.Setup(ctx, "pinstore", getenv)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = stopTracing(sctx) // flushes the spans still queued
	}()
	st, err := store.Open(ctx, cfg)
	if err != nil {
		return fmt.Errorf("serve: open store: %w", err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			logger.Error("closing the store", "error", err.Error())
		}
	}()
	if err := checkProvisioned(ctx, st, logger); err != nil {
		return fmt.Errorf("serve: %w", err)
	}

	// The operator edits the shard map and the tokens file while pinstore
	// runs: poll them, and reload both at once on SIGHUP. A malformed file
	// is logged and ignored: what is in force stays.
	var reloads []func()
	if cfg.MapFile != "" {
		every, err := mapPoll(getenv)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		go st.Router().Watch(ctx, every, logger)
		reloads = append(reloads, func() {
			if err := st.Router().ReloadFile(); err != nil {
				logger.Error("shard map reload on SIGHUP failed; the old map stays in force", "error", err.Error())
			} else {
				logger.Info("shard map reloaded on SIGHUP", "version", st.Map().Version())
			}
		})
	}
	if path := env.auth.tokensFile; path != "" && authn != nil {
		go authn.WatchServiceTokens(ctx, path, tokensEvery, logger)
		reloads = append(reloads, func() {
			if t, err := authn.ReloadServiceTokens(path); err != nil {
				logger.Error("tokens file reload on SIGHUP failed; the service tokens in force stay", "file", path, "error", err.Error())
			} else {
				logger.Info("service tokens reloaded on SIGHUP", "file", path, "tokens", t.Len(), "names", t.Names())
			}
		})
	}
	if len(reloads) > 0 {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-hup:
					for _, reload := range reloads {
						reload()
					}
				}
			}
		}()
	}
	if dbg := env.debugAddr; dbg != "" {
		if err := serveDebug(ctx, dbg, logger); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
	}

	// Access lines are written in batches (every 100ms or 64 KiB), not one
	// system call per request; everything else is written at once.
	access := newLineBuffer(stderr, 100*time.Millisecond, 64<<10)
	defer access.Close()
	var accessLog io.Writer = access
	if !logger.Enabled(ctx, slog.LevelInfo) {
		accessLog = nil // PINSTORE_LOG_LEVEL above info: only 5xx lines, through logger
	}
	handler, err := api.New(api.Config{Store: st, Logger: logger, AccessLog: accessLog, Registry: reg, Limits: cfg.Limits, Auth: authMW,
		Consistency: replicas.Tokens{}, Failover: failoverHold{st.Router(), max(cfg.FailoverHold, 0)},
		Changes: changeFeed{maps: st.Router().Map, logger: logger}, Fleet: fleetHome{mapFile: cfg.MapFile, topo: topo}})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	srv := httpserve.New(handler, httpserve.Config{
		ReadTimeout:    30 * time.Second,
		WriteTimeout:   60 * time.Second,
		IdleTimeout:    120 * time.Second,
		MaxHeaderBytes: 16 << 10,
		// The API's own limit: a body over it is refused as it arrives.
		MaxBodyBytes: api.DefaultMaxBodyBytes,
		Logger:       logger,
		// What the loop refuses is answered as the API answers.
		Refuse: handler.Refuse,
		// Request contexts don't derive from ctx: a shutdown lets requests
		// in flight finish, for up to the grace, before it cancels them.
	})
	if topo != nil {
		f := followTopology(ctx, topo, st, ln.Addr().String(), logger)
		defer f.Close() // after the last request: the registration goes with it
		source.f = f
		go reportDown(ctx, st, f)
		if autoOn {
			go runAutoFailover(ctx, topo, st, f.Registration().ID, admin, autoAfter, logger)
		}
	}
	logger.Info("listening", "addr", ln.Addr().String())

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down", "timeout", grace.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("serve: shutdown: %w", err)
		}
		logger.Warn("the shutdown's grace ended with requests in flight: they were cancelled", "timeout", grace.String())
	}
	if err := <-served; err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// checkProvisioned checks, before the server listens, that every host of
// the map holds this deployment's shard databases (store.Provisioned). It
// refuses to serve where a host records another deployment under the
// prefix (the same prefix, another shard count), and says loudly at start
// what else is wrong: shards nobody migrated (readiness fails, and every
// write to them would), or databases that migrate did not record as this
// deployment's (they may be another's).
func checkProvisioned(ctx context.Context, st *store.Store, logger *slog.Logger) error {
	m := st.Map()
	for _, p := range st.CheckProvisioning(ctx) {
		switch {
		case !p.Checked:
			// The host does not answer: /readyz says so; checked again
			// every few seconds.
		case p.Foreign(m.Shards):
			return fmt.Errorf("mysql host %q holds another deployment under the database prefix %q (%d shards; this server's map has %d): refusing to write into it; set PINSTORE_DB_PREFIX and PINSTORE_SHARDS (or the map's db_prefix and shards) to this deployment's",
				p.Host, m.DBPrefix, p.RecordedShards, m.Shards)
		case p.Missing > 0:
			logger.Error("SHARDS NOT PROVISIONED: run pinstore migrate; until then /readyz answers 503 and writes to them fail",
				"host", p.Host, "missing", p.Missing, "of", p.Shards, "first", p.FirstMissing, "db_prefix", m.DBPrefix)
		case p.Shards > 0 && !p.Recorded:
			logger.Error("SHARD DATABASES NOT RECORDED AS THIS DEPLOYMENT'S: pinstore migrate did not record them; if they are another deployment's, stop this server now (it writes into them); if they are this one's, run pinstore migrate to record them",
				"host", p.Host, "db_prefix", m.DBPrefix, "shards", m.Shards)
		case p.Version < p.Newest:
			logger.Warn("shard databases behind this server's newest migration: run pinstore migrate",
				"host", p.Host, "version", p.Version, "newest", p.Newest)
		}
	}
	return nil
}

// followTopology starts following the etcd topology: each new map that
// validates is put in force, and this server is registered (ID: host name
// and port) with the version it routes by.
func followTopology(ctx context.Context, topo *etcdTopo, st *store.Store, addr string, logger *slog.Logger) *etcdtopo.Follower {
	host, port, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	id := net.JoinHostPort(host, port)
	m := st.Map()
	// No write is acknowledged before the first renewal of the lease
	// (store/topology/lease.go); they wait for it in the write buffer.
	st.Router().SetLease(time.Now())
	return topo.c.Follow(ctx, topo.rev, m.Version(), etcdtopo.FollowConfig{
		ID: id, Addr: id, Shards: m.Shards, DBPrefix: m.DBPrefix, Logger: logger,
		Drain: st.Router().Drain,
		OnLease: func(until time.Time) {
			if lapsed := st.Router().LeaseLapsed(); lapsed > time.Second {
				logger.Warn("topology lease renewed: writes are taken again", "lapsed_for", lapsed.Round(time.Millisecond).String())
			}
			st.Router().SetLease(until)
		},
		Apply: func(m *shardmap.Map, rev int64) error {
			before := st.Map().Version()
			if m.Version() == before {
				return nil
			}
			if err := st.Router().Reload(m); err != nil {
				return err
			}
			logger.Info("shard map reloaded", "topology", topo.c.URL().String(), "revision", rev, "version", m.Version(), "previous", before,
				"ranges", len(m.Ranges), "hosts", len(m.Hosts), "summary", m.Summary())
			return nil
		},
	})
}

// failoverWindow is how long a request a failed master refused waits for
// a failover: PINSTORE_WRITE_BUFFER when set, else
// topology.DefaultFailoverHold. A move's write buffer defaults to longer
// (it outlasts a default move's hold with a map file), but a request to a
// host that is simply down, with no failover coming, should not wait that
// long for its 503.
func failoverWindow(getenv func(string) string, writeBuffer time.Duration) time.Duration {
	if getenv("PINSTORE_WRITE_BUFFER") == "" {
		return topology.DefaultFailoverHold
	}
	return max(writeBuffer, 0)
}

// failoverHold is what the API needs to hold a request a failed master
// refused until a failover (api.Failover): the write buffer's window,
// the store's judgement of the error, and the map's changes.
type failoverHold struct {
	r      *topology.Router
	window time.Duration
}

func (f failoverHold) Window() time.Duration { return f.window }

// HostFailure holds only requests a host with replicas failed: only there
// can a failover come.
func (f failoverHold) HostFailure(err error) (bool, bool) {
	host, failed, unsent := store.HostFailure(err)
	if !failed {
		return false, false
	}
	for _, h := range f.r.Current().Hosts() {
		if h.Name == host {
			return len(h.Replicas) > 0, unsent
		}
	}
	return false, false
}

func (f failoverHold) AwaitChange(ctx context.Context, d time.Duration) { f.r.AwaitChange(ctx, d) }

// serveDebug serves net/http/pprof on addr, which must be a loopback
// address: profiles are for the operator on the machine, not the network.
func serveDebug(ctx context.Context, addr string, logger *slog.Logger) error {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || (host != "localhost" && (ip == nil || !ip.IsLoopback())) {
		return fmt.Errorf("PINSTORE_DEBUG_ADDR %q must be a loopback address", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	logger.Info("profiling on", "addr", ln.Addr().String())
	return nil
}

// serveLogger is a JSON slog logger at level (debug, info, warn, error;
// default info).
func serveLogger(level string, w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if level != "" {
		if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
			return nil, fmt.Errorf("serve: PINSTORE_LOG_LEVEL: %q is not debug, info, warn or error", level)
		}
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// reportDown keeps this server's registration saying which masters it
// cannot reach (failover.Sightings), every half second, until ctx ends.
func reportDown(ctx context.Context, st *store.Store, f *etcdtopo.Follower) {
	tk := time.NewTicker(500 * time.Millisecond)
	defer tk.Stop()
	for {
		f.SetDown(failover.Sightings(st.Router(), st.Replicas()))
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
	}
}

// runAutoFailover runs automatic failover (PINSTORE_FAILOVER=auto) until
// ctx ends: this server campaigns, and fails over a master a majority of
// the servers see down for after, as pinstore failover would.
func runAutoFailover(ctx context.Context, topo *etcdTopo, st *store.Store, id string, access failover.Access, after time.Duration, logger *slog.Logger) {
	m := st.Map()
	failover.Auto(ctx, failover.AutoConfig{
		ID: id, Client: topo.c, After: after, Logger: logger,
		Options: failover.Options{
			Home: topo.c.Home(), Shards: m.Shards, DBPrefix: m.DBPrefix, Access: access,
			Lock: moveLock(etcdHome{topo.c.Home()}), Record: failover.EtcdRecorder(topo.c),
			// A failover does not rely on every server confirming: the old
			// master is fenced, or unreachable with every replica's I/O
			// thread stopped, so a server cut off from etcd can commit
			// nothing there. It waits a second for the others, no longer.
			Confirm: func(ctx context.Context, version string) error {
				_, err := topo.c.WaitDrained(ctx, version, time.Second)
				return err
			},
		},
		LastSeen: func(host string) replicas.Pos {
			for _, h := range st.Router().Current().Hosts() {
				if h.Name == host {
					p, _ := st.Replicas().MasterSeen(h)
					return p
				}
			}
			return nil
		},
	})
}
