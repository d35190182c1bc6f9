package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/cluster/reshard"
	"github.com/pinstore/pinstore/cluster/throttle"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

// runMoveShards is `pinstore move-shards --range A-B --to HOST`: it moves
// the shard databases of the range to HOST, rewriting the shard map as it
// goes: the map file (PINSTORE_SHARD_MAP), which running servers poll, or
// the map in etcd (PINSTORE_TOPOLOGY), which they watch and where each
// reports the map it routes by. It stops after the switch with the move
// still open and reversible: --finish ends it (drops the old copies),
// --revert moves the range back. Killed at any point, the same command
// carries the move on; with --abort it rolls back a move that has not
// switched yet. The state of a move in progress is the lock file <map
// file>.move, or P/move in etcd (see package reshard). It opens no store:
// the move works on the map and its own connections to the hosts.
func runMoveShards(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("move-shards", "move-shards --range A-B --to HOST [--finish | --revert | --abort] [flags]\n\nmoves a range of shards to another host of the shard map; the move stays open (reversible) after its switch until --finish", stderr)
	rng := fs.String("range", "", "shards to move, FIRST-LAST inclusive (required)")
	to := fs.String("to", "", "target host, as the shard map names it (required)")
	settle := fs.Duration("settle", 0, "wait after each map change before relying on every server having it (default: PINSTORE_MAP_POLL + query timeout + 2s)")
	finish := fs.Bool("finish", false, "end the move once switched (carrying it there first if needed): drop the old copies, the change logs and their triggers")
	revert := fs.Bool("revert", false, "move a switched range back to its source hosts, with every write the new host took, and end the move")
	keepFor := fs.Duration("keep", 0, "after the switch, keep applying the new host's writes to the old copies for this long before exiting (or finishing)")
	keep := fs.Bool("keep-source", false, "when the move ends, leave the old copies in place (stale; drop them by hand); only their change logs and triggers are removed")
	abort := fs.Bool("abort", false, "roll back the move in progress (before its switch): range writable on its source, copies on the target dropped")
	servers := fs.String("servers", "", "comma-separated base URLs of every running server (e.g. http://10.0.0.5:8080): after each map change, wait until each reports the new map at /v1/admin/shard-map (with the service token in PINSTORE_ADMIN_TOKEN) instead of waiting --settle")
	confirmWait := fs.Duration("confirm-timeout", time.Minute, "with --servers or PINSTORE_TOPOLOGY: how long a server may take to report a new map before the move stops")
	par := fs.Int("parallel", 4, "shards copied at once")
	batch := fs.Int("batch", 1000, "rows per copy chunk")
	limits := throttleFlags(fs, "copy chunk or catch-up batch", "the source's or target's")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("move-shards: unexpected arguments %q", fs.Args())
	}
	if *rng == "" || *to == "" {
		fs.Usage()
		return errors.New("move-shards: --range and --to are required")
	}
	first, last, err := shardmap.ParseRange(*rng)
	if err != nil {
		return fmt.Errorf("move-shards: --range: %w", err)
	}
	poll, err := mapPoll(getenv)
	if err != nil {
		return fmt.Errorf("move-shards: %w", err)
	}
	cfg, err := storeConfig(getenv)
	if err != nil {
		return fmt.Errorf("move-shards: %w", err)
	}
	topo, err := openTopology(ctx, getenv, &cfg)
	if err != nil {
		return fmt.Errorf("move-shards: %w", err)
	}
	defer topo.close()
	opt := reshard.Options{
		First: first, Last: last, To: *to,
		MapFile: cfg.MapFile, Shards: cfg.Map.Shards, DBPrefix: cfg.Map.DBPrefix, PoolSize: cfg.PoolSize,
		Settle: *settle, MapPoll: poll, KeepSource: *keep, Abort: *abort,
		Finish: *finish, Revert: *revert, Keep: *keepFor,
		Parallel: *par, Batch: *batch, Progress: stdout,
		Throttle: limits(),
	}
	stateAt := reshard.LockPath(cfg.MapFile)
	switch {
	case topo != nil:
		if *servers != "" {
			return errors.New("move-shards: --servers is for a map file; with PINSTORE_TOPOLOGY every server registers in etcd, and the move waits for each of them")
		}
		home := etcdHome{topo.c.Home()}
		opt.Home = home
		stateAt = "etcd, " + topo.c.URL().String() + "/move"
		opt.Confirm = func(ctx context.Context, version string) error {
			_, err := topo.c.WaitDrained(ctx, version, *confirmWait)
			return err
		}
		opt.ConfirmDrains = true
	case cfg.MapFile == "":
		return errors.New("move-shards: PINSTORE_SHARD_MAP must name the shard map file the servers read, or PINSTORE_TOPOLOGY the etcd topology they follow")
	case *servers != "":
		if opt.Confirm, err = confirmServers(*servers, adminToken(getenv), *confirmWait); err != nil {
			return fmt.Errorf("move-shards: --servers: %w", err)
		}
	}
	rep, err := reshard.Move(ctx, opt)
	if err != nil {
		if !model.IsCode(err, model.EInvalid) && !model.IsCode(err, model.EConflict) || errors.Is(err, context.Canceled) {
			again := "run the same command again to carry the move on, or with --abort to roll it back (before its switch) or --revert (after)"
			fmt.Fprintf(stderr, "move-shards: interrupted; %s (state in %s)\n", again, stateAt)
		}
		return err
	}
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	switch {
	case rep.Aborted:
		fmt.Fprintf(stdout, "move-shards: rolled back in %v\n", ms(rep.Total))
	case rep.Reverted:
		fmt.Fprintf(stdout, "move-shards: %d shards back on %s; writes held off %v, total %v; map version %s\n",
			rep.Shards, strings.Join(rep.From, ", "), ms(rep.Held), ms(rep.Total), rep.MapVersion)
	default:
		end := "the move is open: --finish ends it, --revert moves the range back"
		if rep.Finished {
			end = "finished"
		}
		fmt.Fprintf(stdout, "move-shards: %d shards to %s; copy %v, writes held off %v, total %v; map version %s; %s\n",
			rep.Shards, rep.To, ms(rep.Copy), ms(rep.Held), ms(rep.Total), rep.MapVersion, end)
	}
	return nil
}

