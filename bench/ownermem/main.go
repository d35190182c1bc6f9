// Command ownermem measures what the pin → owner cache (store/ownercache)
// costs in Redis memory and how fast its batch calls are, and what the
// object cache (store/objcache) costs per cached pin.
//
// It loads N realistic pairs (pins on random shards among -shards, with
// per-shard auto-increment local ids starting at 1; owners random users on
// random shards with local ids up to 10M) into the bucketed layout, reads
// used_memory from INFO memory before and after, and reports bytes per
// pair. It then times a 1,000-pin Get (all hits) and a 1,000-pin Lookup (all
// misses, load answered from a map, fill included), the median of -runs
// runs. It repeats the memory measurement, after FLUSHALL, for the original
// Instagram layout (decimal bucket key, decimal values), for plain
// `SET <prefix>pin:<id> <owner>` string keys, and for full buckets at
// hash-max-listpack-entries 1024 and 512. It prints Markdown tables.
//
// used_memory is server-wide and the command runs FLUSHALL between layouts,
// so it must own its Redis. By default (-spawn) it starts a private
// redis-server on a free loopback port (no persistence,
// hash-max-listpack-entries 1024) and kills it at the end. With -spawn=false
// it uses -addr, which should be a scratch redis-server: it refuses to run
// when that server holds any key, unless -flush is given, in which case it
// deletes everything on it (FLUSHALL) before and after.
//
// Usage:
//
//	go run ./bench/ownermem                     # private redis-server, 1M pairs
//	go run ./bench/ownermem -n 100000 -runs 20
//	go run ./bench/ownermem -spawn=false -addr 127.0.0.1:6390 -flush
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/objcache"
	"github.com/pinstore/pinstore/store/ownercache"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "ownermem:", err)
		os.Exit(1)
	}
}

