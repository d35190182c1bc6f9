package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/backup"
)

// TestBackupDuringFailoverE2E: a host of a master and a semi-synchronous
// replica (separate mariadbd processes), the real server, pins created
// through it by writers that record each create acknowledged, and
// `pinstore binlogs` following the host. A first backup; then a second,
// from the replica, and as soon as it is copying a planned `pinstore
// failover` promotes that replica. The second backup either refuses,
// naming the failover, with no manifest written; or it succeeded (the
// failover came after its end), verifies, and a restore of it holds every
// create acknowledged before it began, as one moment's copy. Then, with
// creates going on on the new master, a time T: the binary log copy has
// followed the new master and recorded it, and the first backup restored
// to T, across the failover, holds every create acknowledged before T,
// including those on the new master, and none sent after. The same with
// the master SIGKILLed and an unplanned failover instead.
func TestBackupDuringFailoverE2E(t *testing.T) {
	for _, killed := range []bool{false, true} {
		name := "planned"
		if killed {
			name = "master killed"
		}
		t.Run(name, func(t *testing.T) { backupDuringFailover(t, killed) })
	}
}

func backupDuringFailover(t *testing.T, killed bool) {
	f := startReplFleet(t, nil, 1)
	m, r := f.hosts[0].master, f.hosts[0].replicas[0]
	s := startServerEnv(t, f.env)
	boards := make([]string, 4)
	for i := range boards {
		u := s.create("/v1/users", map[string]any{"username": fmt.Sprint("bkfo", i)})
		boards[i] = s.create("/v1/boards", map[string]any{"owner_id": u.ID, "name": "b"}).ID
	}
	dir := t.TempDir()
	bl := filepath.Join(dir, "binlogs")
	getenv := func(k string) string { return f.env[k] }
	copyCtx, stopCopy := context.WithCancel(context.Background())
	var copyOut lockedBuffer
	var copyWG sync.WaitGroup
	copyWG.Go(func() {
		if err := run(copyCtx, []string{"binlogs", "--host", "a", "--to", bl}, getenv, &copyOut, &copyOut); err != nil {
			t.Errorf("binlogs: %v", err)
		}
	})
	defer func() { stopCopy(); copyWG.Wait() }()
	w := startPinWriters(t, s.base, boards, 100)
	defer w.halt()
	time.Sleep(2 * time.Second)

	b0 := filepath.Join(dir, "backup-0")
	if out := mustRun(t, f.env, "backup", "--host", "a", "--to", b0); !strings.Contains(out, "copying replica "+r.Addr()) {
		t.Fatalf("the first backup is not of the replica:\n%s", out)
	}

	// The second backup, and the failover as soon as it copies.
	b1 := filepath.Join(dir, "backup-1")
	var bkOut lockedBuffer
	var bkErr error
	var bkWG sync.WaitGroup
	b1Start := time.Now()
	bkWG.Go(func() {
		bkErr = run(context.Background(), []string{"backup", "--host", "a", "--to", b1}, getenv, &bkOut, &bkOut)
	})
	waitFor(t, 30*time.Second, "the backup to copy the replica", func() bool {
		return strings.Contains(strings.Join(bkOut.all(), ""), "copying replica "+r.Addr())
	})
	if killed {
		m.Kill(t)
	}
	if out, err := runCmd(t, f.env, "failover", "--host", "a", "--to", r.Addr()); err != nil || !strings.Contains(out, m.Addr()+" → "+r.Addr()) {
		t.Fatalf("failover: %v\n%s", err, out)
	}
	failedOver := time.Now()
	bkWG.Wait()
	out := strings.Join(bkOut.all(), "")
	if bkErr != nil {
		for _, want := range []string{"the map changed while the backup ran", "host a's master changed (a failover)", "nothing was recorded as a backup"} {
			if !strings.Contains(bkErr.Error(), want) {
				t.Errorf("the backup during the failover failed without saying %q: %v\n%s", want, bkErr, out)
			}
		}
		if _, err := os.Stat(filepath.Join(b1, backup.ManifestFile)); !os.IsNotExist(err) {
			t.Errorf("a refused backup left a manifest: %v", err)
		}
		t.Logf("the backup during the failover refused: %v", bkErr)
	} else {
		t.Logf("the backup ended before the failover changed the map:\n%s", out)
		if vout, err := runCmd(t, f.env, "backup", "verify", b1); err != nil || !strings.Contains(vout, "is good") {
			t.Fatalf("verify of the backup taken during the failover: %v\n%s", err, vout)
		}
		rep, err := backup.Restore(context.Background(), backup.RestoreOptions{Backup: b1, DataDir: filepath.Join(dir, "restored-1"), Keep: true})
		if err != nil {
			t.Fatalf("restore of the backup taken during the failover: %v", err)
		}
		got := restoredPins(t, rep.Socket, f.prefix, 0, e2eShards-1)
		rep.Stop() //nolint:errcheck // checked by the next restore's start
		if n, _ := requireRestored(t, "restore of the backup taken during the failover", got, w.snapshot(), b1Start, time.Time{}); n == 0 {
			t.Errorf("no create acknowledged before the backup began")
		}
	}

	// Creates on the new master; T; more; the copy catches up.
	waitFor(t, 10*time.Second, "the server to route by the new map", func() bool {
		return shardMapOf(t, s).Hosts[0].Addr == taddr(r)
	})
	time.Sleep(2 * time.Second)
	at := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(at) + 2*time.Second)
	writes := w.halt()
	pos := r.Query(t, "SELECT @@gtid_binlog_pos")
	waitFor(t, 30*time.Second, "the binary log copy to follow the new master", func() bool {
		b, _ := os.ReadFile(filepath.Join(bl, backup.MastersFile))
		return strings.Contains(string(b), r.Addr()) && strings.Contains(string(b), m.Addr())
	})
	time.Sleep(3 * time.Second) // the stream reaches pos
	stopCopy()
	copyWG.Wait()
	if log := strings.Join(copyOut.all(), ""); !strings.Contains(log, "the master changed (a failover): "+taddr(m)+" → "+taddr(r)) {
		t.Errorf("the binary log copy does not say it followed the failover:\n%s", log)
	}

	rep, err := backup.Restore(context.Background(), backup.RestoreOptions{Backup: b0, DataDir: filepath.Join(dir, "restored-0"), Binlogs: bl, ToTime: at, Keep: true})
	if err != nil {
		t.Fatalf("restore of the first backup to T across the failover (new master at %s): %v", pos, err)
	}
	got := restoredPins(t, rep.Socket, f.prefix, 0, e2eShards-1)
	if err := rep.Stop(); err != nil {
		t.Fatal(err)
	}
	present, absent := requireRestored(t, "restore to T", got, writes, at, at)
	onNew := 0
	for _, pw := range writes {
		if pw.acked.After(failedOver) && pw.acked.Before(at) && got[pw.id] {
			onNew++
		}
	}
	if present == 0 || absent == 0 || onNew == 0 {
		t.Errorf("restore to T: %d creates checked present (%d made on the new master), %d absent: the writes did not span the failover and T", present, onNew, absent)
	}
	t.Logf("restore to T: %d creates present (%d on the new master), %d after T absent; %d creates retried during the failover", present, onNew, absent, w.retries)
}
