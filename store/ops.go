package store

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/replicas"
	"github.com/pinstore/pinstore/store/shardmap"
	"github.com/pinstore/pinstore/store/topology"
)

// TopologySource is where the map in force comes from when it is not a
// file (etcd): what /readyz and the admin route say about it.
type TopologySource interface {
	// String names it, without credentials.
	String() string
	// Health is false, with why, while the server may route by an older
	// map than the topology's (etcd unreachable, a map rejected).
	Health() (bool, string)
	// Revision is the topology's revision of the map in force.
	Revision() int64
	// Servers lists the servers following the topology.
	Servers(ctx context.Context) ([]fleet.ServerInfo, error)
}

// Ops is what operators and the admin routes use: the map in force and its
// hosts' health, readiness, and migrating every shard database.
type Ops struct{ *core }

// Router is the shard map in force with its pools: reload it (Reload,
// ReloadFile, Watch) while the store runs.
func (s *Ops) Router() *topology.Router { return s.router }

// Map returns the shard map in force.
func (s *Ops) Map() *shardmap.Map { return s.router.Map() }

// Ready pings every host of the map in force (master) and Redis, each with
// a one-second deadline, and reports the topology source's health and the
// hosts' last provisioning check (provision.go). Errors name the host,
// never its DSN. Redis down degrades the server but does not make it
// unready: every read and write goes on without it, only slower.
func (s *Ops) Ready(ctx context.Context) []fleet.Health {
	hosts := s.router.Current().Hosts()
	out := make([]fleet.Health, len(hosts)+1, len(hosts)+2)
	if src := s.cfg.Source; src != nil {
		h := fleet.Health{Name: "topology", OK: true, Degrades: true}
		if ok, why := src.Health(); !ok {
			h.OK, h.Error = false, why
		}
		out = append(out, h)
	}
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() {
			out[i] = fleet.Health{Name: "mysql:" + h.Name, OK: true}
			c, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if err := h.DB.PingContext(c); err != nil {
				out[i] = fleet.Health{Name: "mysql:" + h.Name, Error: fmt.Sprintf("mysql host %q at %s is not answering", h.Name, h.Addr)}
			}
		})
	}
	out[len(hosts)] = s.redisHealth(ctx)
	wg.Wait()
	out = append(out, s.provisionHealth()...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// HostStatus is one host of the map with its ranges, as `pinstore shards`
// prints it.
type HostStatus struct {
	Name    string   `json:"name"`
	Addr    string   `json:"addr"`
	Replica string   `json:"replica,omitempty"`
	Ranges  []string `json:"ranges"`
	OK      bool     `json:"ok"`
	Error   string   `json:"error,omitempty"`

	// Replication (replica hook): the master's GTID position and mode,
	// and each replica's state.
	ReplicaReads bool                `json:"replica_reads"`
	Replication  replicas.HostReport `json:"replication"`
}

// Hosts reports every host of the map in force (those holding no range
// too), its ranges and whether it answers a ping within a second, and for
// a host with replicas what its master and each replica say about
// replication (replicas.Describe).
func (s *Ops) Hosts(ctx context.Context) []HostStatus {
	t := s.router.Current()
	hosts := t.AllHosts()
	out := make([]HostStatus, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() {
			st := HostStatus{Name: h.Name, Addr: h.Addr, OK: true, Ranges: []string{}}
			c, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if err := h.DB.PingContext(c); err != nil {
				st.OK, st.Error = false, fmt.Sprintf("mysql host %q at %s is not answering", h.Name, h.Addr)
			}
			if rs := t.Map().Hosts[h.Name].ReplicaDSNs(); len(rs) > 0 {
				st.Replica = shardmap.HostAddr(rs[0])
			}
			st.ReplicaReads, st.Replication = h.ReplicaReads, s.replicas.Describe(ctx, h)
			for _, r := range t.Map().Ranges {
				if r.Host == h.Name {
					desc := fmt.Sprintf("%d-%d", r.First, r.Last)
					if !r.IsOpen() {
						desc += " (closed)"
					}
					if r.ReadOnly {
						desc += " (read-only)"
					}
					st.Ranges = append(st.Ranges, desc)
				}
			}
			out[i] = st
		})
	}
	wg.Wait()
	return out
}

// ShardMapInfo describes the shard map in force and pings its hosts, for
// the admin route. It carries host addresses, never DSNs.
func (s *Ops) ShardMapInfo(ctx context.Context) fleet.ShardMapInfo {
	t := s.router.Current()
	m := t.Map()
	info := fleet.ShardMapInfo{
		Version:  m.Version(),
		Source:   s.cfg.MapFile,
		LoadedAt: t.Loaded(),
		Shards:   m.Shards,
		DBPrefix: m.DBPrefix,
		Hosts:    []fleet.HostInfo{},
		Ranges:   make([]fleet.RangeInfo, 0, len(m.Ranges)),
	}
	if info.Source == "" {
		info.Source = "PINSTORE_MYSQL_DSN"
	}
	if src := s.cfg.Source; src != nil {
		info.Source = src.String()
		info.Revision = src.Revision()
		if ok, why := src.Health(); !ok {
			info.Stale = why
		}
		servers, err := src.Servers(ctx)
		if err != nil {
			info.ServersError = model.ErrorMessage(err)
		}
		info.Servers = servers
	}
	for _, h := range s.Hosts(ctx) {
		info.Hosts = append(info.Hosts, fleet.HostInfo{Name: h.Name, Addr: h.Addr, Replica: h.Replica, OK: h.OK, Error: h.Error,
			GTIDPosition: h.Replication.GTIDPosition, SemiSync: h.Replication.SemiSync, ReplicaReads: h.ReplicaReads, Replicas: h.Replication.Replicas})
	}
	sort.Slice(info.Hosts, func(i, j int) bool { return info.Hosts[i].Name < info.Hosts[j].Name })
	for _, r := range m.Ranges {
		info.Ranges = append(info.Ranges, fleet.RangeInfo{First: r.First, Last: r.Last, Host: r.Host, Open: r.IsOpen(), ReadOnly: r.ReadOnly})
	}
	sort.Slice(info.Ranges, func(i, j int) bool { return info.Ranges[i].First < info.Ranges[j].First })
	return info
}

// redisHealth pings Redis within a second ("redis"); its failure degrades
// the server (the caches are skipped). With Redis disabled
// it is not asked: the check says Disabled (and not OK), and nothing
// depends on it.
func (s *Ops) redisHealth(ctx context.Context) fleet.Health {
	if s.redis == nil { // PINSTORE_REDIS_DISABLED: nothing to ask, and nothing waits on it
		return fleet.Health{Name: "redis", Disabled: true}
	}
	h := fleet.Health{Name: "redis", OK: true, Degrades: true}
	c, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := s.redis.Ping(c).Err(); err != nil {
		h.OK, h.Error = false, "redis is not answering"
	}
	return h
}
