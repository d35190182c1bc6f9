package store

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

// fileMap is a test's shard map file: testShards shards of a private
// prefix, one range per line of ranges, over hosts h0, h1, … at dsns.
type fileMap struct {
	path   string
	prefix string
	dsns   []string
	shards int // 0: testShards
}

// text renders the map with the given range lines, e.g.
// "{shards: 0-3, host: h0}".
func (f fileMap) text(ranges ...string) string {
	var b strings.Builder
	n := f.shards
	if n == 0 {
		n = testShards
	}
	fmt.Fprintf(&b, "shards: %d\ndb_prefix: %s\nhosts:\n", n, f.prefix)
	for i, d := range f.dsns {
		fmt.Fprintf(&b, "  h%d: {master: %q}\n", i, d)
	}
	b.WriteString("ranges:\n")
	for _, r := range ranges {
		b.WriteString("  - " + r + "\n")
	}
	return b.String()
}

// write replaces the file as an editor would (new file, rename).
func (f fileMap) write(t *testing.T, ranges ...string) {
	t.Helper()
	writeRaw(t, f.path, f.text(ranges...))
}

func writeRaw(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".edit"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// newFileMap writes a map file over dsns with the given ranges and
// registers the cleanup of its databases.
func newFileMap(t *testing.T, dsns []string, ranges ...string) fileMap {
	t.Helper()
	f := fileMap{path: filepath.Join(t.TempDir(), "shards.yaml"), prefix: testenv.UniquePrefix(t, "mv"), dsns: dsns}
	for _, d := range dsns {
		t.Cleanup(func() { testenv.DropDatabases(t, d, f.prefix) })
	}
	t.Cleanup(func() { testenv.DropKeys(t, testenv.RedisAddr(t), f.prefix) })
	f.write(t, ranges...)
	return f
}

// openFile opens a store from the map file, as serve does; migrate
// provisions the shards.
func openFile(t *testing.T, f fileMap, qt time.Duration, migrate bool) *Store {
	t.Helper()
	m, err := shardmap.Load(f.path, shardmap.DefaultShards, shardmap.DefaultDBPrefix)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), Config{Map: m, MapFile: f.path, CursorSecret: []byte("test"), QueryTimeout: qt,
		Redis: RedisConfig{Addrs: []string{testenv.RedisAddr(t)}, Prefix: f.prefix + ":o:"}, ObjectCache: ObjectCacheConfig{Prefix: f.prefix + ":c:"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if migrate {
		if err := s.Migrate(context.Background(), MigrateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// eventually polls cond every 10ms until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWatchMapReloads(t *testing.T) {
	f := newFileMap(t, []string{testenv.MySQLDSN(t)}, "{shards: 0-3, host: h0}", "{shards: 4-7, host: h0}")
	s := openFile(t, f, 0, true)
	var logs testenv.LogBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Router().Watch(wctx, 20*time.Millisecond, logger)
	}()
	defer func() {
		cancel()
		<-done
	}()

	u := mustUser(t, s, "watcher")
	low := idcodec.ShardOf(u) < 4
	ro := []string{"{shards: 0-3, host: h0, read_only: true}", "{shards: 4-7, host: h0}"}
	if !low {
		ro = []string{"{shards: 0-3, host: h0}", "{shards: 4-7, host: h0, read_only: true}"}
	}
	v0 := s.Map().Version()
	canWrite := func() error {
		_, err := s.Create(ctx, idcodec.TypeBoard, &model.BoardDoc{OwnerID: model.ID(u), Name: "b"}, 0)
		return err
	}
	if err := canWrite(); err != nil {
		t.Fatal(err)
	}

	// Mark the user's range read-only: writes are refused with EMoving,
	// reads go on.
	f.write(t, ro...)
	eventually(t, 2*time.Second, "the read-only map is not in force", func() bool { return model.IsCode(canWrite(), model.EMoving) })
	if _, err := s.Get(ctx, u, idcodec.TypeUser); err != nil {
		t.Fatalf("read during read-only: %v", err)
	}
	v1 := s.Map().Version()
	if v1 == v0 || len(v1) != 12 {
		t.Fatalf("versions %q → %q", v0, v1)
	}
	if !strings.Contains(logs.String(), "shard map reloaded") || !strings.Contains(logs.String(), v1) || !strings.Contains(logs.String(), "(ro)") {
		t.Fatalf("log lacks the reload:\n%s", logs.String())
	}

	// Garbage, a map that changes the shard count, and a map with no
	// open range are each rejected and logged; the map stays.
	for _, bad := range []struct{ name, body, why string }{
		{"garbage", "shards: [this is not\n", "yaml"},
		{"shard count", strings.Replace(f.text(ro...), fmt.Sprintf("shards: %d\n", testShards), "shards: 16\n", 1), "gap"},
		{"nothing open", f.text("{shards: 0-3, host: h0, open: false}", "{shards: 4-7, host: h0, open: false}"), "no range is open"},
	} {
		writeRaw(t, f.path, bad.body)
		eventually(t, 2*time.Second, bad.name+": no error logged", func() bool {
			return strings.Count(logs.String(), "level=ERROR") > 0 && strings.Contains(logs.String(), bad.why)
		})
		if s.Map().Version() != v1 {
			t.Fatalf("%s: the map changed to %s", bad.name, s.Map().Version())
		}
		if err := s.Router().ReloadFile(); err == nil || !strings.Contains(err.Error(), bad.why) {
			t.Fatalf("%s: ReloadFile = %v", bad.name, err)
		}
		if !model.IsCode(canWrite(), model.EMoving) {
			t.Fatalf("%s: the read-only range became writable", bad.name)
		}
	}
	if n := strings.Count(logs.String(), "shard map rejected"); n != 3 {
		t.Fatalf("%d rejections logged, want one per bad content:\n%s", n, logs.String())
	}

	// Back to writable.
	f.write(t, "{shards: 0-3, host: h0}", "{shards: 4-7, host: h0}")
	eventually(t, 2*time.Second, "the writable map is not in force", func() bool { return canWrite() == nil })
	if s.Map().Version() != v0 {
		t.Fatalf("version %s, want the first map's %s", s.Map().Version(), v0)
	}
}
