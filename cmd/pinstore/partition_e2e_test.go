package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/store/replicas"
)

// TestMasterCutFromItsReplicasCommitsNothing: a master whose replicas all
// stop receiving (a partition between them, made here by stopping their
// I/O threads) never falls back to asynchronous commits, however long it
// lasts: writes through a server that still reaches it are not
// acknowledged and leave nothing a reader can see; once a replica
// receives again they go on. Then, with the master dead and a replica
// silent too, a failover is refused: the silent replica could hold
// acknowledged writes the other lacks. With it back, the failover goes on
// and loses nothing acknowledged.
func TestMasterCutFromItsReplicasCommitsNothing(t *testing.T) {
	f := startReplFleet(t, nil, 2)
	h := f.hosts[0]
	m, r1, r2 := h.master, h.replicas[0], h.replicas[1]
	s := startServerEnv(t, f.env)
	user := s.create("/v1/users", map[string]any{"username": "cut"})
	board := s.create("/v1/boards", map[string]any{"owner_id": user.ID, "name": "before"})
	acked := []string{s.create("/v1/pins", map[string]any{"board_id": board.ID, "link": "https://example.com/0"}).ID}

	pinsOnMaster := func() string {
		return m.Query(t, "SELECT (SELECT COUNT(*) FROM "+f.prefix+"00000.pins)+(SELECT COUNT(*) FROM "+f.prefix+"00001.pins)+(SELECT COUNT(*) FROM "+f.prefix+"00002.pins)+(SELECT COUNT(*) FROM "+f.prefix+"00003.pins)")
	}
	before := pinsOnMaster()

	// Cut: no replica receives. Past the old 10 s fallback, still no
	// write is acknowledged, and none is visible on the master.
	r1.Exec(t, "STOP SLAVE IO_THREAD")
	r2.Exec(t, "STOP SLAVE IO_THREAD")
	cut := time.Now()
	for time.Since(cut) < 12*time.Second {
		r := s.req(http.MethodPost, "/v1/pins", map[string]any{"board_id": board.ID, "link": "https://example.com/cut"})
		if r.Status/100 == 2 {
			t.Fatalf("a pin was acknowledged %v after the master lost its replicas: %d %s", time.Since(cut), r.Status, truncate(r.Body))
		}
		if r.Status != http.StatusServiceUnavailable {
			t.Fatalf("a write to a master with no replica: %d %s, want 503", r.Status, truncate(r.Body))
		}
	}
	if got := pinsOnMaster(); got != before {
		t.Fatalf("pins visible on the master while it had no replica: %s, before %s", got, before)
	}
	if st := m.Query(t, "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'RPL_SEMI_SYNC_MASTER_STATUS'"); st != "ON" {
		t.Fatalf("the master fell back to asynchronous replication: Rpl_semi_sync_master_status %s", st)
	}

	// Healed: writes go on.
	r1.Exec(t, "START SLAVE IO_THREAD")
	r2.Exec(t, "START SLAVE IO_THREAD")
	waitFor(t, 15*time.Second, "writes to be acknowledged again", func() bool {
		r := s.req(http.MethodPost, "/v1/pins", map[string]any{"board_id": board.ID, "link": "https://example.com/healed"})
		if r.Status == http.StatusCreated {
			var o object
			r.decode(t, &o)
			acked = append(acked, o.ID)
			return true
		}
		return false
	})

	// The master dies, and r2 goes silent: refused, the map unchanged.
	m.Kill(t)
	r2.Stop(t)
	before = readFile(t, f.mapFile)
	out, err := runCmd(t, f.env, "failover", "--host", "a")
	if err == nil || !strings.Contains(err.Error(), "neither do replicas "+r2.Addr()) {
		t.Fatalf("failover with the master dead and a replica silent: err %v\n%s", err, out)
	}
	if readFile(t, f.mapFile) != before {
		t.Fatalf("a refused failover changed the map:\n%s", readFile(t, f.mapFile))
	}
	db, err := sqlx.Open("mysql", r1.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if st, err := replicas.Probe(t.Context(), db); err != nil || st.Replica == nil || st.Replica.IORunning == "No" {
		t.Fatalf("a refused failover left r1's I/O thread stopped: %+v %v", st.Replica, err)
	}

	// r2 back: the failover goes on; every acknowledged pin is there.
	r2.Start(t)
	out, err = runCmd(t, f.env, "failover", "--host", "a")
	if err != nil {
		t.Fatalf("failover: %v\n%s", err, out)
	}
	waitFor(t, 10*time.Second, "the server to route by the new map", func() bool {
		return shardMapOf(t, s).Hosts[0].Addr != taddr(m)
	})
	for _, id := range acked {
		s.must(http.StatusOK, http.MethodGet, "/v1/pins/"+id, nil)
	}
	s.create("/v1/pins", map[string]any{"board_id": board.ID, "link": "https://example.com/after"})
}
