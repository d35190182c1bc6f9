package backup

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/migrations"
	"github.com/pinstore/pinstore/store/shardmap"
	"github.com/pinstore/pinstore/store/topology"
)

// TestBackupBench measures a backup, its verification and restores of
// PINSTORE_BENCH_BACKUP_SHARDS shard databases (every table of the
// migrations) holding PINSTORE_BENCH_BACKUP_PINS pins each (default 1000,
// rows written in SQL), on a private mariadbd with a binary log; then
// PINSTORE_BENCH_BACKUP_WRITES single-row edits (default 10,000) from 8
// connections, and a restore replaying them. It is skipped unless the
// variable is set:
//
//	PINSTORE_BENCH_BACKUP_SHARDS=256 go test -count=1 -run TestBackupBench -v -timeout 30m ./cluster/backup
func TestBackupBench(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PINSTORE_BENCH_BACKUP_SHARDS"))
	if n <= 0 {
		t.Skip("set PINSTORE_BENCH_BACKUP_SHARDS to run the backup benchmark")
	}
	perShard, writes := 1000, 10000
	if v, _ := strconv.Atoi(os.Getenv("PINSTORE_BENCH_BACKUP_PINS")); v > 0 {
		perShard = v
	}
	if v, _ := strconv.Atoi(os.Getenv("PINSTORE_BENCH_BACKUP_WRITES")); v > 0 {
		writes = v
	}
	ctx := context.Background()
	h := testenv.ReplicationHost(t, "bk-bench", 1, "--innodb-buffer-pool-size=512M")
	prefix := testenv.UniquePrefix(t, "bb")
	m, err := shardmap.SingleHost(h.DSN(), n, prefix)
	if err != nil {
		t.Fatal(err)
	}
	fm := &fixedMap{m: m}
	db, err := topology.Dial(h.DSN(), 16)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for s := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := migrations.Apply(ctx, db, m.DBName(s), ms); err != nil {
				errs <- err
				return
			}
			if _, err := db.ExecContext(ctx, testenv.SeedPinsSQL(m.DBName(s), perShard)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d shards migrated and %d pins each written in %v", n, perShard, time.Since(begin).Round(time.Millisecond))

	dir := t.TempDir()
	var out bytes.Buffer
	begin = time.Now()
	man, err := Backup(ctx, Options{Host: "default", To: filepath.Join(dir, "bk"), Map: fm, Admin: Credentials{User: "root"}, Progress: &out})
	if err != nil {
		t.Fatalf("backup: %v\n%s", err, out.String())
	}
	backupTook := time.Since(begin)
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "MB in ") || strings.Contains(l, "done in") {
			t.Log(l)
		}
	}
	begin = time.Now()
	if _, err := Verify(ctx, filepath.Join(dir, "bk"), dir, Tools{}, &out); err != nil {
		t.Fatalf("verify: %v\n%s", err, out.String())
	}
	verifyTook := time.Since(begin)

	begin = time.Now()
	var last string
	per := writes / 8
	for w := range 8 {
		wg.Go(func() {
			for i := range per {
				s := (w*per + i) % n
				if _, err := db.ExecContext(ctx, fmt.Sprintf("UPDATE %s.pins SET doc = JSON_SET(doc, '$.description', ?), version = version + 1 WHERE local_id = ?", m.DBName(s)), fmt.Sprintf("edit %d", i), 1+i%perShard); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := db.GetContext(ctx, &last, "SELECT @@gtid_binlog_pos"); err != nil {
		t.Fatal(err)
	}
	writesTook := time.Since(begin)
	bl := filepath.Join(dir, "binlogs")
	begin = time.Now()
	if err := CopyBinlogs(ctx, BinlogOptions{Host: "default", To: bl, Map: fm, Admin: Credentials{User: "root"}, Once: true}); err != nil {
		t.Fatal(err)
	}
	copyTook := time.Since(begin)

	begin = time.Now()
	if _, err := Restore(ctx, RestoreOptions{Backup: filepath.Join(dir, "bk"), DataDir: filepath.Join(dir, "r1"), Map: fm, Progress: &out}); err != nil {
		t.Fatalf("restore: %v\n%s", err, out.String())
	}
	restoreTook := time.Since(begin)
	os.RemoveAll(filepath.Join(dir, "r1"))
	begin = time.Now()
	rep, err := Restore(ctx, RestoreOptions{Backup: filepath.Join(dir, "bk"), DataDir: filepath.Join(dir, "r2"), Map: fm, Binlogs: bl, ToGTID: last, Progress: &out})
	if err != nil {
		t.Fatalf("restore to %s: %v\n%s", last, err, out.String())
	}
	pitrTook := time.Since(begin)
	t.Logf("%d shards × %d pins: backup %v (%d MB of data, %d KB of binary log), verify %v, restore %v; "+
		"%d edits in %v, their binary logs copied in %v (%d KB), restore replaying them (%d transactions) %v",
		n, perShard, backupTook.Round(100*time.Millisecond), man.DataBytes>>20, man.BinlogBytes>>10, verifyTook.Round(100*time.Millisecond),
		restoreTook.Round(100*time.Millisecond), writes, writesTook.Round(100*time.Millisecond), copyTook.Round(100*time.Millisecond),
		dirSize(bl)>>10, rep.Replayed, pitrTook.Round(100*time.Millisecond))
}
