package main

import (
	"database/sql"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/pinstore/pinstore/cluster/failover"
	"github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/internal/testenv"
)

// TestFailoverE2E runs `pinstore failover` on a master and two replicas,
// separate mariadbd processes: promotions it must refuse (an errant
// transaction, a stopped SQL thread, a replica behind another), a planned
// failover with the master answering (fenced, nothing lost), the old
// master re-attached as a replica, then an unplanned one with the master
// SIGKILLed, and the dead master back, fenced, and re-attached.
func TestFailoverE2E(t *testing.T) {
	f := startReplFleet(t, nil, 2)
	h := f.hosts[0]
	m, r1, r2 := h.master, h.replicas[0], h.replicas[1]
	s := startServerEnv(t, f.env)
	user := s.create("/v1/users", map[string]any{"username": "fo"})
	board := s.create("/v1/boards", map[string]any{"owner_id": user.ID, "name": "before"})
	pins := []string{s.create("/v1/pins", map[string]any{"board_id": board.ID, "link": "https://example.com/0"}).ID}
	if fo := lastFailover(t, s); fo != nil {
		t.Fatalf("a failover recorded before any ran: %+v", fo)
	}
	failOver := func(args ...string) (string, error) {
		return runCmd(t, f.env, append([]string{"failover", "--host", "a"}, args...)...)
	}
	refused := func(want string, masterUp bool, args ...string) {
		t.Helper()
		before := readFile(t, f.mapFile)
		out, err := failOver(args...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("failover %q: err %v, want a refusal saying %q\n%s", args, err, want, out)
		}
		if readFile(t, f.mapFile) != before {
			t.Fatalf("a refused failover left the map changed:\n%s", readFile(t, f.mapFile))
		}
		if masterUp { // it still takes writes
			pins = append(pins, s.create("/v1/pins", map[string]any{"board_id": board.ID}).ID)
		}
	}

	// Refused: an errant transaction (written on r2 itself, in a domain of
	// its own so its replication goes on), a stopped SQL thread.
	r2.Exec(t, "SET SESSION gtid_domain_id = 9", "CREATE DATABASE "+f.prefix+"errant", "DROP DATABASE "+f.prefix+"errant")
	refused("refused to promote "+r2.Addr()+": it holds transactions its master does not have (errant): 9-3-2", true, "--to", r2.Addr())
	r2.Exec(t, "RESET MASTER")
	r1.Exec(t, "STOP SLAVE SQL_THREAD")
	refused("refused to promote "+r1.Addr()+": its replication SQL thread is stopped", true, "--to", r1.Addr())
	r1.Exec(t, "START SLAVE SQL_THREAD")
	refused(`zz is not a replica`, true, "--to", "zz")
	fo := requireRecord(t, lastFailover(t, s), failover.PhaseFailed, m.Addr(), "", "lock", "read map", "probe old master", "probe replicas", "choose")
	if !strings.Contains(fo.Error, "zz is not a replica") || !strings.Contains(fo.Steps[len(fo.Steps)-1].Error, "zz is not a replica") {
		t.Fatalf("the refused failover's record: error %q, last step %+v", fo.Error, fo.Steps[len(fo.Steps)-1])
	}

	// Planned: the master answers; it is fenced, r1 applies all it had.
	out, err := failOver("--to", r1.Addr())
	if err != nil {
		t.Fatalf("failover: %v\n%s", err, out)
	}
	for _, want := range []string{m.Addr() + " → " + r1.Addr(), "transactions lost: 0", "replicating from the new master: " + r2.Addr(), "the old master " + m.Addr() + " is fenced"} {
		if !strings.Contains(out, want) {
			t.Errorf("failover output lacks %q:\n%s", want, out)
		}
	}
	mapBody := readFile(t, f.mapFile)
	if !strings.Contains(mapBody, "master: "+r1.AppDSN()) || !strings.Contains(mapBody, "fenced:") {
		t.Fatalf("the map after the failover:\n%s", mapBody)
	}
	waitFor(t, 10*time.Second, "the server to route by the new map", func() bool {
		return shardMapOf(t, s).Hosts[0].Addr == taddr(r1)
	})
	pins = append(pins, s.create("/v1/pins", map[string]any{"board_id": board.ID}).ID)
	requireFenced(t, m, f.prefix)
	fo = requireRecord(t, lastFailover(t, s), failover.PhaseDone, m.Addr(), r1.Addr(),
		"lock", "read map", "probe old master", "probe replicas", "choose", "hold writes", "fence old master", "wait applied", "promote", "repoint", "map rewrite")
	if fo.Lost == nil || *fo.Lost != 0 || !fo.OldMasterAnswered || fo.PromotedAt == "" || fo.WritesHeldSeconds <= 0 || !slices.Equal(fo.Repointed, []string{r2.Addr()}) {
		t.Fatalf("the planned failover's record: %+v", fo)
	}

	// The old master comes back as a replica: it has nothing r1 lacks.
	out, err = runCmd(t, f.env, "replica", "add", "--host", "a", "--dsn", m.AppDSN())
	if err != nil || !strings.Contains(out, "caught up by GTID") {
		t.Fatalf("re-attaching the old master: %v\n%s", err, out)
	}
	if strings.Contains(readFile(t, f.mapFile), "fenced:") {
		t.Fatalf("the re-attached master is still listed as fenced:\n%s", readFile(t, f.mapFile))
	}

	// Unplanned: r2 stops receiving, a write reaches m alone, r1 dies.
	r2.Exec(t, "STOP SLAVE IO_THREAD")
	pins = append(pins, s.create("/v1/pins", map[string]any{"board_id": board.ID}).ID)
	r1.Kill(t)
	refused("refused to promote "+r2.Addr()+": it is behind", false, "--to", r2.Addr())
	out, err = failOver()
	if err != nil {
		t.Fatalf("failover of a dead master: %v\n%s", err, out)
	}
	for _, want := range []string{r1.Addr() + " → " + m.Addr(), "transactions lost: unknown", "replicating from the new master: " + r2.Addr()} {
		if !strings.Contains(out, want) {
			t.Errorf("failover output lacks %q:\n%s", want, out)
		}
	}
	waitFor(t, 10*time.Second, "the server to route by the new map", func() bool {
		return shardMapOf(t, s).Hosts[0].Addr == taddr(m)
	})
	fo = requireRecord(t, lastFailover(t, s), failover.PhaseDone, r1.Addr(), m.Addr(),
		"lock", "read map", "probe old master", "probe replicas", "freeze", "choose", "hold writes", "wait applied", "promote", "repoint", "map rewrite")
	if fo.Lost != nil || fo.OldMasterAnswered || fo.LostNote == "" {
		t.Fatalf("the unplanned failover's record: %+v", fo)
	}
	for _, id := range pins {
		s.must(http.StatusOK, http.MethodGet, "/v1/pins/"+id, nil)
	}
	pins = append(pins, s.create("/v1/pins", map[string]any{"board_id": board.ID}).ID)

	// The dead master restarts as a replica's configuration says
	// (read-only): fenced, then re-attached.
	r1.SetArgs(append(append([]string(nil), testenv.SemiSyncReplicaArgs...), "--read-only=ON", "--init-rpl-role=SLAVE"))
	r1.Start(t)
	requireFenced(t, r1, f.prefix)
	out, err = runCmd(t, f.env, "replica", "add", "--host", "a", "--dsn", r1.AppDSN())
	if err != nil {
		t.Fatalf("re-attaching the dead master: %v\n%s", err, out)
	}
	waitFor(t, 20*time.Second, "every replica replicating from the new master, caught up", func() bool {
		out, err := f.shards(t)
		return err == nil && strings.Count(out, "replicating, applied "+m.Query(t, "SELECT @@gtid_binlog_pos")+", 0 transactions behind") == 2
	})
	for _, id := range pins {
		s.must(http.StatusOK, http.MethodGet, "/v1/pins/"+id, nil)
	}
}

