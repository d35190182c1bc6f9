package main

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/backup"
	"github.com/pinstore/pinstore/internal/testenv"
)

// TestBackupPITRBench measures a restore to a point PINSTORE_BENCH_PITR of
// writes after a backup: a host (a master of its own, no replica) of
// PINSTORE_BENCH_PITR_SHARDS shards (default 256) holding 1,000 pins each
// written in SQL, as TestBackupBench has them; `pinstore backup`; then
// pins created through the real server at PINSTORE_BENCH_PITR_RATE a
// second (default 50) by 8 writers for the duration; T, a whole second
// after the last create acknowledged; 5 s more of creates; `pinstore
// binlogs --once`; a restore to the backup alone and one to T. Every
// create acknowledged before T must be in the second, none sent after T.
//
//	PINSTORE_BENCH_PITR=10m go test -count=1 -run TestBackupPITRBench -v -timeout 60m ./cmd/pinstore
func TestBackupPITRBench(t *testing.T) {
	dur, _ := time.ParseDuration(os.Getenv("PINSTORE_BENCH_PITR"))
	if dur <= 0 {
		t.Skip("set PINSTORE_BENCH_PITR to the writes' duration to run the point-in-time restore benchmark")
	}
	shards, rate := 256, 50.0
	if v, _ := strconv.Atoi(os.Getenv("PINSTORE_BENCH_PITR_SHARDS")); v > 0 {
		shards = v
	}
	if v, _ := strconv.ParseFloat(os.Getenv("PINSTORE_BENCH_PITR_RATE"), 64); v > 0 {
		rate = v
	}
	const perShard, writers = 1000, 8
	begin := time.Now()
	f := startReplFleetShards(t, shards, false, map[string]string{"PINSTORE_RATE_LIMIT": "0"}, 0)
	seedPins(t, f.hosts[0].master.DSN(), f.prefix, shards, perShard)
	t.Logf("%d shards migrated and %d pins each written in %v", shards, perShard, time.Since(begin).Round(time.Second))
	s := startServerEnv(t, f.env)
	boards := make([]string, writers)
	for i := range boards {
		u := s.create("/v1/users", map[string]any{"username": fmt.Sprint("pitr", i)})
		boards[i] = s.create("/v1/boards", map[string]any{"owner_id": u.ID, "name": "b"}).ID
	}

	dir := t.TempDir()
	bk := filepath.Join(dir, "backup")
	begin = time.Now()
	mustRun(t, f.env, "backup", "--host", "a", "--to", bk)
	backupTook := time.Since(begin)
	man, err := backup.ReadManifest(bk)
	if err != nil {
		t.Fatal(err)
	}

	w := startPinWriters(t, s.base, boards, rate)
	time.Sleep(dur)
	var lastAck time.Time
	for _, pw := range w.snapshot() {
		if pw.acked.After(lastAck) {
			lastAck = pw.acked
		}
	}
	at := lastAck.Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(at) + 5*time.Second)
	writes := w.halt()
	bl := filepath.Join(dir, "binlogs")
	begin = time.Now()
	mustRun(t, f.env, "binlogs", "--host", "a", "--to", bl, "--once")
	copyTook := time.Since(begin)

	restore := func(name string, to time.Time) (backup.Report, time.Duration) {
		opt := backup.RestoreOptions{Backup: bk, DataDir: filepath.Join(dir, name), Keep: true}
		if !to.IsZero() {
			opt.Binlogs, opt.ToTime = bl, to
		}
		begin := time.Now()
		rep, err := backup.Restore(context.Background(), opt)
		if err != nil {
			t.Fatalf("restore %s: %v", name, err)
		}
		return rep, time.Since(begin)
	}
	rep0, restoreTook := restore("to-backup", time.Time{})
	base := restoredPins(t, rep0.Socket, f.prefix, 0, shards-1)
	if err := rep0.Stop(); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, "to-backup"))
	rep, pitrTook := restore("to-T", at)
	got := restoredPins(t, rep.Socket, f.prefix, 0, shards-1)
	present, absent := requireRestored(t, "restore to T", got, writes, at, at)
	if err := rep.Stop(); err != nil {
		t.Fatal(err)
	}
	if len(base) != shards*perShard || present == 0 || absent == 0 {
		t.Errorf("restore to the backup holds %d pins, want %d; to T %d present, %d absent checked", len(base), shards*perShard, present, absent)
	}
	t.Logf("%d shards × %d pins: backup %v (%d MB); %d creates in %v at %.0f/s (%d retried), %d before T; binary logs %d MB, copied in %v; "+
		"restore to the backup %v; to T (%d transactions replayed) %v",
		shards, perShard, backupTook.Round(100*time.Millisecond), man.DataBytes>>20, len(writes), dur, rate, w.retries, present,
		treeSize(bl)>>20, copyTook.Round(100*time.Millisecond), restoreTook.Round(100*time.Millisecond), rep.Replayed, pitrTook.Round(100*time.Millisecond))
}

// seedPins writes perShard pins in SQL into each of shards shard
// databases on the server at dsn, 8 at a time.
func seedPins(t *testing.T, dsn, prefix string, shards, perShard int) {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for s := range shards {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if _, err := db.Exec(testenv.SeedPinsSQL(fmt.Sprintf("%s%05d", prefix, s), perShard)); err != nil {
				t.Errorf("seed shard %d: %v", s, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// treeSize is the bytes of the files under dir.
func treeSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error { //nolint:errcheck // a size
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
