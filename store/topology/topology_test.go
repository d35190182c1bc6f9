package topology

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
	"github.com/pinstore/pinstore/store/shardsql"
)

// Pools open lazily, so no MySQL needs to answer for these tests.
const dsnA, dsnB = "root@tcp(127.0.0.1:1)/", "root@tcp(127.0.0.1:2)/"

func mapText(ranges ...string) string {
	return fmt.Sprintf("shards: 8\ndb_prefix: tp\nhosts:\n  a: {master: %q}\n  b: {master: %q}\nranges:\n  - %s\n", dsnA, dsnB, strings.Join(ranges, "\n  - "))
}

func parse(t *testing.T, ranges ...string) *shardmap.Map {
	t.Helper()
	m, err := shardmap.Parse([]byte(mapText(ranges...)), shardmap.DefaultShards, shardmap.DefaultDBPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestRoute(t *testing.T) {
	r, err := New(parse(t, "{shards: 0-3, host: a}", "{shards: 4-7, host: b, read_only: true}"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	top := r.Current()
	pin := idcodec.MustEncode(5, idcodec.TypePin, 9)
	sh, local, err := top.Route(pin, idcodec.TypePin)
	if err != nil || local != 9 || sh.N != 5 || sh.Name != "tp00005" || sh.Host.Name != "b" || !sh.ReadOnly {
		t.Fatalf("Route(pin on shard 5) = %+v, %d, %v", sh, local, err)
	}
	if !model.IsCode(sh.Writable("op"), model.EMoving) {
		t.Fatal("a read-only shard is writable")
	}
	for _, tt := range []struct {
		name string
		id   uint64
		want idcodec.Type
		code string
	}{
		{"shard outside the map", idcodec.MustEncode(8, idcodec.TypePin, 1), idcodec.TypePin, model.EInvalid},
		{"another type", pin, idcodec.TypeBoard, model.ENotFound},
		{"reserved bits", 1<<63 | pin, idcodec.TypePin, model.EInvalid},
	} {
		if _, _, err := top.Route(tt.id, tt.want); !model.IsCode(err, tt.code) {
			t.Errorf("%s: %v, want %s", tt.name, err, tt.code)
		}
	}
	// New users land only on open, writable shards.
	for range 100 {
		if sh := top.RandomOpen(); sh.N > 3 {
			t.Fatalf("a new user placed on read-only shard %d", sh.N)
		}
	}
	if got := top.ShardsOf(top.Hosts()[1]); fmt.Sprint(got) != "[4 5 6 7]" {
		t.Fatalf("shards of b: %v", got)
	}
}

// One pool per host, kept across map versions: a reload that moves ranges
// between hosts opens nothing new.
func TestReloadKeepsPools(t *testing.T) {
	r, err := New(parse(t, "{shards: 0-7, host: a}"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a0, _ := r.Current().Shard(0)
	if err := r.Reload(parse(t, "{shards: 0-3, host: b}", "{shards: 4-7, host: a}")); err != nil {
		t.Fatal(err)
	}
	s0, _ := r.Current().Shard(0)
	s7, _ := r.Current().Shard(7)
	if s0.Host.Name != "b" || s7.Host.DB != a0.Host.DB || s7.Host.Reads != a0.Host.Reads ||
		s7.Host.Edges == nil || s7.Host.Edges != a0.Host.Edges {
		t.Fatalf("after the reload: shard 0 on %s, shard 7's pool kept: %v", s0.Host.Name, s7.Host.DB == a0.Host.DB)
	}
	if len(r.pools) != 2 {
		t.Fatalf("%d pools for 2 hosts", len(r.pools))
	}
	other, _ := shardmap.SingleHost(dsnA, 16, "tp")
	if err := r.Reload(other); err == nil || !strings.Contains(err.Error(), "cannot change while running") {
		t.Fatalf("a reload changing the shard count: %v", err)
	}
}

func TestReloadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shards.yaml")
	write := func(ranges ...string) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", []byte(mapText(ranges...)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	write("{shards: 0-7, host: a}")
	m, err := shardmap.Load(path, shardmap.DefaultShards, shardmap.DefaultDBPrefix)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(m, Config{MapFile: path})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	write("{shards: 0-3, host: a}", "{shards: 4-7, host: a, open: false}")
	if err := r.ReloadFile(); err != nil {
		t.Fatal(err)
	}
	if rg, _ := r.Map().RangeOf(5); rg.IsOpen() {
		t.Fatalf("range %+v still open", rg)
	}
	os.Remove(path)
	if err := r.ReloadFile(); err == nil {
		t.Fatal("no error for a missing file")
	}
	if rg, _ := r.Map().RangeOf(5); rg.IsOpen() {
		t.Fatal("map changed")
	}

	plain, err := New(m, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if err := plain.ReloadFile(); err == nil || !strings.Contains(err.Error(), "PINSTORE_SHARD_MAP") {
		t.Fatalf("ReloadFile without a file = %v", err)
	}
}

// Watch puts an edited file in force, logs the new version, and keeps the
// map in force when the file goes bad.
func TestWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shards.yaml")
	if err := os.WriteFile(path, []byte(mapText("{shards: 0-7, host: a}")), 0o644); err != nil {
		t.Fatal(err)
	}
	m, _ := shardmap.Load(path, shardmap.DefaultShards, shardmap.DefaultDBPrefix)
	r, err := New(m, Config{MapFile: path})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var logs testenv.LogBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Watch(ctx, 10*time.Millisecond, slog.New(slog.NewTextHandler(&logs, nil)))
	}()
	defer func() { cancel(); <-done }()
	wait := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after 2s: %s\n%s", what, logs.String())
			}
		}
	}
	v0 := r.Map().Version()
	if err := os.WriteFile(path+".tmp", []byte(mapText("{shards: 0-3, host: a}", "{shards: 4-7, host: b}")), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Rename(path+".tmp", path)
	wait("the edited map is in force", func() bool { sh, _ := r.Current().Shard(6); return sh.Host.Name == "b" })
	v1 := r.Map().Version()
	wait("the reload is logged", func() bool {
		return strings.Contains(logs.String(), "shard map reloaded") && strings.Contains(logs.String(), v1)
	})
	if v1 == v0 {
		t.Fatal("the version did not change")
	}
	if err := os.WriteFile(path+".tmp", []byte("shards: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Rename(path+".tmp", path)
	wait("the bad map is logged", func() bool { return strings.Contains(logs.String(), "shard map rejected") })
	if r.Map().Version() != v1 {
		t.Fatal("a bad file changed the map in force")
	}
}

// Every pool, master or replica, carries a queue of reads by id and one of
// edge checks of its own, made with the pool: a read never coalesces
// with reads sent to another server.
func TestPoolsCarryTheirQueues(t *testing.T) {
	const dsnC = "root@tcp(127.0.0.1:3)/"
	text := fmt.Sprintf("shards: 8\ndb_prefix: tp\nhosts:\n  a: {master: %q}\n  b: {master: %q, replicas: [%q]}\nranges:\n  - {shards: 0-3, host: a}\n  - {shards: 4-7, host: b}\n", dsnA, dsnB, dsnC)
	m, err := shardmap.Parse([]byte(text), shardmap.DefaultShards, shardmap.DefaultDBPrefix)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(m, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a, _ := r.Current().Shard(0)
	b, _ := r.Current().Shard(7)
	if len(b.Host.Replicas) != 1 {
		t.Fatalf("b has %d replicas", len(b.Host.Replicas))
	}
	rep := b.Host.Replicas[0]
	for _, p := range []Pool{a.Host.Pool, b.Host.Pool, rep.Pool} {
		if p.DB == nil || p.Reads == nil || p.Edges == nil {
			t.Fatalf("a pool without its queues: %+v", p)
		}
	}
	if a.Host.Edges == b.Host.Edges || b.Host.Edges == rep.Edges || a.Host.Reads == b.Host.Reads || b.Host.Reads == rep.Reads {
		t.Fatal("two servers share a queue")
	}
	if r.pools[dsnC] != rep.Pool || len(r.pools) != 3 {
		t.Fatalf("%d pools for 3 servers, the replica's kept: %v", len(r.pools), r.pools[dsnC] == rep.Pool)
	}
}

// Each pool's round trips count as the host and role the map in force
// gives it: a replica's pool as its host's replica, then, once a map
// promotes it, as its master; the former master's pool, in no map now,
// counts nothing. (The hosts are closed ports: every round trip is a
// failed dial.)
func TestPoolsCountAsTheMapNamesThem(t *testing.T) {
	const dsnC = "root@tcp(127.0.0.1:3)/"
	load := func(master, replica string) *shardmap.Map {
		t.Helper()
		text := fmt.Sprintf("shards: 8\ndb_prefix: tp\nhosts:\n  a: {master: %q}\n  b: {master: %q, replicas: [%q]}\nranges:\n  - {shards: 0-3, host: a}\n  - {shards: 4-7, host: b}\n", dsnA, master, replica)
		m, err := shardmap.Parse([]byte(text), shardmap.DefaultShards, shardmap.DefaultDBPrefix)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	reg := prometheus.NewRegistry()
	r, err := New(load(dsnB, dsnC), Config{RoundTrips: shardsql.NewRoundTrips(reg)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	counts := func() map[string]uint64 {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]uint64{}
		for _, f := range fams {
			if f.GetName() != "pinstore_shard_query_seconds" {
				continue
			}
			for _, m := range f.GetMetric() {
				var k []string
				for _, l := range m.GetLabel() {
					k = append(k, l.GetValue())
				}
				out[strings.Join(k, " ")] = m.GetHistogram().GetSampleCount()
			}
		}
		return out
	}
	ping := func(dsn string) {
		t.Helper()
		if err := r.pools[dsn].DB.PingContext(context.Background()); err == nil {
			t.Fatalf("a ping of closed port %s succeeded", dsn)
		}
	}
	ping(dsnC)
	if c := counts(); c["b replica"] != 1 || c["b master"] != 0 || c["a master"] != 0 {
		t.Fatalf("a ping of b's replica: %v", c)
	}
	promoted := load(dsnC, "root@tcp(127.0.0.1:4)/")
	if err := r.Reload(promoted); err != nil {
		t.Fatal(err)
	}
	ping(dsnC)
	ping(dsnB)
	if c := counts(); c["b replica"] != 1 || c["b master"] != 1 {
		t.Fatalf("after b's replica was promoted, a ping of it and one of the former master: %v", c)
	}
}
