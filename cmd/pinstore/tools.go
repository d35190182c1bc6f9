package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/pinstore/pinstore/cluster/changes"
	"github.com/pinstore/pinstore/cluster/throttle"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/progress"
	"github.com/pinstore/pinstore/store"
	"github.com/pinstore/pinstore/store/replicas"
)

// openStore opens the store the environment describes, for operator
// commands (no Redis needed: they work on MySQL alone), with the map from
// the map file or etcd. The topology is nil without PINSTORE_TOPOLOGY;
// close it after the store.
func openStore(ctx context.Context, getenv func(string) string, stderr io.Writer) (*store.Store, *etcdTopo, error) {
	cfg, err := storeConfig(getenv)
	if err != nil {
		return nil, nil, err
	}
	topo, err := openTopology(ctx, getenv, &cfg)
	if err != nil {
		return nil, nil, err
	}
	if topo != nil {
		cfg.Source = &topologySource{t: topo}
	}
	s, err := openStoreConfig(ctx, cfg, stderr)
	if err != nil {
		topo.close()
		return nil, nil, err
	}
	return s, topo, nil
}

// openStoreConfig opens the store of cfg as operator commands do:
// without Redis, warnings to stderr.
func openStoreConfig(ctx context.Context, cfg store.Config, stderr io.Writer) (*store.Store, error) {
	cfg.Redis.Disabled = true
	cfg.CursorSecret = []byte("unused by operator commands")
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return store.Open(ctx, cfg)
}

func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("migrate", "migrate [--per-host N] [--max-threads-running N] [--max-redo-log-percent N] [--max-replica-lag D] [--throttle-max-wait D]\n\ncreates and upgrades every shard database the shard map names, waiting while a host is busy", stderr)
	par := fs.Int("per-host", 4, "shards migrated at once on each host")
	limits := throttleFlags(fs, "shard's migration", "its host's")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("migrate: unexpected arguments %q", fs.Args())
	}
	s, topo, err := openStore(ctx, getenv, stderr)
	if err != nil {
		return err
	}
	defer topo.close()
	defer s.Close()
	// A master that waits for acknowledgements no replica can give would
	// hold the first statement for ever: say so instead.
	for _, h := range s.Router().Current().Hosts() {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := replicas.Probe(c, h.DB)
		cancel()
		if err == nil && st.Stalled() != "" {
			return fmt.Errorf("migrate: host %s's master %s commits nothing: %s. Add a replica first (pinstore replica add), or turn rpl_semi_sync_master_enabled off until one is added", h.Name, h.Addr, st.Stalled())
		}
	}
	stdout = progress.Locked(stdout) // hosts, the progress ticker and the throttle print at once
	pacer := pace(s, limits(), stdout, "migrate")
	defer pacer.Close()
	start := time.Now()
	if err := s.Migrate(ctx, store.MigrateOptions{PerHost: *par, Progress: stdout}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "migrate: done in %s\n", time.Since(start).Round(time.Millisecond))
	for _, h := range s.Router().Current().Hosts() {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		lacks, err := changes.Needs(c, h.DB.DB, false)
		cancel()
		if err == nil && lacks != "" {
			fmt.Fprintf(stdout, "migrate: note: host %s (%s): %s\n", h.Name, h.Addr, lacks)
		}
	}
	return nil
}

func runRepair(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("repair", "repair [--dry-run] [--max-threads-running N] [--max-redo-log-percent N] [--max-replica-lag D] [--throttle-max-wait D]\n\nfinds and fixes pairs with one side missing, feeds, and the username index", stderr)
	dry := fs.Bool("dry-run", false, "only count what is broken (pairs with one side missing, feeds, usernames); change nothing")
	limits := throttleFlags(fs, "batch of rows", "its host's")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("repair: unexpected arguments %q", fs.Args())
	}
	s, topo, err := openStore(ctx, getenv, stderr)
	if err != nil {
		return err
	}
	defer topo.close()
	defer s.Close()
	pacer := pace(s, limits(), stderr, "repair")
	defer pacer.Close()
	rep, err := s.Repair(ctx, *dry, stderr)
	if err != nil {
		return err
	}
	// Feeds after pairs: a follow the first pass removed takes its feed rows with it.
	feeds, err := s.RepairFeeds(ctx, *dry, stderr)
	if err != nil {
		return err
	}
	names, err := s.RepairUsernames(ctx, *dry)
	if err != nil {
		return err
	}
	for _, c := range names.Collisions {
		fmt.Fprintf(stderr, "repair: username %q is carried by %d live users: %s keeps it; rename %s\n", c.Name, 1+len(c.Others), c.Holder, strings.Join(c.Others, ", "))
	}
	return json.NewEncoder(stdout).Encode(map[string]any{"dry_run": *dry, "pairs": rep, "feeds": feeds, "usernames": names})
}

