package store

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

// Ready pings every host of the map in force (master) and Redis, each with
// a one-second deadline. Errors name the host, never its DSN.
func (s *Store) Ready(ctx context.Context) []model.Health {
	t := s.topo.Load()
	out := make([]model.Health, len(t.hosts)+1)
	var wg sync.WaitGroup
	for i, h := range t.hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = model.Health{Name: "mysql:" + h.name, OK: true}
			c, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if err := h.db.PingContext(c); err != nil {
				out[i] = model.Health{Name: "mysql:" + h.name, Error: fmt.Sprintf("mysql host %q at %s is not answering", h.name, h.addr)}
			}
		}()
	}
	ok, msg := s.owners.ready(ctx)
	out[len(t.hosts)] = model.Health{Name: "redis", OK: ok, Error: msg}
	wg.Wait()
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
}

// Hosts reports every host of the map in force, its ranges and whether it
// answers a ping within a second.
func (s *Store) Hosts(ctx context.Context) []HostStatus {
	t := s.topo.Load()
	health := map[string]model.Health{}
	for _, h := range s.Ready(ctx) {
		health[h.Name] = h
	}
	var out []HostStatus
	for _, h := range t.hosts {
		st := HostStatus{Name: h.name, Addr: h.addr, OK: health["mysql:"+h.name].OK, Error: health["mysql:"+h.name].Error}
		if r := t.m.Hosts[h.name].Replica; r != "" {
			st.Replica = shardmap.HostAddr(r)
		}
		for _, r := range t.m.Ranges {
			if r.Host == h.name {
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
		out = append(out, st)
	}
	return out
}

// ShardMapInfo describes the shard map in force and pings its hosts, for
// the admin route. It carries host addresses, never DSNs.
func (s *Store) ShardMapInfo(ctx context.Context) model.ShardMapInfo {
	t := s.topo.Load()
	info := model.ShardMapInfo{
		Version:  t.m.Version(),
		Source:   s.cfg.MapFile,
		LoadedAt: t.loaded,
		Shards:   t.m.Shards,
		DBPrefix: t.m.DBPrefix,
		Hosts:    []model.HostInfo{},
		Ranges:   make([]model.RangeInfo, 0, len(t.m.Ranges)),
	}
	if info.Source == "" {
		info.Source = "PINSTORE_MYSQL_DSN"
	}
	for _, h := range s.Hosts(ctx) {
		info.Hosts = append(info.Hosts, model.HostInfo{Name: h.Name, Addr: h.Addr, Replica: h.Replica, OK: h.OK, Error: h.Error})
	}
	sort.Slice(info.Hosts, func(i, j int) bool { return info.Hosts[i].Name < info.Hosts[j].Name })
	for _, r := range t.m.Ranges {
		info.Ranges = append(info.Ranges, model.RangeInfo{First: r.First, Last: r.Last, Host: r.Host, Open: r.IsOpen(), ReadOnly: r.ReadOnly})
	}
	sort.Slice(info.Ranges, func(i, j int) bool { return info.Ranges[i].First < info.Ranges[j].First })
	return info
}

// Owners returns the owner of each live pin among pins: from the Redis
// cache, and for misses from MySQL (one query per host), filling the
// cache. Unknown or deleted pins are absent from the result.
func (s *Store) Owners(ctx context.Context, pins []uint64) (map[uint64]uint64, error) {
	const op = "store.Owners"
	for _, id := range pins {
		if _, _, err := s.resolve(op, id, idcodec.TypePin); err != nil {
			return nil, err
		}
	}
	return s.owners.lookup(ctx, pins, s.loadOwners)
}

// loadOwners reads the owners of live pins from MySQL.
func (s *Store) loadOwners(ctx context.Context, pins []uint64) (map[uint64]uint64, error) {
	objs, err := s.GetMany(ctx, pins, idcodec.TypePin)
	if err != nil {
		return nil, err
	}
	out := make(map[uint64]uint64, len(objs))
	for _, o := range objs {
		d, err := model.DecodeDoc(idcodec.TypePin, o.Doc)
		if err != nil {
			return nil, model.Wrap("store.loadOwners", model.EInternal, "", err)
		}
		out[o.ID] = uint64(d.(*model.PinDoc).OwnerID)
	}
	return out, nil
}
