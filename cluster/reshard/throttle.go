package reshard

import (
	"fmt"

	"github.com/pinstore/pinstore/cluster/throttle"
	"github.com/pinstore/pinstore/store/shardmap"
)

// throttleHosts are the hosts the throttle reads for shard work between
// hosts a and b (names in m): each master's Threads_running, and the lag
// of every replica the map names for it.
func (mv *mover) throttleHosts(m *shardmap.Map, names ...string) []throttle.Host {
	var out []throttle.Host
	for _, name := range names {
		spec, ok := m.Hosts[name]
		if !ok || spec.Master == "" {
			continue
		}
		if db, err := mv.hosts.pool(spec.Master); err == nil {
			out = append(out, throttle.Host{Name: name, DB: db})
		}
		for i, dsn := range spec.ReplicaDSNs() {
			if db, err := mv.hosts.pool(dsn); err == nil {
				out = append(out, throttle.Host{Name: fmt.Sprintf("%s replica %d", name, i+1), DB: db, Replica: true})
			}
		}
	}
	return out
}

// throttleFor is the throttler of a pass of shard work: the catch-up
// passes' leaves the redo log out (see Move).
func (mv *mover) throttleFor(what string) *throttle.Throttler {
	if what == "catch-up" || what == "keeping the old copies" {
		return mv.catchUpThrottle
	}
	return mv.throttle
}