// lastFailover is the failover GET /v1/admin/fleet shows (nil: none).
func lastFailover(t *testing.T, s *server) *fleet.FailoverStatus {
	t.Helper()
	var st fleet.FleetStatus
	s.must(http.StatusOK, http.MethodGet, "/v1/admin/fleet", nil).decode(t, &st)
	if st.FailoverError != "" {
		t.Fatalf("the fleet route could not read the failover's record: %s", st.FailoverError)
	}
	return st.Failover
}

// requireRecord checks that fo records a failover of host a ended in
// phase, from old to new (host:port), with a duration and these steps in
// this order, each timed, and returns it.
func requireRecord(t *testing.T, fo *fleet.FailoverStatus, phase, old, new string, steps ...string) *fleet.FailoverStatus {
	t.Helper()
	if fo == nil {
		t.Fatal("no failover recorded")
	}
	var names []string
	for _, s := range fo.Steps {
		names = append(names, s.Name)
		if s.Seconds < 0 || s.Started.Before(fo.Started) {
			t.Fatalf("step %+v of a failover started at %v", s, fo.Started)
		}
	}
	if fo.Host != "a" || fo.Phase != phase || fo.OldMaster != old || fo.NewMaster != new || fo.Finished == nil ||
		fo.DurationSeconds <= 0 || !slices.Equal(names, steps) {
		t.Fatalf("failover record: %+v\nsteps %q, want phase %s, %s → %s, a duration, steps %q", fo, names, phase, old, new, steps)
	}
	return fo
}

// requireFenced checks that h, a former master, refuses a write of the
// servers' user (read_only) with MySQL error 1290.
func requireFenced(t *testing.T, h *testenv.Host, prefix string) {
	t.Helper()
	db, err := sql.Open("mysql", h.AppDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Exec("CREATE DATABASE " + prefix + "fence_probe")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1290 {
		t.Fatalf("a write on the fenced former master %s: %v, want error 1290 (read_only)", h.Addr(), err)
	}
}
