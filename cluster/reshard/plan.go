package reshard

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

// plan checks a new move against the map and the hosts and returns its
// state. It changes nothing. The refusals are those Move lists.
func (mv *mover) plan(ctx context.Context, m *shardmap.Map) (*moveState, error) {
	o := mv.opt
	if o.First < 0 || o.Last < o.First || o.Last >= m.Shards {
		return nil, model.Errorf(model.EInvalid, "range %d-%d is outside the map's shards 0-%d", o.First, o.Last, m.Shards-1)
	}
	target, ok := m.Hosts[o.To]
	if !ok {
		return nil, model.Errorf(model.EInvalid, "target host %q is not in the shard map (hosts: %s)", o.To, strings.Join(hostNames(m), ", "))
	}
	st := &moveState{Range: fmt.Sprintf("%d-%d", o.First, o.Last), To: o.To, Step: stepCopy, Started: time.Now().UTC().Truncate(time.Second)}
	var onTarget []int
	for sh := o.First; sh <= o.Last; sh++ {
		r, _ := m.RangeOf(sh)
		if r.Host == o.To {
			onTarget = append(onTarget, sh)
			continue
		}
		if r.ReadOnly {
			return nil, model.Errorf(model.EConflict, "shard %d is read-only in the map but no move is recorded (%s): another tool may be moving it; finish that first", sh, mv.lock.where())
		}
		if n := len(st.From); n > 0 && st.From[n-1].Host == r.Host {
			a, _, _ := shardmap.ParseRange(st.From[n-1].Shards)
			st.From[n-1].Shards = fmt.Sprintf("%d-%d", a, sh)
		} else {
			st.From = append(st.From, moveFrom{Shards: fmt.Sprintf("%d-%d", sh, sh), Host: r.Host})
		}
	}
	if len(onTarget) > 0 {
		return nil, model.Errorf(model.EConflict, "%d of the shards (%s) are already on %q", len(onTarget), shardList(onTarget), o.To)
	}
	if err := st.index(); err != nil {
		return nil, err
	}
	// While writes are held, new users must still have somewhere to go.
	if held, err := m.Rewrite(o.First, o.Last, func(r *shardmap.Range) { r.ReadOnly = true }); err != nil || held.CheckWritable() != nil {
		return nil, model.Errorf(model.EInvalid, "holding writes on %s would leave no writable range open for new users; open another range first", st.Range)
	}
	// Hosts: the target must be another server than every source, hold
	// none of the range's databases, and the sources must be migrated.
	dst, err := mv.hosts.pool(target.Master)
	if err != nil {
		return nil, err
	}
	dstID, err := serverID(ctx, dst)
	if err != nil {
		return nil, fmt.Errorf("target host %q: %w", o.To, err)
	}
	newest := mv.ms[len(mv.ms)-1].Version
	for _, f := range st.From {
		src, err := mv.hosts.db(m, f.Host)
		if err != nil {
			return nil, err
		}
		id, err := serverID(ctx, src)
		if err != nil {
			return nil, fmt.Errorf("source host %q: %w", f.Host, err)
		}
		if id == dstID {
			return nil, model.Errorf(model.EInvalid, "target host %q is the same MySQL server as source host %q", o.To, f.Host)
		}
		a, b, _ := shardmap.ParseRange(f.Shards)
		for sh := a; sh <= b; sh++ {
			var v int
			if err := src.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM "+m.DBName(sh)+".schema_migrations").Scan(&v); err != nil {
				return nil, model.Wrap("", model.EInvalid, fmt.Sprintf("shard %d on %q is not provisioned; run pinstore migrate", sh, f.Host), err)
			}
			if v != newest {
				return nil, model.Errorf(model.EInvalid, "shard %d on %q is at schema version %d, not %d; run pinstore migrate first", sh, f.Host, v, newest)
			}
		}
	}
	names := make([]any, 0, o.Last-o.First+1)
	for sh := o.First; sh <= o.Last; sh++ {
		names = append(names, m.DBName(sh))
	}
	var have []string
	if err := sqlx.SelectContext(ctx, dst, &have, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME IN (?"+strings.Repeat(",?", len(names)-1)+") ORDER BY SCHEMA_NAME", names...); err != nil {
		return nil, fmt.Errorf("target host %q: %w", o.To, err)
	}
	if len(have) > 0 {
		return nil, model.Errorf(model.EConflict, "target host %q already has %d of the range's databases (%s…) though the map does not place them there; drop them first if they are leftovers", o.To, len(have), have[0])
	}
	return st, nil
}

// hostNames is the map's host names, sorted.
func hostNames(m *shardmap.Map) []string {
	var out []string
	for n := range m.Hosts {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// shardList writes sorted shards as ranges: "0-3,7,9-10".
func shardList(shards []int) string {
	var parts []string
	for i := 0; i < len(shards); {
		j := i
		for j+1 < len(shards) && shards[j+1] == shards[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(shards[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", shards[i], shards[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