type config struct {
	addr, redisServer, prefix string
	spawn, flush              bool
	n, shards, runs, batch    int
	seed                      uint64
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("ownermem", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:6379", "Redis to measure when -spawn=false; must be a scratch server")
	fs.BoolVar(&c.spawn, "spawn", true, "start a private redis-server on a free loopback port and kill it at the end")
	fs.StringVar(&c.redisServer, "redis-server", "redis-server", "redis-server binary for -spawn")
	fs.BoolVar(&c.flush, "flush", false, "with -spawn=false: FLUSHALL the server at -addr even if it holds keys")
	fs.IntVar(&c.n, "n", 1_000_000, "pairs to load")
	fs.IntVar(&c.shards, "shards", 4096, "shards the pins are spread over")
	fs.IntVar(&c.runs, "runs", 50, "timed runs per batch operation (the median is reported)")
	fs.IntVar(&c.batch, "batch", 1000, "pins per timed batch")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed")
	fs.StringVar(&c.prefix, "prefix", ownercache.DefaultPrefix, "key prefix")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.n <= 0 || c.batch <= 0 || c.runs <= 0:
		return c, errors.New("-n, -batch and -runs must be positive")
	case c.shards <= 0 || c.shards > idcodec.MaxShard+1:
		return c, fmt.Errorf("-shards must be in 1..%d", idcodec.MaxShard+1)
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}

	addr := cfg.addr
	if cfg.spawn {
		srv, err := spawnRedis(ctx, cfg.redisServer)
		if err != nil {
			return err
		}
		defer srv.stop()
		addr = srv.addr
	}
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer client.Close()
	if err := prepare(ctx, client, addr, cfg); err != nil {
		return err
	}
	if !cfg.spawn {
		defer client.FlushAllAsync(context.Background())
	}

	info, _ := client.Info(ctx, "server").Result()
	fmt.Fprintf(stdout, "Redis %s at %s (%s), %d pairs over %d shards, seed %d\n\n",
		infoField(info, "redis_version"), addr, map[bool]string{true: "spawned", false: "given"}[cfg.spawn], cfg.n, cfg.shards, cfg.seed)
	if warn, err := ownercache.CheckConfig(ctx, client, 0); err != nil {
		return err
	} else if warn != "" {
		fmt.Fprintf(stdout, "WARNING: %s\n\n", warn)
	}

	pins, owners, next := realistic(cfg)
	reg := prometheus.NewRegistry()
	cache := ownercache.New(client, ownercache.Options{Prefix: cfg.prefix, Timeout: 5 * time.Second, Registerer: reg})

	var rows []memRow
	// 1. The ownercache layout.
	row, err := measure(ctx, client, "bucketed hash, compact keys and values (ownercache)", cfg.n, func() error {
		return loadCache(ctx, cache, pins, owners)
	})
	if err != nil {
		return err
	}
	rows = append(rows, row)

	// Timings, on the loaded ownercache layout.
	timing, err := timeBatches(ctx, cache, cfg, pins, owners, next)
	if err != nil {
		return err
	}

	// 2. The original Instagram layout: decimal everything.
	row, err = measure(ctx, client, "bucketed hash, decimal key and value (Instagram post)", cfg.n, func() error {
		return loadDecimalHash(ctx, client, cfg.prefix, pins, owners)
	})
	if err != nil {
		return err
	}
	rows = append(rows, row)

	// 3. One string key per pin.
	row, err = measure(ctx, client, "plain `SET <prefix>pin:<id> <owner>`", cfg.n, func() error {
		return loadPlain(ctx, client, cfg.prefix, pins, owners)
	})
	if err != nil {
		return err
	}
	rows = append(rows, row)

	// 4. Full buckets (consecutive pins of one shard), as a shard that has
	// been written for a while looks, at 1024 and at 512 entries.
	fullPins := make([]uint64, cfg.n)
	for i := range fullPins {
		fullPins[i] = idcodec.MustEncode(1, idcodec.TypePin, uint64(i)+1)
	}
	orig, err := client.ConfigGet(ctx, "hash-max-listpack-entries").Result()
	if err != nil {
		return err
	}
	for _, entries := range []string{"1024", "512"} {
		if err := client.ConfigSet(ctx, "hash-max-listpack-entries", entries).Err(); err != nil {
			return err
		}
		row, err = measure(ctx, client, "ownercache, full buckets, hash-max-listpack-entries "+entries, cfg.n, func() error {
			return loadCache(ctx, cache, fullPins, owners)
		})
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	if err := client.ConfigSet(ctx, "hash-max-listpack-entries", orig["hash-max-listpack-entries"]).Err(); err != nil {
		return err
	}

	// 5. The object cache (store/objcache): one key per pin holding its
	// document, version, timestamps and counts.
	nObjects := min(cfg.n, 100000)
	docBytes := 0
	objRow, err := measure(ctx, client, "object cache entry (store/objcache): a realistic pin", nObjects, func() error {
		var err error
		docBytes, err = loadObjects(ctx, client, pins[:nObjects], owners[:nObjects])
		return err
	})
	if err != nil {
		return err
	}
	if err := client.FlushAllAsync(ctx).Err(); err != nil {
		return err
	}

	fmt.Fprintln(stdout, "| layout | keys | used_memory Δ | bytes/pair |")
	fmt.Fprintln(stdout, "| --- | ---: | ---: | ---: |")
	for _, r := range rows {
		fmt.Fprintf(stdout, "| %s | %d | %d | %.2f |\n", r.name, r.keys, r.bytes, float64(r.bytes)/float64(cfg.n))
	}
	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "Object cache: %d pins, %d entries, used_memory Δ %d: %.1f bytes per cached pin, of which %d are its JSON document\n\n",
		nObjects, objRow.keys, objRow.bytes, float64(objRow.bytes)/float64(nObjects), docBytes)
	fmt.Fprintf(stdout, "| operation (%d pins, %d runs) | median | p90 | min |\n", cfg.batch, cfg.runs)
	fmt.Fprintln(stdout, "| --- | ---: | ---: | ---: |")
	for _, t := range timing {
		fmt.Fprintf(stdout, "| %s | %s | %s | %s |\n", t.name, t.median, t.p90, t.min)
	}
	if n := counterSum(reg, "pinstore_owner_cache_errors_total"); n > 0 {
		fmt.Fprintf(stdout, "\nWARNING: %v Redis calls failed during the timed runs; Lookup answered them from load\n", n)
	}
	return nil
}

