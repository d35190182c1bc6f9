package etcdtopo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/pinstore/pinstore/store/shardmap"
)

// Defaults of a Follower.
const (
	DefaultLeaseTTL   = 10 * time.Second // a dead server's registration lives this long
	DefaultBeat       = time.Second      // how often the lease is renewed
	DefaultStaleAfter = 3 * time.Second  // no answer from etcd this long: the topology is stale
	// LeaseShare is the part of the registration's TTL for which a
	// server acknowledges writes after a renewal (FollowConfig.OnLease).
	LeaseShare = 0.75
)

// FollowConfig is what a server following the topology gives Follow.
type FollowConfig struct {
	ID   string // unique among running servers (host name and port)
	Addr string // where it listens, for operators

	// Apply puts a map read from etcd in force, or returns why it will not
	// (a map that changes the shard count, say); the map has validated.
	Apply func(m *shardmap.Map, rev int64) error
	// Drain, if set, returns once no write routed by a map older than the
	// one Apply just put in force is still running (or ctx ends); the
	// registration's Drained says so then. Without it, Drained follows
	// Version at once.
	Drain func(ctx context.Context) error
	// Shards and DBPrefix are the defaults a map in etcd is parsed with.
	Shards   int
	DBPrefix string

	// OnLease, if set, is told after each renewal of the registration's
	// lease until when this server may still acknowledge writes routed
	// by the map it has: LeaseShare of the TTL from before the renewal
	// was asked, so it runs out before etcd can have let the
	// registration expire (with clocks that run at the same rate to
	// within a fifth). After etcd let it expire, the map in force is
	// read again before OnLease is told anything.
	OnLease func(until time.Time)

	LeaseTTL   time.Duration // default DefaultLeaseTTL
	Beat       time.Duration // default DefaultBeat
	StaleAfter time.Duration // default DefaultStaleAfter
	Logger     *slog.Logger
}

