package etcdtopo

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/pinstore/pinstore/model"
)

// Registration is what a running server says about itself under
// P/servers/<id>, kept there by its lease.
type Registration struct {
	ID      string `json:"id"`      // unique among running servers: host name and listen port
	Addr    string `json:"addr"`    // where it listens
	Version string `json:"version"` // version of the shard map it routes by
	MapRev  int64  `json:"map_revision"`
	// Drained is the version of the map from which on no write routed by
	// an older map is still running on this server: a move waits for it
	// before it relies on the source being quiet.
	Drained string    `json:"drained"`
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
	PID     int       `json:"pid"`
	// Down lists, by host name, the masters this server cannot reach, and
	// since when: what an automatic failover counts (package failover).
	Down map[string]Sighting `json:"down,omitempty"`
}

// Sighting is a master a server cannot reach: its address (a failover
// changes it, and a sighting of the old master says nothing of the new)
// and since when every try failed.
type Sighting struct {
	Master string    `json:"master"`
	Since  time.Time `json:"since"`
}

// serversKey is the prefix of every registration.
func (c *Client) serversKey() string { return c.key("servers") + "/" }

// serverKey is the key of one registration; id may not hold a "/".
func (c *Client) serverKey(id string) string {
	return c.serversKey() + strings.ReplaceAll(id, "/", "_")
}

// Servers lists the registrations of the servers alive now (their leases
// unexpired), sorted by ID, and the etcd revision they were read at.
func (c *Client) Servers(ctx context.Context) ([]Registration, int64, error) {
	ctx, cancel := call(ctx)
	defer cancel()
	resp, err := c.cli.Get(ctx, c.serversKey(), clientv3.WithPrefix())
	if err != nil {
		return nil, 0, c.unavailable("etcdtopo.Servers", err)
	}
	out := make([]Registration, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r Registration
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			r = Registration{ID: strings.TrimPrefix(string(kv.Key), c.serversKey()) + " (unreadable registration)"}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, resp.Header.Revision, nil
}

// WaitDrained returns once every registered server reports that it routes
// by the map of version and that no write routed by an older map is still
// running on it (Registration.Drained), or fails with an error naming the
// servers that do not within timeout. Servers that stop meanwhile stop
// counting (their registrations go). No server registered counts as done.
func (c *Client) WaitDrained(ctx context.Context, version string, timeout time.Duration) ([]Registration, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		regs, rev, err := c.Servers(ctx)
		if err != nil {
			return nil, err
		}
		var late []string
		for _, r := range regs {
			if r.Drained != version {
				late = append(late, fmt.Sprintf("%s (routes by %s, drained %s)", r.ID, r.Version, r.Drained))
			}
		}
		if len(late) == 0 {
			return regs, nil
		}
		// Wait for any change of a registration, then look again.
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := c.cli.Watch(wctx, c.serversKey(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		select {
		case <-wch:
		case <-time.After(time.Second): // a watch that is not answering: look again anyway
		case <-ctx.Done():
		}
		wcancel()
		if ctx.Err() != nil {
			return nil, model.Errorf(model.EUnavailable, "after %v, servers do not report map %s drained: %s", timeout, version, strings.Join(late, "; "))
		}
	}
}
