package throttle

import (
	"context"
	"fmt"
	"sync"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/store/shardmap"
	"github.com/pinstore/pinstore/store/topology"
)

// Pacer holds work on the hosts of a shard map back with a Throttler:
// Pace(ctx, host) waits while the host's master or one of the replicas
// the map names for it is over the limits. It opens one small pool per
// server the first time it is asked about it; Close closes them.
type Pacer struct {
	t   *Throttler
	m   func() *shardmap.Map
	mu  sync.Mutex
	dbs map[string]*sqlx.DB // by DSN
}

// NewPacer paces with t the hosts of the map m returns.
func NewPacer(t *Throttler, m func() *shardmap.Map) *Pacer {
	return &Pacer{t: t, m: m, dbs: map[string]*sqlx.DB{}}
}

// Pace waits while host (its name in the map) is busy. A server that
// cannot be reached does not hold the work back.
func (p *Pacer) Pace(ctx context.Context, host string) error {
	return p.t.Wait(ctx, p.hosts(host))
}

func (p *Pacer) hosts(name string) []Host {
	spec, ok := p.m().Hosts[name]
	if !ok {
		return nil
	}
	var out []Host
	if db := p.pool(spec.Master); db != nil {
		out = append(out, Host{Name: name, DB: db})
	}
	for i, dsn := range spec.ReplicaDSNs() {
		if db := p.pool(dsn); db != nil {
			out = append(out, Host{Name: fmt.Sprintf("%s replica %d", name, i+1), DB: db, Replica: true})
		}
	}
	return out
}

func (p *Pacer) pool(dsn string) *sqlx.DB {
	if dsn == "" {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if db, ok := p.dbs[dsn]; ok {
		return db
	}
	db, err := topology.Dial(dsn, 2)
	if err != nil {
		return nil
	}
	p.dbs[dsn] = db
	return db
}

// Close closes the pools Pace opened.
func (p *Pacer) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, db := range p.dbs {
		db.Close()
	}
	clear(p.dbs)
}