// Follower keeps a server on the map in etcd and its registration alive.
// Start it with Follow; Close stops both and removes the registration.
type Follower struct {
	c   *Client
	cfg FollowConfig

	mu          sync.Mutex
	reg         Registration
	dirty       bool      // reg changed since it was written
	contact     time.Time // last answer from etcd (lease renewed, watch event, read)
	watching    bool      // the watch stream is up
	rejected    string    // why the newest map in etcd was not put in force ("" when it was)
	rejectedRev int64

	kick   chan struct{} // wakes the lease loop to write the registration
	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// Follow starts following the topology: the map at revisions after rev
// (the revision of the map already in force) is put in force through
// cfg.Apply as it changes, and the server is registered under a lease.
// version is the version of the map in force.
func (c *Client) Follow(ctx context.Context, rev int64, version string, cfg FollowConfig) *Follower {
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.Beat <= 0 {
		cfg.Beat = DefaultBeat
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = DefaultStaleAfter
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	now := time.Now().UTC()
	f := &Follower{
		c: c, cfg: cfg, contact: time.Now(),
		reg:  Registration{ID: cfg.ID, Addr: cfg.Addr, Version: version, MapRev: rev, Drained: version, Started: now, Updated: now, PID: os.Getpid()},
		kick: make(chan struct{}, 1),
	}
	ctx, f.cancel = context.WithCancel(context.WithoutCancel(ctx))
	f.ctx = ctx
	f.done.Add(2)
	go func() { defer f.done.Done(); f.watchLoop(ctx, rev) }()
	go func() { defer f.done.Done(); f.leaseLoop(ctx) }()
	return f
}

// Close stops following and revokes the lease, so the registration goes
// at once.
func (f *Follower) Close() {
	f.cancel()
	f.done.Wait()
}

// kickLease wakes the lease loop to write the registration now.
func (f *Follower) kickLease() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// Health says whether the server is following the topology: false, with
// why, when etcd has not answered for StaleAfter, the watch is down, or the
// newest map in etcd was rejected (the server then routes by an older
// map).
func (f *Follower) Health() (bool, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	where := fmt.Sprintf("routing by map %s (revision %d)", f.reg.Version, f.reg.MapRev)
	if since := time.Since(f.contact); since > f.cfg.StaleAfter {
		return false, fmt.Sprintf("topology stale: etcd at %s has not answered for %v; %s", f.c.url, since.Round(100*time.Millisecond), where)
	}
	if !f.watching {
		return false, fmt.Sprintf("topology stale: the watch of %s is down, reconnecting; %s", f.c.MapKey(), where)
	}
	if f.rejected != "" {
		return false, fmt.Sprintf("topology stale: the shard map at revision %d was rejected (%s); %s", f.rejectedRev, f.rejected, where)
	}
	return true, ""
}

// Registration is this server's registration as last recorded.
func (f *Follower) Registration() Registration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reg
}

// SetDown records the masters this server cannot reach
// (Registration.Down) and writes the registration when that changed.
func (f *Follower) SetDown(down map[string]Sighting) {
	f.mu.Lock()
	if maps.Equal(f.reg.Down, down) || len(f.reg.Down) == 0 && len(down) == 0 {
		f.mu.Unlock()
		return
	}
	f.reg.Down = maps.Clone(down)
	f.reg.Updated, f.dirty = time.Now().UTC(), true
	f.mu.Unlock()
	f.kickLease()
}

func (f *Follower) touch() {
	f.mu.Lock()
	f.contact = time.Now()
	f.mu.Unlock()
}

func (f *Follower) setWatching(on bool) {
	f.mu.Lock()
	f.watching = on
	f.mu.Unlock()
}

// watchLoop watches the map key from rev+1 and applies each new value; when
// the stream breaks (etcd down, leader lost, revision compacted) it reads
// the map again and watches from there, backing off while etcd is away.
func (f *Follower) watchLoop(ctx context.Context, rev int64) {
	backoff := 100 * time.Millisecond
	resync := false
	for ctx.Err() == nil {
		if resync {
			data, mrev, hrev, err := f.c.getMapAt(ctx)
			if err != nil {
				f.setWatching(false)
				if !sleepCtx(ctx, backoff) {
					return
				}
				backoff = min(2*backoff, 2*time.Second)
				continue
			}
			f.touch()
			if mrev > rev {
				f.apply(data, mrev)
			}
			rev = max(rev, hrev)
			resync = false
		}
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := f.c.cli.Watch(wctx, f.c.MapKey(), clientv3.WithRev(rev+1), clientv3.WithCreatedNotify())
		for resp := range wch {
			if err := resp.Err(); err != nil {
				break
			}
			f.setWatching(true)
			f.touch()
			backoff = 100 * time.Millisecond
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					f.cfg.Logger.Error("shard map deleted from etcd; keeping the map in force", "key", f.c.MapKey(), "revision", ev.Kv.ModRevision)
					f.reject("the map key was deleted", ev.Kv.ModRevision)
					continue
				}
				f.apply(ev.Kv.Value, ev.Kv.ModRevision)
			}
			if resp.Header.Revision > rev {
				rev = resp.Header.Revision
			}
		}
		wcancel()
		f.setWatching(false)
		resync = true
		if !sleepCtx(ctx, backoff) {
			return
		}
	}
}

// getMapAt reads the map key: its value, its revision, and the store's
// revision at the read.
func (c *Client) getMapAt(ctx context.Context) ([]byte, int64, int64, error) {
	ctx, cancel := call(ctx)
	defer cancel()
	resp, err := c.cli.Get(ctx, c.MapKey())
	if err != nil {
		return nil, 0, 0, err
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, resp.Header.Revision, nil
	}
	return resp.Kvs[0].Value, resp.Kvs[0].ModRevision, resp.Header.Revision, nil
}