// loadObjects caches one realistic pin per pair through the object cache
// (a miss's lease, then its fill) and returns the size of one pin's JSON
// document.
func loadObjects(ctx context.Context, client *redis.Client, pins, owners []uint64) (int, error) {
	c := objcache.New(client, objcache.Options{Timeout: 5 * time.Second, Registerer: prometheus.NewRegistry()})
	at := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	docLen := 0
	for start := 0; start < len(pins); start += 1000 {
		end := min(start+1000, len(pins))
		objs := make([]model.Object, 0, end-start)
		for i := start; i < end; i++ {
			board := idcodec.MustEncode(idcodec.ShardOf(pins[i]), idcodec.TypeBoard, uint64(i%5000)+1)
			doc := fmt.Sprintf(`{"board_id":"%d","owner_id":"%d","link":"https://example.com/recipes/%d","description":"Slow-cooked tomato sauce with basil, the one from the market","image_url":"https://img.example.com/p/%d.jpg","active":true}`,
				board, owners[i], i, pins[i])
			docLen = len(doc)
			objs = append(objs, model.Object{ID: pins[i], Type: idcodec.TypePin, Version: 1, CreatedAt: at, UpdatedAt: at, Doc: []byte(doc), Counts: []int64{int64(i % 40), int64(i % 7)}})
		}
		_, leases, err := c.Get(ctx, pins[start:end])
		if err != nil {
			return 0, err
		}
		c.Fill(ctx, objs, leases)
	}
	return docLen, nil
}

// prepare refuses a server that holds keys unless -flush was given, and
// flushes it when it was.
func prepare(ctx context.Context, client *redis.Client, addr string, cfg config) error {
	if err := client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis at %s: %w", addr, err)
	}
	keys, err := totalKeys(ctx, client)
	if err != nil {
		return err
	}
	if keys > 0 && !cfg.flush {
		return fmt.Errorf("redis at %s holds %d keys: used_memory would count them and the benchmark runs FLUSHALL; "+
			"run with -spawn (the default), point -addr at a scratch redis-server, or pass -flush to delete everything on it", addr, keys)
	}
	return client.FlushAll(ctx).Err()
}

// totalKeys sums the keys of every database from INFO keyspace.
func totalKeys(ctx context.Context, client *redis.Client) (int64, error) {
	info, err := client.Info(ctx, "keyspace").Result()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "db") {
			continue
		}
		for _, kv := range strings.Split(strings.TrimSpace(line[strings.IndexByte(line, ':')+1:]), ",") {
			if v, ok := strings.CutPrefix(kv, "keys="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				total += n
			}
		}
	}
	return total, nil
}

// realistic returns cfg.n pins spread over cfg.shards shards with per-shard
// auto-increment locals from 1, an owner for each, and the next free local
// of every shard (for pins that are not loaded).
func realistic(cfg config) (pins, owners []uint64, next []uint64) {
	r := rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x9e3779b97f4a7c15))
	next = make([]uint64, cfg.shards)
	pins = make([]uint64, cfg.n)
	owners = make([]uint64, cfg.n)
	for i := range pins {
		s := r.IntN(cfg.shards)
		next[s]++
		pins[i] = idcodec.MustEncode(uint32(s), idcodec.TypePin, next[s])
		owners[i] = idcodec.MustEncode(uint32(r.IntN(4096)), idcodec.TypeUser, 1+r.Uint64N(10_000_000))
	}
	return pins, owners, next
}

type memRow struct {
	name  string
	keys  int64
	bytes int64
}

// measure runs FLUSHALL, reads used_memory, runs load, and reads it again.
func measure(ctx context.Context, client *redis.Client, name string, n int, load func() error) (memRow, error) {
	if err := client.FlushAll(ctx).Err(); err != nil {
		return memRow{}, err
	}
	before, err := usedMemory(ctx, client)
	if err != nil {
		return memRow{}, err
	}
	if err := load(); err != nil {
		return memRow{}, fmt.Errorf("%s: %w", name, err)
	}
	after, err := usedMemory(ctx, client)
	if err != nil {
		return memRow{}, err
	}
	keys, err := client.DBSize(ctx).Result()
	if err != nil {
		return memRow{}, err
	}
	return memRow{name: name, keys: keys, bytes: after - before}, nil
}

func usedMemory(ctx context.Context, client *redis.Client) (int64, error) {
	info, err := client.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("INFO memory: used_memory: %w", err)
	}
	return v, nil
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

const loadChunk = 10_000

