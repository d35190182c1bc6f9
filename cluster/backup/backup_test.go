package backup

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/store/shardmap"
	"github.com/pinstore/pinstore/store/topology"
)

// fixedMap is a map that stays as the test sets it.
type fixedMap struct {
	mu sync.Mutex
	m  *shardmap.Map
}

func (f *fixedMap) ReadMap(context.Context, int, string) (*shardmap.Map, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m, f.m.Version(), nil
}
func (f *fixedMap) String() string { return "the test's map" }

const testShards = 4

// probeHost is a master with a binary log holding testShards shard
// databases, each with a table probe(id, v).
func probeHost(t *testing.T, name string) (*testenv.Host, *fixedMap, *sqlx.DB) {
	t.Helper()
	h := testenv.ReplicationHost(t, name, 1)
	prefix := testenv.UniquePrefix(t, "bk")
	m, err := shardmap.SingleHost(h.DSN(), testShards, prefix)
	if err != nil {
		t.Fatal(err)
	}
	db, err := topology.Dial(h.DSN(), 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	for s := range testShards {
		for _, q := range []string{
			"CREATE DATABASE " + m.DBName(s),
			"CREATE TABLE " + m.DBName(s) + ".probe (id BIGINT PRIMARY KEY, v VARCHAR(64), n INT NULL) ENGINE=InnoDB",
		} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
	}
	return h, &fixedMap{m: m}, db
}

// insert writes row id into shard id % testShards and returns the
// server's GTID position after it.
func insert(t *testing.T, db *sqlx.DB, m *shardmap.Map, id int) string {
	t.Helper()
	if _, err := db.Exec(fmt.Sprintf("INSERT INTO %s.probe VALUES (?, ?, NULL)", m.DBName(id%testShards)), id, fmt.Sprintf("row %d", id)); err != nil {
		t.Fatal(err)
	}
	var pos string
	if err := db.Get(&pos, "SELECT @@gtid_binlog_pos"); err != nil {
		t.Fatal(err)
	}
	return pos
}

func probeIDs(t *testing.T, db *sqlx.DB, m *shardmap.Map) map[int]bool {
	t.Helper()
	ids := map[int]bool{}
	for s := range testShards {
		var got []int
		if err := db.Select(&got, "SELECT id FROM "+m.DBName(s)+".probe"); err != nil {
			t.Fatalf("shard %d: %v", s, err)
		}
		for _, id := range got {
			ids[id] = true
		}
	}
	return ids
}

// TestBackupRestoreToGTID backs up a master while it takes writes,
// verifies the backup, then restores it to a GTID recorded between later
// writes, after a shard database was dropped: every row written up to the
// GTID is back, none after it; and refuses bad input, changing nothing.
func TestBackupRestoreToGTID(t *testing.T) {
	ctx := context.Background()
	h, fm, db := probeHost(t, "bk-m")
	m := fm.m
	for id := range 50 {
		insert(t, db, m, id)
	}
	// Writes go on during the backup.
	var next atomic.Int64
	next.Store(1000)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			insert(t, db, m, int(next.Add(1)))
			time.Sleep(5 * time.Millisecond)
		}
	})
	dir := filepath.Join(t.TempDir(), "bk")
	var out bytes.Buffer
	man, err := Backup(ctx, Options{Host: "default", To: dir, Map: fm, Admin: Credentials{User: "root"}, Version: "test", Progress: &out})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("backup: %v\n%s", err, out.String())
	}
	t.Logf("backup:\n%s", out.String())
	if man.SourceRole != "master" || man.GTID == "" || man.Check.GTID == "" || len(man.Check.Databases) != testShards || man.Verified != nil {
		t.Fatalf("manifest: %+v", man)
	}
	if !strings.Contains(out.String(), "not yet verified") {
		t.Errorf("backup output does not say the backup is not yet verified:\n%s", out.String())
	}
	v, err := Verify(ctx, dir, "", Tools{}, &out)
	if err != nil || !v.OK {
		t.Fatalf("verify: %v %+v\n%s", err, v, out.String())
	}
	if rm, err := ReadManifest(dir); err != nil || rm.Verified == nil || !rm.Verified.OK {
		t.Fatalf("the manifest does not record the verification: %v %+v", err, rm)
	}

	if age := backupAge(t, filepath.Dir(dir), "pinstore_backup_last_good_age_seconds"); age < 0 || age > 600 {
		t.Errorf("the last good backup's age is %v s", age)
	}

	// A backup whose copy does not match its source's sums fails
	// verification, and the manifest says so.
	tampered := filepath.Join(t.TempDir(), "tampered")
	if err := copyTree(ctx, dir, tampered); err != nil {
		t.Fatal(err)
	}
	tm, _ := ReadManifest(tampered)
	tm.Check.Databases[m.DBName(2)]["probe"] = TableSum{Rows: 1, Sum: 7}
	if err := tm.write(tampered); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(ctx, tampered, "", Tools{}, &out); err == nil || !strings.Contains(err.Error(), "FAILED verification: table "+m.DBName(2)+".probe") {
		t.Fatalf("verify of a tampered backup: %v", err)
	}
	if rm, _ := ReadManifest(tampered); rm.Verified == nil || rm.Verified.OK || rm.Verified.Problem == "" {
		t.Fatalf("the manifest does not record the failed verification: %+v", rm.Verified)
	}

	// More writes, a point G, more writes, an accident.
	for id := 100; id < 120; id++ {
		insert(t, db, m, id)
	}
	g := insert(t, db, m, 120)
	for id := 121; id < 140; id++ {
		insert(t, db, m, id)
	}
	if _, err := db.Exec("DROP DATABASE " + m.DBName(1)); err != nil {
		t.Fatal(err)
	}
	bl := filepath.Join(t.TempDir(), "binlogs")
	if err := CopyBinlogs(ctx, BinlogOptions{Host: "default", To: bl, Map: fm, Admin: Credentials{User: "root"}, Once: true, Progress: &out}); err != nil {
		t.Fatalf("binlogs: %v\n%s", err, out.String())
	}

	// Bad input: refused, nothing written.
	target := filepath.Join(t.TempDir(), "restored")
	refuse := func(want string, opt RestoreOptions) {
		t.Helper()
		if opt.Backup == "" {
			opt.Backup = dir
		}
		if opt.DataDir == "" {
			opt.DataDir = target
		}
		_, err := Restore(ctx, opt)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("restore %+v: err %v, want %q", opt, err, want)
		}
		if _, err := os.Stat(target); !os.IsNotExist(err) {
			t.Fatalf("a refused restore created %s", target)
		}
	}
	refuse("does not reach 0-1-999999", RestoreOptions{Binlogs: bl, ToGTID: "0-1-999999"})
	refuse("before the backup's position", RestoreOptions{Binlogs: bl, ToGTID: "0-1-1"})
	refuse("is not a GTID", RestoreOptions{Binlogs: bl, ToGTID: "yesterday"})
	refuse("is after its last transaction", RestoreOptions{Binlogs: bl, ToTime: time.Now().Add(time.Hour)})
	refuse("needs the binary logs", RestoreOptions{ToGTID: g})
	other := *m
	other.DBPrefix = "zz"
	refuse("of another deployment", RestoreOptions{Map: &fixedMap{m: &other}})
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, ManifestFile), []byte(`{"format": 1, "host": `), 0o644)
	refuse("does not parse", RestoreOptions{Backup: bad})
	full := t.TempDir()
	os.WriteFile(filepath.Join(full, "x"), nil, 0o644)
	if _, err := Restore(ctx, RestoreOptions{Backup: dir, DataDir: full}); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Fatalf("restore into a non-empty directory: %v", err)
	}
	if _, err := Backup(ctx, Options{Host: "default", To: full, Map: fm, Admin: Credentials{User: "root"}}); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Fatalf("backup into a non-empty directory: %v", err)
	}

	// Restore to G.
	rep, err := Restore(ctx, RestoreOptions{Backup: dir, DataDir: target, Binlogs: bl, ToGTID: g, Map: fm, Keep: true, Progress: &out})
	if err != nil {
		t.Fatalf("restore: %v\n%s", err, out.String())
	}
	defer rep.Stop()
	rdb, err := topology.Dial("root@unix("+rep.Socket+")/", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	got := probeIDs(t, rdb, m)
	for id := range 121 {
		if id >= 50 && id < 100 {
			continue
		}
		if !got[id] {
			t.Errorf("row %d, written before %s, is not restored", id, g)
		}
	}
	for id := 121; id < 140; id++ {
		if got[id] {
			t.Errorf("row %d, written after %s, is restored", id, g)
		}
	}
	for id := 1001; id <= int(next.Load()); id++ {
		if !got[id] {
			t.Errorf("row %d, written during the backup, is not restored", id)
		}
	}
	if rep.GTID != g {
		t.Errorf("restored to %s, asked %s", rep.GTID, g)
	}
	var slavePos string
	if err := rdb.Get(&slavePos, "SELECT @@gtid_slave_pos"); err != nil || slavePos != g {
		t.Errorf("gtid_slave_pos %q (%v), want %s", slavePos, err, g)
	}
	_ = h
}