// apply validates data as a map and puts it in force, or logs and records
// why not.
func (f *Follower) apply(data []byte, rev int64) {
	m, err := shardmap.Parse(data, f.cfg.Shards, f.cfg.DBPrefix)
	if err == nil {
		err = f.cfg.Apply(m, rev)
	}
	if err != nil {
		f.cfg.Logger.Error("shard map in etcd rejected; keeping the map in force", "key", f.c.MapKey(), "revision", rev, "error", err.Error(), "version", f.Registration().Version)
		f.reject(err.Error(), rev)
		return
	}
	v := m.Version()
	f.mu.Lock()
	f.rejected, f.rejectedRev = "", 0
	f.reg.Version, f.reg.MapRev, f.reg.Updated = v, rev, time.Now().UTC()
	if f.cfg.Drain == nil {
		f.reg.Drained = v
	}
	f.dirty = true
	f.mu.Unlock()
	f.kickLease()
	if f.cfg.Drain != nil {
		go func() {
			if f.cfg.Drain(f.ctx) != nil {
				return
			}
			f.mu.Lock()
			if f.reg.Version == v && f.reg.Drained != v {
				f.reg.Drained, f.reg.Updated, f.dirty = v, time.Now().UTC(), true
			}
			f.mu.Unlock()
			f.kickLease()
		}()
	}
}

func (f *Follower) reject(why string, rev int64) {
	f.mu.Lock()
	f.rejected, f.rejectedRev = why, rev
	f.mu.Unlock()
}

// leaseLoop keeps the registration under a live lease: it grants a lease
// and writes the registration, renews the lease every Beat, rewrites the
// registration when it changes, and starts over with a new lease when the
// old one expired (etcd was away longer than its TTL). On stop it revokes
// the lease.
func (f *Follower) leaseLoop(ctx context.Context) {
	var lease clientv3.LeaseID
	tk := time.NewTicker(f.cfg.Beat)
	defer tk.Stop()
	defer func() {
		if lease != 0 {
			c, cancel := context.WithTimeout(context.Background(), time.Second)
			_, _ = f.c.cli.Revoke(c, lease)
			cancel()
		}
	}()
	for {
		if err := f.beat(ctx, &lease); err == nil {
			f.touch()
		}
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		case <-f.kick:
		}
	}
}

// beat renews (or grants) the lease and writes the registration if it
// changed or the lease is new.
func (f *Follower) beat(ctx context.Context, lease *clientv3.LeaseID) error {
	c, cancel := call(ctx)
	defer cancel()
	asked := time.Now()
	fresh := false
	if *lease != 0 {
		if _, err := f.c.cli.KeepAliveOnce(c, *lease); err != nil {
			if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return err
			}
			*lease = 0 // expired while etcd was away: register again
		}
	}
	if *lease == 0 {
		g, err := f.c.cli.Grant(c, int64(f.cfg.LeaseTTL/time.Second))
		if err != nil {
			return err
		}
		*lease, fresh = g.ID, true
	}
	if fresh {
		// The registration was gone (or never written): a move or a
		// failover may have gone on without this server. Catch up with
		// the map before acknowledging writes again.
		data, mrev, _, err := f.c.getMapAt(c)
		if err != nil {
			*lease = 0
			return err
		}
		if mrev > f.Registration().MapRev {
			f.apply(data, mrev)
		}
	}
	f.mu.Lock()
	dirty, reg := f.dirty || fresh, f.reg
	f.dirty = false
	f.mu.Unlock()
	if dirty {
		b, _ := json.Marshal(reg)
		if _, err := f.c.cli.Put(c, f.c.serverKey(reg.ID), string(b), clientv3.WithLease(*lease)); err != nil {
			f.mu.Lock()
			f.dirty = true
			f.mu.Unlock()
			if fresh {
				*lease = 0 // not registered: grant again, and tell OnLease nothing
			}
			return err
		}
	}
	if f.cfg.OnLease != nil {
		f.cfg.OnLease(asked.Add(time.Duration(LeaseShare * float64(f.cfg.LeaseTTL))))
	}
	return nil
}

// sleepCtx waits d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
