package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/pinstore/pinstore/cluster/changes"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

// runChanges is `pinstore changes`: the change stream from the hosts of
// the map, as NDJSON on stdout (one event a line, each with the token that
// resumes after it; a progress line with only a token when changes it
// does not tell went by), or published into NATS JetStream with --nats.
// It runs until interrupted.
func runChanges(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("changes", "changes [--after TOKEN | --snapshot] [--types pin,board] [--lists board_pins] [--nats URL]\n\n"+
		"prints every committed change to objects and lists after TOKEN (none: from now) as NDJSON, until interrupted;\n"+
		"with --snapshot, first what exists now (every visible object and list entry), then every change after it;\n"+
		"with --nats, publishes them to NATS JetStream instead, resuming from the token saved there", stderr)
	after := fs.String("after", "", "resume after this token (from an event's \"token\")")
	types := fs.String("types", "", "only objects of these types, comma-separated ("+strings.Join(idcodec.TypeNames(), ",")+")")
	lists := fs.String("lists", "", "only entries of these lists, comma-separated (board_pins, user_following, …)")
	snapshot := fs.Bool("snapshot", false, "first tell what exists now, then the changes after it (a first sync; not with --after)")
	natsURL := fs.String("nats", "", "publish to the NATS JetStream server at this URL (nats://127.0.0.1:4222)")
	stream := fs.String("nats-stream", "pinstore-changes", "with --nats: the JetStream stream, and the bucket keeping the token")
	subjects := fs.String("nats-subjects", "pinstore.changes", "with --nats: the subjects' prefix (PREFIX.pin, PREFIX.board_pins, …)")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("changes: unexpected arguments %q", fs.Args())
	}
	if *snapshot && *after != "" {
		return errors.New("changes: --snapshot starts a consumer anew; it takes no --after")
	}
	c := changes.Config{Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	var err error
	if c.Types, c.Lists, err = parseChangeFilter(*types, *lists); err != nil {
		return fmt.Errorf("changes: %w", err)
	}
	tok, err := changes.ParseToken(*after)
	if err != nil {
		return fmt.Errorf("changes: --after: %w", err)
	}
	maps, err := changeMaps(ctx, getenv)
	if err != nil {
		return fmt.Errorf("changes: %w", err)
	}
	defer maps.close()
	c.Map = maps.current

	if *natsURL == "" {
		w := bufio.NewWriter(stdout)
		defer w.Flush()
		enc := json.NewEncoder(w)
		write := func(e changes.Event) error {
			if err := enc.Encode(e); err != nil {
				return err
			}
			return w.Flush()
		}
		if *snapshot {
			tok, err = snapshotFirst(ctx, c, write)
		}
		if err == nil {
			err = changes.Follow(ctx, c, tok, write)
		}
	} else {
		err = publishChanges(ctx, c, tok, *after != "", *snapshot, changes.NATSConfig{URL: *natsURL, Stream: *stream, Subjects: *subjects}, stderr)
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return nil // interrupted: the last token printed resumes
	}
	if err != nil {
		return fmt.Errorf("changes: %s", model.ErrorMessage(err))
	}
	return nil
}

// snapshotFirst tells emit what exists now (changes.Snapshot) and returns
// the token the stream goes on from.
func snapshotFirst(ctx context.Context, c changes.Config, emit func(changes.Event) error) (changes.Token, error) {
	var last string
	err := changes.Snapshot(ctx, c, func(e changes.Event) error {
		if e.Kind == changes.Progress {
			last = e.Token
		}
		return emit(e)
	})
	if err != nil {
		return changes.Token{}, err
	}
	return changes.ParseToken(last)
}