func loadCache(ctx context.Context, cache *ownercache.Cache, pins, owners []uint64) error {
	for start := 0; start < len(pins); start += loadChunk {
		end := min(start+loadChunk, len(pins))
		m := make(map[uint64]uint64, end-start)
		for i := start; i < end; i++ {
			m[pins[i]] = owners[i]
		}
		if err := cache.Set(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

func loadDecimalHash(ctx context.Context, client *redis.Client, prefix string, pins, owners []uint64) error {
	return pipelined(ctx, client, len(pins), func(pipe redis.Pipeliner, i int) {
		b := pins[i] / ownercache.BucketSize
		pipe.HSet(ctx, prefix+"b:"+strconv.FormatUint(b, 10),
			strconv.FormatUint(pins[i]%ownercache.BucketSize, 10), strconv.FormatUint(owners[i], 10))
	})
}

func loadPlain(ctx context.Context, client *redis.Client, prefix string, pins, owners []uint64) error {
	return pipelined(ctx, client, len(pins), func(pipe redis.Pipeliner, i int) {
		pipe.Set(ctx, prefix+"pin:"+strconv.FormatUint(pins[i], 10), strconv.FormatUint(owners[i], 10), 0)
	})
}

func pipelined(ctx context.Context, client *redis.Client, n int, add func(redis.Pipeliner, int)) error {
	for start := 0; start < n; start += loadChunk {
		pipe := client.Pipeline()
		for i := start; i < min(start+loadChunk, n); i++ {
			add(pipe, i)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
	}
	return nil
}

type timingRow struct {
	name             string
	median, p90, min time.Duration
}

// timeBatches times cfg.runs Gets of cfg.batch random loaded pins, and
// cfg.runs Lookups of cfg.batch pins never loaded (fresh ones each run, past
// every shard's last loaded local), whose load answers from a map.
func timeBatches(ctx context.Context, cache *ownercache.Cache, cfg config, pins, owners []uint64, next []uint64) ([]timingRow, error) {
	r := rand.New(rand.NewPCG(cfg.seed+1, 7))
	var gets []time.Duration
	batch := make([]uint64, cfg.batch)
	for range cfg.runs {
		for i := range batch {
			batch[i] = pins[r.IntN(len(pins))]
		}
		start := time.Now()
		got, err := cache.Get(ctx, batch)
		gets = append(gets, time.Since(start))
		if err != nil {
			return nil, err
		}
		for _, o := range got {
			if o == 0 {
				return nil, errors.New("Get: a loaded pin missed")
			}
		}
	}

	truth := make(map[uint64]uint64, cfg.runs*cfg.batch)
	batches := make([][]uint64, cfg.runs)
	for k := range batches {
		batches[k] = make([]uint64, cfg.batch)
		for i := range batches[k] {
			s := r.IntN(len(next))
			next[s]++
			pin := idcodec.MustEncode(uint32(s), idcodec.TypePin, next[s])
			batches[k][i] = pin
			truth[pin] = owners[r.IntN(len(owners))]
		}
	}
	load := func(_ context.Context, misses []uint64) (map[uint64]uint64, error) {
		out := make(map[uint64]uint64, len(misses))
		for _, p := range misses {
			if o, ok := truth[p]; ok {
				out[p] = o
			}
		}
		return out, nil
	}
	var lookups []time.Duration
	for _, b := range batches {
		start := time.Now()
		got, err := cache.Lookup(ctx, b, load)
		lookups = append(lookups, time.Since(start))
		if err != nil {
			return nil, err
		}
		if len(got) != len(b) {
			return nil, fmt.Errorf("Lookup found %d of %d", len(got), len(b))
		}
	}
	return []timingRow{
		summarize("Get, all hits (1 pipeline of HMGET per bucket)", gets),
		summarize("Lookup, all misses (Get + load from map + fill with HSET per bucket)", lookups),
	}, nil
}

func summarize(name string, ds []time.Duration) timingRow {
	slices.Sort(ds)
	round := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	return timingRow{
		name:   name,
		median: round(ds[len(ds)/2]),
		p90:    round(ds[len(ds)*9/10]),
		min:    round(ds[0]),
	}
}

func counterSum(reg *prometheus.Registry, name string) float64 {
	families, err := reg.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// redisProc is a redis-server this command started.
type redisProc struct {
	addr string
	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

// spawnRedis starts a private redis-server on a free loopback port, with no
// persistence and hash-max-listpack-entries 1024, and waits for PING.
func spawnRedis(ctx context.Context, bin string) (*redisProc, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("-spawn needs redis-server (%w); install it or use -spawn=false -addr <scratch server>", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "ownermem-redis-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--hash-max-listpack-entries", "1024",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", path, err)
	}
	p := &redisProc{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()

	c := redis.NewClient(&redis.Options{Addr: p.addr, DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Ping(ctx).Err()
		if err == nil {
			return p, nil
		}
		select {
		case <-p.done:
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			p.stop()
			return nil, fmt.Errorf("redis-server exited: %s", strings.TrimSpace(string(log)))
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.stop()
			return nil, fmt.Errorf("redis-server at %s not ready: %v", p.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *redisProc) stop() {
	p.cmd.Process.Kill()
	<-p.done
	os.RemoveAll(p.dir)
}
