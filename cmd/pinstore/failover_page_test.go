package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/etcdtopo"
	"github.com/pinstore/pinstore/cluster/failover"
)

// TestFleetPageShowsFailover: with the map in etcd, `pinstore failover`
// runs while one registered server never reports the new map (as a
// server cut off from etcd leaves its registration until its lease
// ends), so the failover waits --confirm-timeout at each of its two map
// changes. Meanwhile the fleet page, in headless Chromium, shows it in
// progress at its top, and /v1/admin/fleet records it running; once it
// ends both show it done, from the old master to the new, with its
// duration, its steps and the transactions lost.
func TestFleetPageShowsFailover(t *testing.T) {
	bin := chromium(t)
	f := startReplFleet(t, nil, 1)
	m, r := f.hosts[0].master, f.hosts[0].replicas[0]
	etcd := f.toEtcd(t, nil)
	s := startServerEnv(t, f.env)
	b := openFleetPage(t, bin, s.base)
	b.signIn(e2eAdminToken)
	b.waitText("no failover yet", "#failover", func(x string) bool { return strings.Contains(x, "no failover recorded") })

	fakeServers(t, etcd, f.prefix).register(t, etcdtopo.Registration{ID: "cut-off", Addr: "127.0.0.1:9", Version: "old", Drained: "old"})

	const confirm = 3 * time.Second
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := runCmd(t, f.env, "failover", "--host", "a", "--confirm-timeout", confirm.String())
		done <- result{out, err}
	}()
	banner := b.waitText("the failover in progress at the top", "#failover-running", func(x string) bool {
		return strings.Contains(x, "Failover in progress: host a, master "+m.Addr())
	})
	if fo := lastFailover(t, s); fo == nil || fo.Phase != failover.PhaseRunning || fo.OldMaster != m.Addr() || fo.Finished != nil || fo.By != "pinstore failover" {
		t.Fatalf("the record while the failover runs: %+v (page: %q)", fo, banner)
	}
	b.shot("failover-running")
	res := <-done
	if res.err != nil || !strings.Contains(res.out, "not every server confirmed") {
		t.Fatalf("failover: %v\n%s", res.err, res.out)
	}

	fo := requireRecord(t, lastFailover(t, s), failover.PhaseDone, m.Addr(), r.Addr(),
		"lock", "read map", "probe old master", "probe replicas", "choose", "hold writes", "fence old master", "wait applied", "promote", "repoint", "map rewrite")
	if fo.DurationSeconds < 2*confirm.Seconds() || fo.Steps[5].Seconds < confirm.Seconds() || fo.Lost == nil || *fo.Lost != 0 {
		t.Fatalf("the record: %+v, want it to take over %v (two unconfirmed map changes), nothing lost", fo, 2*confirm)
	}
	row := b.waitText("the failover done", "#failover", func(x string) bool {
		return rowHas(x, "a", m.Addr()+" → "+r.Addr(), "done")
	})
	if !regexp.MustCompile(`\t\d+\.\ds\t`).MatchString(row) || !rowHas(row, "done", "\t0\t") || !regexp.MustCompile(`hold writes \d+\.\ds`).MatchString(row) {
		t.Fatalf("the failover on the page (want its duration, 0 lost, the steps):\n%s", row)
	}
	if got := b.text("#failover-running"); got != "" {
		t.Fatalf("the page still shows a failover in progress: %q", got)
	}
	b.shot("failover-done")
}