// confirmServers returns a reshard.Options.Confirm that polls every server's
// GET /v1/admin/shard-map until each reports the wanted map version.
func confirmServers(list, token string, timeout time.Duration) (func(context.Context, string) error, error) {
	var urls []string
	for _, u := range strings.Split(list, ",") {
		u = strings.TrimRight(strings.TrimSpace(u), "/")
		if u == "" {
			continue
		}
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, fmt.Errorf("%q is not an http(s) base URL", u)
		}
		urls = append(urls, u)
	}
	if len(urls) == 0 {
		return nil, errors.New("no server URL given")
	}
	client := &http.Client{Timeout: 5 * time.Second}
	version := func(ctx context.Context, base string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/admin/shard-map", nil)
		if err != nil {
			return "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("GET %s/v1/admin/shard-map: HTTP %d (a service token with scope admin goes in PINSTORE_ADMIN_TOKEN)", base, resp.StatusCode)
		}
		var info fleet.ShardMapInfo
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info); err != nil {
			return "", fmt.Errorf("GET %s/v1/admin/shard-map: %w", base, err)
		}
		return info.Version, nil
	}
	return func(ctx context.Context, want string) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		for _, base := range urls {
			for {
				got, err := version(ctx, base)
				if err == nil && got == want {
					break
				}
				select {
				case <-ctx.Done():
					if err != nil {
						return fmt.Errorf("server %s: %w", base, err)
					}
					return fmt.Errorf("server %s still routes by map %s after %v", base, got, timeout)
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
		return nil
	}, nil
}

// throttleFlags defines the flags of the throttle (package
// cluster/throttle) on fs, for work done in steps (step: "copy chunk")
// on hosts (whose: "the source's"), and returns the limits they set.
func throttleFlags(fs *flag.FlagSet, step, whose string) func() throttle.Limits {
	maxThreads := fs.Int("max-threads-running", throttle.DefaultThreadsRunning, "before each "+step+", wait while "+whose+" master's Threads_running is above this (-1: never)")
	maxRedo := fs.Int("max-redo-log-percent", throttle.DefaultRedoLogPercent, "before each "+step+", wait while "+whose+" master's redo log is fuller than this percentage of the point where InnoDB makes writes wait (-1: never)")
	maxLag := fs.Duration("max-replica-lag", throttle.DefaultReplicaLag, "before each "+step+", wait while a replica of "+whose+" master lags more than this (-1s: never)")
	maxWait := fs.Duration("throttle-max-wait", throttle.DefaultMaxWait, "the longest one throttle wait lasts before the work carries on anyway")
	return func() throttle.Limits {
		return throttle.Limits{ThreadsRunning: *maxThreads, RedoLogPercent: *maxRedo, ReplicaLag: *maxLag, MaxWait: *maxWait}
	}
}
