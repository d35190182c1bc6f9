package topology

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/pinstore/pinstore/internal/filewatch"
	"github.com/pinstore/pinstore/store/shardmap"
)

// DefaultMapPoll is how often Watch looks at the shard map file unless
// told otherwise. A move waits at least this long (plus the query
// timeout) after each map change before relying on every server having it.
const DefaultMapPoll = 2 * time.Second

// ReloadFile re-reads the shard map file the router was built from
// (Config.MapFile), validates it with the running map's shard count and
// prefix as defaults, and puts it in force. A map that does not parse or
// validate, changes the shard count or prefix, or has no writable open
// range is rejected with an error saying why, and the map in force stays.
// Concurrent calls (a poll and a SIGHUP) are safe: the map left in force
// was read from the file after the last change took effect.
func (r *Router) ReloadFile() error {
	const op = "topology.ReloadFile"
	if r.cfg.MapFile == "" {
		return fmt.Errorf("%s: the store was not opened from a shard map file (PINSTORE_SHARD_MAP)", op)
	}
	for {
		old := r.cur.Load()
		data, err := os.ReadFile(r.cfg.MapFile)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		t, err := r.buildFrom(old, data)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", op, r.cfg.MapFile, err)
		}
		// Compare-and-swap: if another reload won meanwhile, read the file
		// again, so an older read never replaces a newer one.
		if r.installIf(old, t) {
			return nil
		}
	}
}

// buildFrom parses data as a map replacing old's and builds its topology.
func (r *Router) buildFrom(old *Topology, data []byte) (*Topology, error) {
	m, err := shardmap.Parse(data, old.m.Shards, old.m.DBPrefix)
	if err != nil {
		return nil, err
	}
	if m.Shards != old.m.Shards || m.DBPrefix != old.m.DBPrefix {
		return nil, fmt.Errorf("shards and db_prefix cannot change while running (%d %q → %d %q)",
			old.m.Shards, old.m.DBPrefix, m.Shards, m.DBPrefix)
	}
	return r.build(m)
}

// Watch polls the shard map file every interval (DefaultMapPoll when
// every <= 0) until ctx is done. Each poll looks for new content as
// internal/filewatch does (move-shards replaces the file). New content is
// put in force with the same checks as ReloadFile and logged as "shard
// map reloaded" with the new version and a summary; a rejected map is
// logged at ERROR once per distinct content, and the map in force stays.
// It does nothing when the store has no map file.
func (r *Router) Watch(ctx context.Context, every time.Duration, logger *slog.Logger) {
	if logger == nil {
		logger = r.cfg.Logger
	}
	if r.cfg.MapFile == "" {
		logger.Info("no shard map file: the shard map will not be reloaded")
		return
	}
	if every <= 0 {
		every = DefaultMapPoll
	}
	w := &mapWatcher{r: r, file: filewatch.New(r.cfg.MapFile), log: logger}
	w.poll() // the file may have changed since Open
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			w.poll()
		}
	}
}

type mapWatcher struct {
	r    *Router
	file *filewatch.File
	log  *slog.Logger
}

func (w *mapWatcher) poll() {
	data, changed, err := w.file.Changed()
	if err != nil {
		w.log.Error("shard map file unreadable; keeping the map in force", "file", w.file.Path(), "error", err.Error(), "version", w.r.Map().Version())
	}
	if !changed {
		return
	}
	before := w.r.Map().Version()
	if err := w.reload(data); err != nil {
		w.log.Error("shard map rejected; keeping the map in force",
			"file", w.file.Path(), "error", err.Error(), "version", before)
		return
	}
	m := w.r.Map()
	if v := m.Version(); v != before {
		w.log.Info("shard map reloaded", "file", w.file.Path(), "version", v, "previous", before,
			"ranges", len(m.Ranges), "hosts", len(m.Hosts), "summary", m.Summary())
	}
}

// reload puts data in force unless it is the map already in force (a
// content hash of the file can differ from the map's canonical version).
// When a concurrent reload (ReloadFile) wins the swap, the next poll reads
// the file again rather than trusting this read.
func (w *mapWatcher) reload(data []byte) error {
	old := w.r.cur.Load()
	t, err := w.r.buildFrom(old, data)
	if err != nil {
		return err
	}
	if t.m.Version() == old.m.Version() {
		return nil
	}
	if !w.r.installIf(old, t) {
		w.file.Forget()
	}
	return nil
}
