package store

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/migrations"
	"github.com/pinstore/pinstore/store/topology"
)

// Provisioning: whether each host of the map in force holds the shard
// databases the map routes to it, migrated far enough, and recorded by
// pinstore migrate as this deployment's (migrations.RecordDeployment). It
// is checked when the store opens (CheckProvisioning) and then in the
// background (every provisionEvery, every provisionRetry while a host
// fails), never per request; /readyz reports the last result.
const (
	provisionEvery = time.Minute
	provisionRetry = 5 * time.Second
)

// Provisioned is what one host's check found.
type Provisioned struct {
	Host string
	// Checked is false when the host did not answer: nothing else is known.
	Checked bool
	Err     string
	// Shards is how many shard databases the map routes to the host;
	// Missing how many of them do not exist, FirstMissing the first.
	Shards, Missing int
	FirstMissing    string
	// Version is the lowest migration version of the shards sampled (the
	// first and last of the host); Newest this binary's newest.
	Version, Newest int
	// Recorded is whether the host records the deployment of this prefix,
	// and RecordedShards its shard count.
	Recorded       bool
	RecordedShards int
}

// Foreign reports whether the host's record names another deployment: the
// same prefix with another shard count.
func (p Provisioned) Foreign(shards int) bool { return p.Recorded && p.RecordedShards != shards }

// provisioning holds the last check's results.
type provisioning struct {
	mu      sync.Mutex
	version string // the map version checked
	shards  int
	prefix  string
	results []Provisioned
}

// CheckProvisioning checks every host of the map in force now, keeps the
// result for Ready and returns it.
func (s *Ops) CheckProvisioning(ctx context.Context) []Provisioned {
	t := s.router.Current()
	newest, _ := migrations.Newest() // the embedded files parse: Open would not have got here otherwise
	hosts := t.Hosts()
	out := make([]Provisioned, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() { out[i] = checkHost(ctx, t, h, newest) })
	}
	wg.Wait()
	m := t.Map()
	s.provision.mu.Lock()
	s.provision.version, s.provision.shards, s.provision.prefix, s.provision.results = m.Version(), m.Shards, m.DBPrefix, out
	s.provision.mu.Unlock()
	return out
}

// checkHost checks one host, each statement within a few seconds.
func checkHost(ctx context.Context, t *topology.Topology, h *topology.Host, newest int) Provisioned {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m := t.Map()
	p := Provisioned{Host: h.Name, Newest: newest}
	shards := t.ShardsOf(h)
	p.Shards = len(shards)
	exists := map[string]bool{}
	like := strings.NewReplacer(`\`, `\\`, "_", `\_`, "%", `\%`).Replace(m.DBPrefix) + "%"
	rows, err := h.DB.QueryContext(ctx, "SHOW DATABASES LIKE ?", like)
	if err != nil {
		p.Err = fmt.Sprintf("mysql host %q did not answer the provisioning check", h.Name)
		return p
	}
	for rows.Next() {
		var n string
		if rows.Scan(&n) == nil {
			exists[n] = true
		}
	}
	if err := rows.Close(); err != nil {
		p.Err = fmt.Sprintf("mysql host %q did not answer the provisioning check", h.Name)
		return p
	}
	for _, n := range shards {
		if name := m.DBName(n); !exists[name] {
			if p.Missing == 0 {
				p.FirstMissing = name
			}
			p.Missing++
		}
	}
	p.Version = newest
	if len(shards) > 0 && p.Missing == 0 {
		for _, n := range []int{shards[0], shards[len(shards)-1]} {
			v, err := migrations.Version(ctx, h.DB, m.DBName(n))
			if err != nil {
				p.Err = fmt.Sprintf("mysql host %q did not answer the provisioning check", h.Name)
				return p
			}
			p.Version = min(p.Version, v)
		}
	}
	if p.RecordedShards, p.Recorded, err = migrations.RecordedDeployment(ctx, h.DB, m.DBPrefix); err != nil {
		p.Err = fmt.Sprintf("mysql host %q did not answer the provisioning check", h.Name)
		return p
	}
	p.Checked = true
	return p
}

// provisionHealth is the last check's result as /readyz's checks, one
// "shards:<host>" per host: failing (unready) when shard databases are
// missing or the host records another deployment; degrading when the
// shards are behind this binary's newest migration, or migrate never
// recorded them, or the host did not answer (its mysql check says so).
func (s *Ops) provisionHealth() []fleet.Health {
	s.provision.mu.Lock()
	defer s.provision.mu.Unlock()
	out := make([]fleet.Health, 0, len(s.provision.results))
	for _, p := range s.provision.results {
		out = append(out, p.Health(s.provision.prefix, s.provision.shards))
	}
	return out
}

// Health is the check as /readyz shows it for a deployment of prefix and
// shards: not OK and not Degrades when the host cannot take this
// deployment's writes.
func (p Provisioned) Health(prefix string, shards int) fleet.Health {
	h := fleet.Health{Name: "shards:" + p.Host, OK: true}
	switch {
	case !p.Checked:
		h.OK, h.Degrades, h.Error = false, true, p.Err
	case p.Foreign(shards):
		h.OK, h.Error = false, fmt.Sprintf("mysql host %q holds another deployment under the prefix %q (%d shards; this server's map has %d): this server must not write there", p.Host, prefix, p.RecordedShards, shards)
	case p.Missing > 0:
		h.OK, h.Error = false, fmt.Sprintf("mysql host %q lacks %d of the %d shard databases the map routes to it (the first: %s): run pinstore migrate", p.Host, p.Missing, p.Shards, p.FirstMissing)
	case p.Shards > 0 && !p.Recorded:
		h.OK, h.Degrades, h.Error = false, true, fmt.Sprintf("pinstore migrate has not recorded the shard databases on mysql host %q as this deployment's (prefix %q, %d shards): if they are another deployment's, stop this server; if they are this one's, run pinstore migrate", p.Host, prefix, shards)
	case p.Version < p.Newest:
		h.OK, h.Degrades, h.Error = false, true, fmt.Sprintf("the shard databases on mysql host %q are at migration %d, this server's newest is %d: run pinstore migrate", p.Host, p.Version, p.Newest)
	}
	return h
}

// provisionLoop checks the hosts every provisionEvery, or every
// provisionRetry while one fails or the map changed since the last check,
// until ctx ends.
func (s *Ops) provisionLoop(ctx context.Context) {
	s.provision.mu.Lock()
	first := s.provision.results == nil
	s.provision.mu.Unlock()
	if first {
		s.CheckProvisioning(ctx)
	}
	for {
		wait := provisionEvery
		for _, h := range s.provisionHealth() {
			if !h.OK {
				wait = provisionRetry
			}
		}
		s.provision.mu.Lock()
		if s.provision.version != s.router.Map().Version() {
			wait = provisionRetry
		}
		s.provision.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		s.CheckProvisioning(ctx)
	}
}
