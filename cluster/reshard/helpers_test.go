package reshard_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store"
	"github.com/pinstore/pinstore/store/shardmap"
)

// The tests move shards under a real store: the store puts load on the
// shards and reads them back; the move itself never goes through it.

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

var ctx = context.Background()

const testShards = 8

// fileMap is a test's shard map file: a private prefix, hosts h0, h1, …
// at dsns, and shards shards (testShards when 0).
type fileMap struct {
	path   string
	prefix string
	dsns   []string
	shards int
}

// newFileMap writes a map file with the given range lines (e.g.
// "{shards: 0-3, host: h0}") and registers the cleanup of its databases
// and Redis keys.
func newFileMap(t *testing.T, f fileMap, ranges ...string) fileMap {
	t.Helper()
	f.path = filepath.Join(t.TempDir(), "shards.yaml")
	for _, d := range f.dsns {
		t.Cleanup(func() { testenv.DropDatabases(t, d, f.prefix) })
	}
	t.Cleanup(func() { testenv.DropKeys(t, testenv.RedisAddr(t), f.prefix) })
	f.write(t, ranges...)
	return f
}

// write replaces the file as an editor would (new file, rename).
func (f fileMap) write(t *testing.T, ranges ...string) {
	t.Helper()
	n := f.shards
	if n == 0 {
		n = testShards
	}
	lines := []string{fmt.Sprintf("shards: %d", n), "db_prefix: " + f.prefix, "hosts:"}
	for i, d := range f.dsns {
		lines = append(lines, fmt.Sprintf("  h%d: {master: %q}", i, d))
	}
	lines = append(lines, "ranges:")
	for _, r := range ranges {
		lines = append(lines, "  - "+r)
	}
	tmp := f.path + ".edit"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		t.Fatal(err)
	}
}

// openFile opens a store from the map file, as serve does; migrate
// provisions the shards.
func openFile(t *testing.T, f fileMap, qt time.Duration, migrate bool) *store.Store {
	t.Helper()
	m, err := shardmap.Load(f.path, shardmap.DefaultShards, shardmap.DefaultDBPrefix)
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, store.Config{Map: m, MapFile: f.path, CursorSecret: []byte("test"), QueryTimeout: qt,
		Redis: store.RedisConfig{Addrs: []string{testenv.RedisAddr(t)}, Prefix: f.prefix + ":o:"}, ObjectCache: store.ObjectCacheConfig{Prefix: f.prefix + ":c:"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if migrate {
		if err := s.Migrate(ctx, store.MigrateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func mustUser(t *testing.T, s *store.Store, name string) uint64 {
	t.Helper()
	o, err := s.CreateUser(ctx, model.UserDoc{Username: name})
	for i := 2; model.IsCode(err, model.EUsernameTaken); i++ { // usernames are unique: name_2, name_3, …
		o, err = s.CreateUser(ctx, model.UserDoc{Username: fmt.Sprintf("%s_%d", name, i)})
	}
	if err != nil {
		t.Fatal(err)
	}
	return o.ID
}

func mustBoard(t *testing.T, s *store.Store, owner uint64) uint64 {
	t.Helper()
	o, err := s.Create(ctx, idcodec.TypeBoard, &model.BoardDoc{OwnerID: model.ID(owner), Name: "b"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return o.ID
}

func mustPin(t *testing.T, s *store.Store, board uint64) uint64 {
	t.Helper()
	o, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(board), Link: "https://example.com/x"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return o.ID
}

// seedUsers creates users until n of them are on shards 0-3.
func seedUsers(t *testing.T, s *store.Store, n int) []uint64 {
	t.Helper()
	var out []uint64
	for i := 0; len(out) < n; i++ {
		if i > 50*n {
			t.Fatal("users never land on shards 0-3")
		}
		u := mustUser(t, s, fmt.Sprintf("u%d", i))
		if idcodec.ShardOf(u) < 4 {
			out = append(out, u)
		}
	}
	return out
}

// listed is every entry of a list, following its cursors.
func listed(t *testing.T, s *store.Store, m model.Mapping, from uint64) []uint64 {
	t.Helper()
	var out []uint64
	p := model.Page{Limit: 100}
	for range 1000 {
		l, err := s.List(ctx, m, from, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range l.Entries {
			out = append(out, e.To)
		}
		if p.Cursor = l.NextCursor; p.Cursor == "" {
			return out
		}
	}
	t.Fatal("cursor loop")
	return nil
}

// readable counts the pins among ids that the store returns.
func readable(t *testing.T, s *store.Store, ids []uint64) int {
	t.Helper()
	n := 0
	for len(ids) > 0 {
		k := min(len(ids), store.MaxGetMany)
		got, err := s.GetMany(ctx, ids[:k], idcodec.TypePin)
		if err != nil {
			t.Fatal(err)
		}
		n += len(got)
		ids = ids[k:]
	}
	return n
}

// load is goroutines putting load on a store while a move runs.
type load struct {
	stop chan struct{}
	wg   sync.WaitGroup
}

func newLoad() *load { return &load{stop: make(chan struct{})} }

// run calls step over and over in a goroutine of its own, until halt or
// until step returns false.
func (l *load) run(step func() bool) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			select {
			case <-l.stop:
				return
			default:
			}
			if !step() {
				return
			}
		}
	}()
}

// halt stops every goroutine and waits until they have returned.
func (l *load) halt() {
	close(l.stop)
	l.wg.Wait()
}
