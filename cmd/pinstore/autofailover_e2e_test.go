package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/etcdtopo"
	"github.com/pinstore/pinstore/cluster/failover"
	"github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/internal/testenv"
)

// TestAutoFailoverE2E: three servers with PINSTORE_FAILOVER=auto follow
// the map in etcd; one of them is elected. Sightings of the master down
// from a minority of the registered servers fail nothing over; from a
// majority they do. Then the master's mariadbd is SIGKILLed: the servers
// see it down, and once PINSTORE_FAILOVER_AFTER has passed the elected
// server promotes a replica, writes succeed again, and nothing
// acknowledged is missing. The dead master, started again writable,
// is fenced by the leader.
func TestAutoFailoverE2E(t *testing.T) {
	f := startReplFleet(t, nil, 2)
	h := f.hosts[0]
	etcd := f.toEtcd(t, map[string]string{"PINSTORE_FAILOVER": "auto", "PINSTORE_FAILOVER_AFTER": "2s"})
	env := f.env
	var servers []*server
	for range 3 {
		servers = append(servers, startServerEnv(t, env))
	}
	s := servers[0]
	user := s.create("/v1/users", map[string]any{"username": "auto"})
	board := s.create("/v1/boards", map[string]any{"owner_id": user.ID, "name": "b"})
	var pins []string
	for i := range 5 {
		pins = append(pins, servers[i%3].create("/v1/pins", map[string]any{"board_id": board.ID}).ID)
	}
	master := func() string { return shardMapOf(t, s).Hosts[0].Addr }

	// Fake servers that see the master down, under a lease of their own.
	fakes := fakeServers(t, etcd, f.prefix)
	fake := func(i int) {
		fakes.register(t, etcdtopo.Registration{ID: fmt.Sprintf("fake-%d", i), Down: map[string]etcdtopo.Sighting{"a": {Master: master(), Since: time.Now().Add(-time.Minute)}}})
	}
	// Two of five registered servers see it down: no failover.
	fake(1)
	fake(2)
	before := master()
	time.Sleep(3 * time.Second)
	if master() != before {
		t.Fatalf("a minority (2 of 5 servers) failed the master over: %s → %s", before, master())
	}
	// Four of seven: a majority. The master answers: a planned failover.
	fake(3)
	fake(4)
	waitFor(t, 20*time.Second, "the leader to fail over on a majority's sightings", func() bool { return master() != before })
	// The leader recorded it in etcd; every server shows it.
	var fo *fleet.FailoverStatus
	waitFor(t, 10*time.Second, "the failover's record done", func() bool {
		fo = lastFailover(t, servers[2])
		return fo != nil && fo.Phase == failover.PhaseDone
	})
	requireRecord(t, fo, failover.PhaseDone, strings.TrimSuffix(strings.TrimPrefix(before, "tcp("), ")"), strings.TrimSuffix(strings.TrimPrefix(master(), "tcp("), ")"),
		"lock", "read map", "probe old master", "probe replicas", "choose", "hold writes", "fence old master", "wait applied", "promote", "repoint", "map rewrite")
	if !strings.HasPrefix(fo.By, "automatic (server ") || fo.Lost == nil || *fo.Lost != 0 {
		t.Fatalf("the automatic failover's record: %+v", fo)
	}
	fakes.revoke(t)
	for _, sv := range servers {
		waitFor(t, 10*time.Second, "every server on the new map", func() bool { return shardMapOf(t, sv).Hosts[0].Addr == master() })
	}
	pins = append(pins, s.create("/v1/pins", map[string]any{"board_id": board.ID}).ID)

	// Now kill the (new) master: the real servers see it down.
	var dead *testenv.Host
	for _, c := range append([]*testenv.Host{h.master}, h.replicas...) {
		if taddr(c) == master() {
			dead = c
		}
	}
	if dead == nil {
		t.Fatalf("no test host is the master %s", master())
	}
	dead.Kill(t)
	killed := time.Now()
	var recovered time.Duration
	for i := 0; ; i++ {
		r := servers[i%3].req(http.MethodPost, "/v1/pins", map[string]any{"board_id": board.ID})
		if r.Status == http.StatusCreated {
			var o object
			r.decode(t, &o)
			pins = append(pins, o.ID)
			recovered = time.Since(killed)
			break
		}
		if time.Since(killed) > 60*time.Second {
			t.Fatalf("writes still fail a minute after the master died: %d %s", r.Status, r.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("writes succeeded again %v after the master's SIGKILL (PINSTORE_FAILOVER_AFTER=2s)", recovered.Round(time.Millisecond))
	if taddr(dead) == master() {
		t.Fatal("writes succeed, but the map still names the dead master")
	}
	for _, id := range pins {
		s.must(http.StatusOK, http.MethodGet, "/v1/pins/"+id, nil)
	}

	// The dead master comes back writable (a master's configuration): the
	// leader fences it.
	dead.SetArgs(testenv.SemiSyncMasterArgs)
	dead.Start(t)
	waitFor(t, 10*time.Second, "the leader to fence the former master", func() bool {
		return dead.Query(t, "SELECT @@read_only") == "1"
	})
	requireFenced(t, dead, f.prefix)
	if !strings.Contains(pullMap(t, env), "fenced:") {
		t.Fatal("the map does not list the former masters as fenced")
	}
}
