package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store"
	"github.com/pinstore/pinstore/store/shardmap"
)

// runShards is `pinstore shards`: the shard map, every host of it and
// whether it answers (with its replicas), and with PINSTORE_TOPOLOGY the
// servers registered in etcd and the map each routes by. It exits 1 when
// any host does not answer or lacks the shard databases the map routes
// to it (never migrated, or another deployment's), a replica does not
// replicate, or the map in etcd does not validate: then it says why,
// lists the servers, and shows the map they route by (read from etcd at
// its revision) in its place.
func runShards(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("shards", "shards\n\nprints the shard map and whether each host answers; exits 1 when any host does not\nanswer or lacks its shard databases (run pinstore migrate), or, with PINSTORE_TOPOLOGY,\nwhen the map in etcd does not validate (then it shows the servers and the map they\nroute by)", stderr)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shards: unexpected arguments %q", fs.Args())
	}
	s, topo, err := openStore(ctx, getenv, io.Discard)
	var bad *invalidMapError
	if errors.As(err, &bad) {
		return shardsInvalidMap(ctx, getenv, bad, stdout)
	}
	if err != nil {
		return err
	}
	defer topo.close()
	defer s.Close()
	m := s.Map()
	fmt.Fprintf(stdout, "%d shards, databases %s … %s\n", m.Shards, m.DBName(0), m.DBName(m.Shards-1))
	if topo != nil {
		fmt.Fprintf(stdout, "map version %s, revision %d in %s\n", m.Version(), topo.rev, topo.c.URL())
	}
	hostsErr := printHosts(ctx, s, stdout)
	if topo != nil {
		servers, err := topo.servers(ctx)
		if err != nil {
			return fmt.Errorf("shards: listing the servers: %w", err)
		}
		printServers(stdout, servers, m.Version(), " (not the map in etcd)")
	}
	return hostsErr
}

// printHosts prints every host of the store's map: its address, whether
// it answers, its replication and its ranges. The error (for the exit
// status: a script or a monitor reads it) names the hosts that do not
// answer and the replicas that do not replicate.
func printHosts(ctx context.Context, s *store.Store, stdout io.Writer) error {
	hosts := s.Hosts(ctx)
	m := s.Map()
	provisioned := map[string]fleet.Health{}
	for _, p := range s.CheckProvisioning(ctx) {
		provisioned[p.Host] = p.Health(m.DBPrefix, m.Shards)
	}
	var down, unprovisioned, broken []string
	for _, h := range hosts {
		state, warning := "up", ""
		p, checked := provisioned[h.Name]
		switch {
		case !h.OK:
			state = "DOWN: " + h.Error
			down = append(down, h.Name)
		case checked && !p.OK && !p.Degrades:
			state = "up, NOT PROVISIONED: " + p.Error
			unprovisioned = append(unprovisioned, h.Name)
		case checked && !p.OK:
			warning = p.Error
		}
		fmt.Fprintf(stdout, "host %-12s %-24s %s\n", h.Name, h.Addr, state)
		if warning != "" {
			fmt.Fprintf(stdout, "  warning: %s\n", warning)
		}
		if len(h.Replication.Replicas) > 0 {
			mode := "asynchronous"
			if h.Replication.SemiSync {
				mode = "semi-synchronous"
			}
			reads := "reads on the master only"
			if h.ReplicaReads {
				reads = "replicas serve reads"
			}
			fmt.Fprintf(stdout, "  master at GTID %s, %s, %s\n", orNone(h.Replication.GTIDPosition), mode, reads)
		}
		for _, r := range h.Replication.Replicas {
			fmt.Fprintf(stdout, "  replica %-22s %s\n", r.Addr, replicaLine(r))
			if !r.Replicating {
				broken = append(broken, fmt.Sprintf("replica %s of host %s", r.Addr, h.Name))
			}
		}
		for _, r := range h.Ranges {
			fmt.Fprintf(stdout, "  shards %s\n", r)
		}
		if len(h.Ranges) == 0 {
			fmt.Fprintf(stdout, "  no shards\n")
		}
	}
	var errs []error
	if len(down) > 0 {
		errs = append(errs, fmt.Errorf("shards: %d of %d hosts not answering: %s", len(down), len(hosts), strings.Join(down, ", ")))
	}
	if len(unprovisioned) > 0 {
		errs = append(errs, fmt.Errorf("shards: not provisioned for this deployment (writes there answer 503): %s", strings.Join(unprovisioned, ", ")))
	}
	if len(broken) > 0 {
		errs = append(errs, fmt.Errorf("shards: not replicating: %s", strings.Join(broken, ", ")))
	}
	return errors.Join(errs...)
}