// idJSON is the printed form of a decoded ID.
type idJSON struct {
	ID       string `json:"id"`
	Shard    uint32 `json:"shard"`
	Type     uint16 `json:"type"`
	TypeName string `json:"type_name"`
	LocalID  uint64 `json:"local_id"`
}

// idUsage is the usage of `pinstore id`.
const idUsage = "usage: pinstore id decode ID | pinstore id encode --shard S --type T --local L"

func runID(args []string, stdout, stderr io.Writer) error {
	if helpAsked(args) {
		fmt.Fprintln(stdout, idUsage)
		return nil
	}
	if len(args) == 0 {
		return fmt.Errorf("%s", idUsage)
	}
	switch args[0] {
	case "decode":
		fs := newFlags("id decode", "id decode ID\n\nprints an ID's shard, type and local id as JSON", stderr)
		if err := parseFlags(fs, args[1:], stdout); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return fmt.Errorf("usage: pinstore id decode ID")
		}
		arg := fs.Arg(0)
		id, p, err := idcodec.Parse(arg)
		if err != nil {
			return fmt.Errorf("%q: %w", arg, err)
		}
		if !p.Type.Known() {
			return fmt.Errorf("%q: unknown type %d", arg, p.Type)
		}
		return json.NewEncoder(stdout).Encode(idJSON{strconv.FormatUint(id, 10), p.Shard, uint16(p.Type), p.Type.String(), p.Local})
	case "encode":
		fs := newFlags("id encode", "id encode --shard S --type T --local L\n\nprints the ID with those parts", stderr)
		shard := fs.Uint64("shard", 0, "shard (0-65535)")
		names := strings.Join(idcodec.TypeNames(), ", ")
		typ := fs.String("type", "", "type: "+names+", or its number")
		local := fs.Uint64("local", 0, "local id (1 … 2^36-1)")
		if err := parseFlags(fs, args[1:], stdout); err != nil {
			return err
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("id encode: unexpected arguments %q", fs.Args())
		}
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		for _, name := range []string{"shard", "type", "local"} {
			if !given[name] {
				return fmt.Errorf("id encode: --%s is required (%s)", name, idUsage)
			}
		}
		if *local < 1 || *local > idcodec.MaxLocal {
			return fmt.Errorf("id encode: --local %d: a local id is 1 … %d (2^36-1); 0 is never assigned", *local, uint64(idcodec.MaxLocal))
		}
		t, ok := idcodec.ParseType(*typ)
		if !ok {
			n, err := strconv.ParseUint(*typ, 10, 16)
			if err != nil || !idcodec.Type(n).Known() {
				return fmt.Errorf("--type %q: want one of %s, or a type's number", *typ, names)
			}
			t = idcodec.Type(n)
		}
		if *shard > idcodec.MaxShard {
			return fmt.Errorf("--shard %d: %w", *shard, idcodec.ErrShardRange)
		}
		id, err := idcodec.Encode(uint32(*shard), t, *local)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, id)
		return nil
	}
	return fmt.Errorf("unknown id command %q", args[0])
}

// pace holds the store's background work (migrate, repair) back while a
// host is busy, by the throttle's limits, saying why on w as "cmd:
// throttled: …".
func pace(s *store.Store, lim throttle.Limits, w io.Writer, cmd string) *throttle.Pacer {
	th := throttle.New(lim, func(format string, args ...any) { fmt.Fprintf(w, cmd+": "+format+"\n", args...) })
	p := throttle.NewPacer(th, s.Map)
	s.SetPace(p.Pace)
	return p
}
