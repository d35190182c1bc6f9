package failover

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/pinstore/pinstore/cluster/etcdtopo"
	"github.com/pinstore/pinstore/internal/tracing"
	"github.com/pinstore/pinstore/store/replicas"
	"github.com/pinstore/pinstore/store/shardmap"
	"github.com/pinstore/pinstore/store/topology"
)

// Defaults of automatic failover.
const (
	// DefaultAfter is how long a master must have been unreachable, as a
	// majority of the servers see it, before it is failed over.
	DefaultAfter = 2 * time.Second
	// defaultEvery is how often the elected server looks.
	defaultEvery = 500 * time.Millisecond
	// electionTTL is the lease of the election: a leader that dies or
	// loses etcd is replaced within it.
	electionTTL = 5
	// retryAfter is how long a host whose failover failed is left alone.
	retryAfter = 10 * time.Second
)

// Sightings says which masters of router's hosts the tracker finds
// unreachable, and since when, as a server reports them in its
// registration (etcdtopo.Follower.SetDown). Only hosts with replicas are
// tracked: they are the ones a failover can help.
func Sightings(router *topology.Router, tracker *replicas.Tracker) map[string]etcdtopo.Sighting {
	out := map[string]etcdtopo.Sighting{}
	for _, h := range router.Current().Hosts() {
		if since, _, down := tracker.MasterDown(h); down {
			out[h.Name] = etcdtopo.Sighting{Master: h.Addr, Since: since.UTC()}
		}
	}
	return out
}

// AutoConfig is what automatic failover needs in a server.
type AutoConfig struct {
	ID     string           // this server's registration id
	Client *etcdtopo.Client // the topology
	// Options is the template of each failover: Home, Shards, DBPrefix,
	// Access, Lock, Confirm and Record; Host, LastSeen and By are filled
	// in.
	Options Options
	After   time.Duration // default DefaultAfter
	Every   time.Duration // default 500ms
	// LastSeen is the last position this server's tracker read from a
	// host's master (replicas.Tracker.MasterSeen), for the loss count.
	LastSeen func(host string) replicas.Pos
	Logger   *slog.Logger
}

// Auto runs automatic failover until ctx is done: every server running
// it campaigns in an etcd election (P/failover/leader, a lease of 5 s),
// and only the leader acts. Every cfg.Every it reads the map and the
// servers' registrations; a host whose master a strict majority of the
// registered servers have seen unreachable (the same master address) for
// cfg.After or longer is failed over (Failover, one at a time, under the
// lock of moves), so one server cut off from a master never fails it
// over. The leader also fences the former masters the map lists (fenced)
// when they answer and are writable: a master that comes back after a
// failover takes no writes.
func Auto(ctx context.Context, cfg AutoConfig) {
	if cfg.After <= 0 {
		cfg.After = DefaultAfter
	}
	if cfg.Every <= 0 {
		cfg.Every = defaultEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	a := &auto{cfg: cfg, failed: map[string]time.Time{}}
	for ctx.Err() == nil {
		sess, err := concurrency.NewSession(cfg.Client.Etcd(), concurrency.WithTTL(electionTTL), concurrency.WithContext(ctx))
		if err != nil {
			sleep(ctx, time.Second)
			continue
		}
		e := concurrency.NewElection(sess, cfg.Client.Key("failover/leader"))
		if err := e.Campaign(ctx, cfg.ID); err != nil {
			sess.Close()
			sleep(ctx, time.Second)
			continue
		}
		cfg.Logger.Info("automatic failover: this server is the leader", "id", cfg.ID, "after", cfg.After.String())
		a.lead(ctx, sess)
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = e.Resign(c)
		cancel()
		sess.Close()
	}
}

type auto struct {
	cfg    AutoConfig
	failed map[string]time.Time // host → when its last failover failed
}

// lead acts while this server leads (its session lives).
func (a *auto) lead(ctx context.Context, sess *concurrency.Session) {
	tk := time.NewTicker(a.cfg.Every)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sess.Done():
			a.cfg.Logger.Warn("automatic failover: leadership lost (etcd session ended)", "id", a.cfg.ID)
			return
		case <-tk.C:
		}
		a.check(ctx)
	}
}

// check fails over the hosts a majority sees down, and fences former
// masters that answer.
func (a *auto) check(ctx context.Context) {
	o := a.cfg.Options
	m, _, err := o.Home.ReadMap(ctx, o.Shards, o.DBPrefix)
	if err != nil {
		return
	}
	regs, _, err := a.cfg.Client.Servers(ctx)
	if err != nil || len(regs) == 0 {
		return
	}
	now := time.Now()
	for name, spec := range m.Hosts {
		if len(spec.ReplicaDSNs()) == 0 || now.Sub(a.failed[name]) < retryAfter {
			continue
		}
		addr := shardmap.HostAddr(spec.Master)
		seen := 0
		var since time.Time
		for _, r := range regs {
			if s, ok := r.Down[name]; ok && s.Master == addr && now.Sub(s.Since) >= a.cfg.After {
				seen++
				if since.IsZero() || s.Since.Before(since) {
					since = s.Since
				}
			}
		}
		if 2*seen <= len(regs) {
			continue
		}
		opt := o
		opt.Host, opt.By = name, "automatic (server "+a.cfg.ID+")"
		if a.cfg.LastSeen != nil {
			opt.LastSeen = a.cfg.LastSeen(name)
		}
		a.cfg.Logger.Warn("automatic failover: starting", "host", name, "master", addr,
			"servers_seeing_it_down", seen, "servers", len(regs), "down_since", since)
		// Traced like the command: a root span, its steps children.
		if opt.Progress == nil {
			opt.Progress = io.Discard
		}
		fctx, progress, end := tracing.Operation(ctx, "automatic failover", opt.Progress)
		opt.Progress = progress
		rep, err := Failover(fctx, opt)
		end(err)
		if err != nil {
			a.failed[name] = time.Now()
			a.cfg.Logger.Error("automatic failover: refused or failed; retrying later", "host", name, "error", err.Error(), "retry_in", retryAfter.String(), "record_error", rep.RecordError)
			continue
		}
		a.cfg.Logger.Warn("automatic failover: done", "host", name, "from", rep.OldMaster, "to", rep.NewMaster,
			"promoted_at", rep.Promoted, "lost", rep.Lost, "unacknowledged", rep.Unacknowledged, "lost_note", rep.LostNote, "semi_sync", rep.SemiSync,
			"writes_held", rep.Held.String(), "took", rep.Took.String(), "down_for", time.Since(since).String(),
			"repointed", fmt.Sprint(rep.Repointed), "not_repointed", fmt.Sprint(rep.Failed), "map_version", rep.MapVersion, "record_error", rep.RecordError)
	}
	a.fence(ctx, m)
}

// fence makes every former master the map lists read-only when it
// answers writable.
func (a *auto) fence(ctx context.Context, m *shardmap.Map) {
	for name, spec := range m.Hosts {
		for _, dsn := range spec.Fenced {
			c, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			db, err := a.cfg.Options.Access.open(c, dsn)
			if err == nil {
				var ro bool
				if err = db.QueryRowxContext(c, "SELECT @@read_only").Scan(&ro); err == nil && !ro {
					if _, err = db.ExecContext(c, "SET GLOBAL read_only = ON"); err == nil {
						a.cfg.Logger.Warn("automatic failover: fenced a former master that came back writable", "host", name, "server", dsnAddr(dsn))
					}
				}
				db.Close()
			}
			cancel()
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
