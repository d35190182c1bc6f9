package reshard

import (
	"context"
	"fmt"
	"time"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

// loadMap reads the map with the shard count and prefix of the map in
// force as defaults, as a server reloading it does, and its revision.
func (mv *mover) loadMap(ctx context.Context) (*shardmap.Map, string, error) {
	return mv.home.ReadMap(ctx, mv.cur.Shards, mv.cur.DBPrefix)
}

// rewrite re-reads the map (so that an operator's unrelated edit made
// during the move is kept), checks that the move still stands at step
// expect (EConflict if not), applies edit, checks that a server could put
// the result in force, and writes it as a compare-and-swap on the revision
// it read: a change made meanwhile by anyone else makes it EConflict.
// Nothing is written on error.
func (mv *mover) rewrite(ctx context.Context, expect string, edit func(*shardmap.Map) (*shardmap.Map, error), why string) (*shardmap.Map, error) {
	st := mv.lock.state
	m, rev, err := mv.loadMap(ctx)
	if err != nil {
		return nil, err
	}
	step, err := where(m, st)
	if err != nil {
		return nil, err
	}
	if step != expect {
		return nil, model.Errorf(model.EConflict, "the shard map changed under the move: the range should be at step %q, the map says %q", expect, step)
	}
	next, err := edit(m)
	if err != nil {
		return nil, err
	}
	if m.CheckWritable() == nil && next.CheckWritable() != nil {
		return nil, model.Errorf(model.EInvalid, "holding writes on %s would leave no writable range open for new users; open another range first (nothing written)", st.Range)
	}
	if err := mv.servable(next); err != nil {
		return nil, fmt.Errorf("the rewritten map would be rejected by servers (nothing written): %w", err)
	}
	note := fmt.Sprintf("Rewritten by pinstore move-shards (shards %s to %s: %s) at %s.", st.Range, st.To, why, time.Now().UTC().Format(time.RFC3339))
	if _, err := mv.home.WriteMap(ctx, next, rev, note); err != nil {
		return nil, err
	}
	mv.cur = next
	return next, nil
}

// onRange is the edit that applies fn to the ranges of the move's shards.
func (mv *mover) onRange(fn func(*shardmap.Range)) func(*shardmap.Map) (*shardmap.Map, error) {
	st := mv.lock.state
	return func(m *shardmap.Map) (*shardmap.Map, error) { return m.Rewrite(st.first, st.last, fn) }
}

// toSources is the edit that puts the move's shards back on the hosts
// they came from, writable.
func (mv *mover) toSources(m *shardmap.Map) (*shardmap.Map, error) {
	for _, f := range mv.lock.state.From {
		a, b, err := shardmap.ParseRange(f.Shards)
		if err != nil {
			return nil, err
		}
		if m, err = m.Rewrite(a, b, func(r *shardmap.Range) { r.Host, r.ReadOnly = f.Host, false }); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// servable checks what a server checks before it puts a new map in force,
// beyond the validation Rewrite ran: the shard count and prefix of the map
// in force, and a usable DSN for every host.
func (mv *mover) servable(m *shardmap.Map) error {
	if m.Shards != mv.cur.Shards || m.DBPrefix != mv.cur.DBPrefix {
		return fmt.Errorf("shards and db_prefix cannot change while running (%d %q → %d %q)",
			mv.cur.Shards, mv.cur.DBPrefix, m.Shards, m.DBPrefix)
	}
	for name, spec := range m.Hosts {
		if _, err := mv.hosts.pool(spec.Master); err != nil {
			return fmt.Errorf("host %q: %w", name, err)
		}
	}
	return nil
}