// backupAge is the gauge name's value for host "default" as
// NewCollector(dir) reports it.
func backupAge(t *testing.T, dir, name string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(dir))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			if f.GetName() == name && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == "default" {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no %s{host=\"default\"} for the backups in %s", name, dir)
	return 0
}

// changingMap returns maps[i] on its i-th read (the last one after).
type changingMap struct {
	mu    sync.Mutex
	maps  []*shardmap.Map
	reads int
}

func (c *changingMap) ReadMap(context.Context, int, string) (*shardmap.Map, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.maps[min(c.reads, len(c.maps)-1)]
	c.reads++
	return m, m.Version(), nil
}
func (c *changingMap) String() string { return "the test's changing map" }

// moved is m with shards first-last on a host "elsewhere".
func moved(t *testing.T, m *shardmap.Map, first, last int) *shardmap.Map {
	t.Helper()
	c := *m
	c.Hosts = map[string]shardmap.HostSpec{"default": m.Hosts["default"], "elsewhere": {Master: "root@tcp(127.0.0.1:1)/"}}
	var rs []shardmap.Range
	if first > 0 {
		rs = append(rs, shardmap.Range{Shards: fmt.Sprintf("0-%d", first-1), Host: "default", First: 0, Last: first - 1})
	}
	rs = append(rs, shardmap.Range{Shards: fmt.Sprintf("%d-%d", first, last), Host: "elsewhere", First: first, Last: last})
	if last < m.Shards-1 {
		rs = append(rs, shardmap.Range{Shards: fmt.Sprintf("%d-%d", last+1, m.Shards-1), Host: "default", First: last + 1, Last: m.Shards - 1})
	}
	c.Ranges = rs
	out, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	p, err := shardmap.Parse(out, m.Shards, m.DBPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBackupShardsAndMoves: a backup during which the host's ranges
// change is refused; a restore of a host whose ranges have moved since
// says which and restores only the shards named, never a moved one; one
// damaged shard is restored into the live master, the others untouched.
func TestBackupShardsAndMoves(t *testing.T) {
	ctx := context.Background()
	_, fm, db := probeHost(t, "bk-mv")
	m := fm.m
	for id := range 40 {
		insert(t, db, m, id)
	}
	var out bytes.Buffer
	cm := &changingMap{maps: []*shardmap.Map{m, moved(t, m, 2, 3)}}
	if _, err := Backup(ctx, Options{Host: "default", To: filepath.Join(t.TempDir(), "x"), Map: cm, Admin: Credentials{User: "root"}, Progress: &out}); err == nil || !strings.Contains(err.Error(), "the map changed while the backup ran") {
		t.Fatalf("backup across a move: %v\n%s", err, out.String())
	}
	dir := filepath.Join(t.TempDir(), "bk")
	if _, err := Backup(ctx, Options{Host: "default", To: dir, Map: fm, Admin: Credentials{User: "root"}, Progress: &out}); err != nil {
		t.Fatalf("backup: %v\n%s", err, out.String())
	}
	if age := backupAge(t, filepath.Dir(dir), "pinstore_backup_last_good_age_seconds"); !math.IsInf(age, 1) {
		t.Errorf("a host with no verified backup: last good backup's age %v, want +Inf", age)
	}
	if age := backupAge(t, filepath.Dir(dir), "pinstore_backup_last_age_seconds"); age < 0 || age > 600 {
		t.Errorf("the last backup's age is %v s", age)
	}

	// The damage: shard 1's rows deleted, shard 0 written since.
	g := insert(t, db, m, 100)
	if _, err := db.Exec("DELETE FROM " + m.DBName(1) + ".probe"); err != nil {
		t.Fatal(err)
	}
	insert(t, db, m, 104)
	bl := filepath.Join(t.TempDir(), "binlogs")
	if err := CopyBinlogs(ctx, BinlogOptions{Host: "default", To: bl, Map: fm, Admin: Credentials{User: "root"}, Once: true}); err != nil {
		t.Fatal(err)
	}

	// Shards 2-3 have moved since the backup.
	mv := &fixedMap{m: moved(t, m, 2, 3)}
	target := filepath.Join(t.TempDir(), "restored")
	if _, err := Restore(ctx, RestoreOptions{Backup: dir, DataDir: target, Map: mv}); err == nil || !strings.Contains(err.Error(), "2-3 now on host elsewhere") || !strings.Contains(err.Error(), "those still on host default: 0-1") {
		t.Fatalf("restore with moved ranges: %v", err)
	}
	if _, err := Restore(ctx, RestoreOptions{Backup: dir, DataDir: target, Map: mv, Only: []ShardSpan{{First: 1, Last: 2}}}); err == nil || !strings.Contains(err.Error(), "shard 2 has moved to host elsewhere") {
		t.Fatalf("restore of a moved shard: %v", err)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("a refused restore created %s", target)
	}

	// Shard 1 alone, to G (before the damage), into the live master.
	rep, err := Restore(ctx, RestoreOptions{Backup: dir, DataDir: target, Binlogs: bl, ToGTID: g, Map: mv, Only: []ShardSpan{{First: 1, Last: 1}}, Load: true, Admin: Credentials{User: "root"}, Progress: &out})
	if err != nil {
		t.Fatalf("restore shard 1: %v\n%s", err, out.String())
	}
	if len(rep.Loaded) != 1 || !strings.HasPrefix(rep.Loaded[0], m.DBName(1)+" → ") || len(rep.Dropped) != 3 {
		t.Fatalf("restore shard 1: %+v", rep)
	}
	got := probeIDs(t, db, m)
	for id := range 40 {
		if !got[id] {
			t.Errorf("row %d (shard %d) is missing after shard 1's restore", id, id%testShards)
		}
	}
	if !got[100] || !got[104] {
		t.Errorf("rows written on shard 0 after the backup are gone: %v %v", got[100], got[104])
	}
	var aside int
	if err := db.Get(&aside, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?", "restore_aside_"+m.DBName(1)+"%"); err != nil || aside != 1 {
		t.Errorf("the damaged shard's tables are not kept aside: %d %v", aside, err)
	}
}

// TestCopyBinlogsFollows: without Once, the copy follows the master as it
// writes: a transaction committed on the master reaches the copy, which a
// restore can scan, within seconds; stopping it is ctx's cancellation.
func TestCopyBinlogsFollows(t *testing.T) {
	_, fm, db := probeHost(t, "bk-bl")
	ctx, cancel := context.WithCancel(context.Background())
	dir := t.TempDir()
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() {
		done <- CopyBinlogs(ctx, BinlogOptions{Host: "default", To: dir, Map: fm, Admin: Credentials{User: "root"}, Progress: &out})
	}()
	tools, err := Tools{}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		want, _ := ParseGTID(insert(t, db, fm.m, i))
		deadline := time.Now().Add(20 * time.Second)
		for {
			sets, _ := binlogSets(dir)
			if len(sets) == 1 {
				if cv, err := sets[0].scan(ctx, tools.Binlog, GTIDPos{}, time.Time{}); err == nil && cv.last.Covers(want) {
					break
				}
			}
			if time.Now().After(deadline) {
				cancel()
				t.Fatalf("the copy did not reach %s in 20 s\n%s", want, out.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("CopyBinlogs after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CopyBinlogs did not return 10 s after its context was cancelled")
	}
}