// publishChanges runs the stream into the NATS sink, from tok when given,
// after a snapshot when asked, else from the token saved there, and says
// every ten seconds on stderr how far it got.
func publishChanges(ctx context.Context, c changes.Config, tok changes.Token, given, snapshot bool, nc changes.NATSConfig, stderr io.Writer) error {
	sink, err := changes.OpenNATS(ctx, nc)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := sink.Close(sctx); err != nil {
			fmt.Fprintln(stderr, "changes:", err)
		}
	}()
	publish := func(e changes.Event) error { return sink.Publish(ctx, e) }
	switch {
	case snapshot:
		if tok, err = snapshotFirst(ctx, c, publish); err != nil {
			return err
		}
		fmt.Fprintln(stderr, "changes: snapshot published")
	case !given:
		saved, err := sink.Token(ctx)
		if err != nil {
			return err
		}
		if tok, err = changes.ParseToken(saved); err != nil {
			return fmt.Errorf("the token saved in %s: %w", nc.Stream, err)
		}
	}
	var n int
	last := time.Now()
	return changes.Follow(ctx, c, tok, func(e changes.Event) error {
		if e.Kind != changes.Progress {
			n++
		}
		if time.Since(last) >= 10*time.Second {
			last = time.Now()
			fmt.Fprintf(stderr, "changes: %d events published\n", n)
		}
		return sink.Publish(ctx, e)
	})
}

// parseChangeFilter reads --types and --lists.
func parseChangeFilter(types, lists string) ([]idcodec.Type, []model.Mapping, error) {
	var ts []idcodec.Type
	var ms []model.Mapping
	for _, name := range splitList(types) {
		t, ok := idcodec.ParseType(name)
		if _, declared := model.TypeOf(t); !ok || !declared {
			return nil, nil, fmt.Errorf("--types: no type %q (%s)", name, strings.Join(idcodec.TypeNames(), ", "))
		}
		ts = append(ts, t)
	}
	for _, name := range splitList(lists) {
		m, ok := mappingNamed(name)
		if !ok {
			var all []string
			for _, m := range model.Mappings() {
				all = append(all, m.String())
			}
			return nil, nil, fmt.Errorf("--lists: no list %q (%s)", name, strings.Join(all, ", "))
		}
		ms = append(ms, m)
	}
	return ts, ms, nil
}

func mappingNamed(name string) (model.Mapping, bool) {
	for _, m := range model.Mappings() {
		if m.String() == name {
			return m, true
		}
	}
	return 0, false
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// changeMapSource is the shard map the stream follows: the map file read
// again, or etcd's map, at most once a second (a host's connection made
// anew asks for it: a failover's new master).
type changeMapSource struct {
	mu     sync.Mutex
	m      *shardmap.Map
	at     time.Time
	reload func() (*shardmap.Map, error)
	close  func()
}

func (s *changeMapSource) current() *shardmap.Map {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reload != nil && time.Since(s.at) >= time.Second {
		if m, err := s.reload(); err == nil {
			s.m = m
		}
		s.at = time.Now()
	}
	return s.m
}

func changeMaps(ctx context.Context, getenv func(string) string) (*changeMapSource, error) {
	cfg, err := storeConfig(getenv)
	if err != nil {
		return nil, err
	}
	shards, prefix := cfg.Map.Shards, cfg.Map.DBPrefix
	topo, err := openTopology(ctx, getenv, &cfg)
	if err != nil {
		return nil, err
	}
	s := &changeMapSource{m: cfg.Map, at: time.Now(), close: func() { topo.close() }}
	switch {
	case topo != nil:
		s.reload = func() (*shardmap.Map, error) {
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			m, _, err := topo.c.Map(rctx, shards, prefix)
			return m, err
		}
	case cfg.MapFile != "":
		s.reload = func() (*shardmap.Map, error) { return shardmap.Load(cfg.MapFile, shards, prefix) }
	}
	return s, nil
}

// changeFeed is the change stream as the API serves it (api.ChangeFeed),
// following the map the store routes by.
type changeFeed struct {
	maps   func() *shardmap.Map
	logger *slog.Logger
}

func (f changeFeed) Changes(ctx context.Context, after, types, lists string, emit func(line []byte, token string, event bool) error) error {
	ts, ms, err := parseChangeFilter(types, lists)
	if err != nil {
		return model.Errorf(model.EInvalid, "%s", strings.TrimPrefix(err.Error(), "--"))
	}
	tok, err := changes.ParseToken(after)
	if err != nil {
		return err
	}
	return changes.Follow(ctx, changes.Config{Map: f.maps, Types: ts, Lists: ms, Logger: f.logger}, tok, func(e changes.Event) error {
		line, err := json.Marshal(e)
		if err != nil {
			return err
		}
		return emit(line, e.Token, e.Kind != changes.Progress)
	})
}