// printServers prints the registered servers and the map each routes
// by, marking those not on version with note.
func printServers(stdout io.Writer, servers []fleet.ServerInfo, version, note string) {
	fmt.Fprintf(stdout, "%d servers registered\n", len(servers))
	for _, sv := range servers {
		mark := ""
		if sv.Version != version {
			mark = note
		}
		fmt.Fprintf(stdout, "server %-24s routes by %s (revision %d), drained %s%s\n", sv.ID, sv.Version, sv.MapRevision, sv.Drained, mark)
	}
}

// invalidMapError is openTopology's error when etcd answers but its map
// does not validate (or there is none): `pinstore shards` then still
// shows what the servers route by.
type invalidMapError struct {
	rev int64 // the bad map's revision; 0: no map
	err error
}

func (e *invalidMapError) Error() string { return e.err.Error() }
func (e *invalidMapError) Unwrap() error { return e.err }

// shardsInvalidMap is `pinstore shards` while the map in etcd does not
// validate: it says so and why, lists the servers with the map each
// routes by (they keep the last map they accepted), and shows the hosts
// of the map most of them route by, read from etcd at its revision (when
// etcd still has it). It always fails: the map in etcd needs a push.
func shardsInvalidMap(ctx context.Context, getenv func(string) string, bad *invalidMapError, stdout io.Writer) error {
	fail := fmt.Errorf("shards: %w; push a valid map with pinstore topology push FILE", bad)
	fmt.Fprintf(stdout, "NO VALID SHARD MAP IN ETCD: %s\n", model.ErrorMessage(bad))
	fmt.Fprintln(stdout, "servers keep routing by the last map they accepted; a valid push puts every server on it")
	topo, err := dialTopology(ctx, getenv)
	if err != nil {
		return errors.Join(fail, err)
	}
	defer topo.Close()
	t := &etcdTopo{c: topo}
	servers, err := t.servers(ctx)
	if err != nil {
		return errors.Join(fail, fmt.Errorf("shards: listing the servers: %w", err))
	}
	// The revision most servers route by (the newest on a tie).
	count := map[int64]int{}
	for _, sv := range servers {
		count[sv.MapRevision]++
	}
	revs := make([]int64, 0, len(count))
	for r := range count {
		revs = append(revs, r)
	}
	sort.Slice(revs, func(i, j int) bool {
		return count[revs[i]] > count[revs[j]] || count[revs[i]] == count[revs[j]] && revs[i] > revs[j]
	})
	version := ""
	for _, sv := range servers {
		if len(revs) > 0 && sv.MapRevision == revs[0] {
			version = sv.Version
		}
	}
	printServers(stdout, servers, version, " (not the map most servers route by)")
	if len(revs) == 0 || revs[0] == 0 {
		return fail
	}
	cfg, err := storeConfig(func(k string) string {
		if k == "PINSTORE_TOPOLOGY" || k == "PINSTORE_SHARD_MAP" {
			return ""
		}
		return getenv(k)
	})
	if err != nil {
		return errors.Join(fail, err)
	}
	data, err := topo.MapAt(ctx, revs[0])
	var m *shardmap.Map
	if err == nil {
		m, err = shardmap.Parse(data, cfg.Map.Shards, cfg.Map.DBPrefix)
	}
	if err != nil {
		fmt.Fprintf(stdout, "the map at revision %d, which servers route by, cannot be shown: %v\n", revs[0], err)
		return fail
	}
	fmt.Fprintf(stdout, "the map servers route by: version %s, revision %d in %s\n", m.Version(), revs[0], topo.URL())
	fmt.Fprintf(stdout, "%d shards, databases %s … %s\n", m.Shards, m.DBName(0), m.DBName(m.Shards-1))
	cfg.Map = m
	s, err := openStoreConfig(ctx, cfg, io.Discard)
	if err != nil {
		return errors.Join(fail, err)
	}
	defer s.Close()
	return errors.Join(fail, printHosts(ctx, s, stdout))
}

// replicaLine says in one line what a replica reports: replicating or
// not (and why), what it applied, and how far behind it is.
func replicaLine(r fleet.ReplicaInfo) string {
	if !r.OK {
		return "DOWN: " + r.Error
	}
	var b strings.Builder
	if r.Replicating {
		b.WriteString("replicating")
	} else {
		b.WriteString("NOT REPLICATING")
	}
	fmt.Fprintf(&b, ", applied %s, %d transactions behind", orNone(r.GTIDPosition), r.Behind)
	if r.SecondsBehindMaster != nil {
		fmt.Fprintf(&b, " (%d s by MariaDB)", *r.SecondsBehindMaster)
	}
	if r.LagMS != nil {
		fmt.Fprintf(&b, ", lag %d ms", *r.LagMS)
	}
	if r.SemiSync {
		b.WriteString(", semi-sync")
	}
	if r.Error != "" {
		b.WriteString(": " + r.Error)
	}
	return b.String()
}

func orNone(gtid string) string {
	if gtid == "" {
		return "(none)"
	}
	return gtid
}
