package store

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/migrations"
	"github.com/pinstore/pinstore/model"
)

// rename edits a user's display name and returns the acknowledged version.
func rename(t *testing.T, s *Store, user uint64, name string) int64 {
	t.Helper()
	return edit(t, s, user, idcodec.TypeUser, func(d model.Doc) { d.(*model.UserDoc).DisplayName = name })
}

// edit changes an object's document with change and returns the
// acknowledged version.
func edit(t *testing.T, s *Store, id uint64, typ idcodec.Type, change func(model.Doc)) int64 {
	t.Helper()
	o, err := s.Update(ctx, id, typ, 0, func(doc []byte) ([]byte, error) {
		d, err := model.DecodeDoc(typ, doc)
		if err != nil {
			return nil, err
		}
		change(d)
		return marshal(d), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return o.Version
}

func marshal(d model.Doc) []byte {
	b, err := json.Marshal(d)
	if err != nil {
		panic(err)
	}
	return b
}

// Concurrent writers and readers on a few hot objects, through two stores
// (two servers) sharing the shards and Redis: every read returns a version
// at least as new as the last write acknowledged before the read began,
// and counts no smaller than the last acknowledged add.
func TestCacheNeverServesAnOlderVersion(t *testing.T) {
	a, _ := openTest(t)
	cacheNeverServesAnOlderVersion(t, a)
}

// The same on a Redis Cluster of three masters: the entries, leases,
// fills and invalidations of one request fall on several nodes.
func TestCacheNeverServesAnOlderVersionOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	addrs := testenv.RedisCluster(t)
	a, _ := openTestWith(t, func(c *Config) { c.Redis.Addrs, c.Redis.Cluster = addrs, true })
	cacheNeverServesAnOlderVersion(t, a)
}

// The same with a near copy of the cache in each server (objcache,
// near.go): a hot read costs no round trip, and a write reaches both
// servers' copies before it is acknowledged.
func TestCacheNeverServesAnOlderVersionWithANearCopy(t *testing.T) {
	a, _ := openTestWith(t, func(c *Config) { c.ObjectCache.Near = 1000 })
	cacheNeverServesAnOlderVersion(t, a)
}

// cacheNeverServesAnOlderVersion runs the test on a and a second store
// (server) on a's shards and Redis.
func cacheNeverServesAnOlderVersion(t *testing.T, a *Store) {
	b, err := Open(ctx, Config{Map: a.cfg.Map, CursorSecret: []byte("test"), Redis: a.cfg.Redis, ObjectCache: a.cfg.ObjectCache})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	neverOlder(t, []*Store{a, b}, ctx)
}

// neverOlder runs writers and readers on a few hot objects through
// stores (servers sharing shards and Redis), readers under rctx, for 3 s,
// and fails on any read older than what was acknowledged before it began.
// It returns how many reads it made.
func neverOlder(t *testing.T, stores []*Store, rctx context.Context) int64 {
	a := stores[0]
	var users, boards []uint64
	for i := range 3 {
		u := mustUser(t, a, fmt.Sprintf("hot%d", i))
		users, boards = append(users, u), append(boards, mustBoard(t, a, u))
	}
	acked := make([]atomic.Int64, len(users))     // last acknowledged version of users[i]
	pinsAdded := make([]atomic.Int64, len(users)) // acknowledged pins on boards[i]
	for i := range acked {
		acked[i].Store(1)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range users {
		wg.Go(func() { // a writer per object, alternating servers
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				s := stores[n%2]
				if n%3 == 0 {
					if _, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(boards[i])}, 0); err != nil {
						t.Error(err)
						return
					}
					pinsAdded[i].Add(1)
					continue
				}
				v := rename(t, s, users[i], fmt.Sprintf("v%d", n))
				for { // versions are acknowledged in order per object (one writer each)
					old := acked[i].Load()
					if v <= old || acked[i].CompareAndSwap(old, v) {
						break
					}
				}
			}
		})
	}
	var reads, violations atomic.Int64
	for r := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := rng.IntN(len(users))
				s := stores[rng.IntN(2)]
				wantV, wantPins := acked[i].Load(), pinsAdded[i].Load()
				var u, bo model.Object
				var err error
				if rng.IntN(2) == 0 {
					u, err = s.Get(rctx, users[i], idcodec.TypeUser)
					if err == nil {
						bo, err = s.Get(rctx, boards[i], idcodec.TypeBoard)
					}
				} else {
					var got []model.Object
					if got, err = s.GetMany(rctx, []uint64{users[i]}, idcodec.TypeUser); err == nil && len(got) == 1 {
						u = got[0]
						got, err = s.GetMany(rctx, []uint64{boards[i]}, idcodec.TypeBoard)
						if err == nil && len(got) == 1 {
							bo = got[0]
						}
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
				reads.Add(1)
				if u.Version < wantV || bo.Counts == nil || bo.Counts[0] < wantPins {
					violations.Add(1)
					t.Errorf("read user v%d (acknowledged v%d before the read), board pins %v (acknowledged %d)", u.Version, wantV, bo.Counts, wantPins)
				}
			}
		})
	}
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	var hits, nearHits, refused int64
	for _, s := range stores {
		hits += s.objects.cache.Stats().Hits.Load()
		nearHits += s.objects.cache.Stats().NearHits.Load()
		refused += s.objects.cache.Stats().Refused.Load()
	}
	t.Logf("%d reads, %d cache hits (%d from near copies), %d fills refused, %d violations", reads.Load(), hits, nearHits, refused, violations.Load())
	if hits == 0 {
		t.Fatal("the cache answered no read: the test proves nothing")
	}
	if a.cfg.ObjectCache.Near > 0 && nearHits == 0 {
		t.Fatal("the near copies answered no read: the test proves nothing of them")
	}
	return reads.Load()
}

// Redis unreachable for the writer but not for a reader (the window a
// fault opens): the writer never reads its old copy, the reader may until
// Redis takes the invalidation, which the writer resends every cacheRetry
// once Redis is back.
func TestCacheStaleWindowAcrossARedisFault(t *testing.T) {
	b, _ := openTest(t) // the reader, on Redis directly
	cacheStaleWindowAcrossARedisFault(t, b)
}

// The same with near copies: the reader's copy holds the old version
// while the writer cannot reach Redis, and lets it go when the resent
// invalidation comes.
func TestCacheStaleWindowAcrossARedisFaultWithANearCopy(t *testing.T) {
	b, _ := openTestWith(t, func(c *Config) { c.ObjectCache.Near = 1000 })
	cacheStaleWindowAcrossARedisFault(t, b)
}

// cacheStaleWindowAcrossARedisFault runs the test with b as the reader.
func cacheStaleWindowAcrossARedisFault(t *testing.T, b *Store) {
	proxy := startCutProxy(t, testenv.RedisAddr(t))
	a := openSecond(t, b, proxy.ln.Addr().String())
	u := mustUser(t, b, "faulty")
	if o, err := b.Get(ctx, u, idcodec.TypeUser); err != nil || o.Version != 1 {
		t.Fatal(err)
	}
	if o, _ := b.Get(ctx, u, idcodec.TypeUser); o.Version != 1 || b.objects.cache.Stats().Hits.Load() == 0 {
		t.Fatal("setup: the user is not cached")
	}
	proxy.setCut(true)
	v := rename(t, a, u, "during the fault")
	if o, err := a.Get(ctx, u, idcodec.TypeUser); err != nil || o.Version != v {
		t.Fatalf("the writer read v%d, its own write is v%d (%v)", o.Version, v, err)
	}
	if o, _ := b.Get(ctx, u, idcodec.TypeUser); o.Version != 1 {
		t.Fatalf("setup: the reader was expected to see the entry Redis kept, v1; got v%d", o.Version)
	}
	proxy.setCut(false)
	back := time.Now()
	for {
		o, err := b.Get(ctx, u, idcodec.TypeUser)
		if err != nil {
			t.Fatal(err)
		}
		if o.Version == v {
			break
		}
		if time.Since(back) > time.Second {
			t.Fatalf("the reader still reads v%d %v after Redis came back; the bound is cacheRetry (%v) plus a round trip", o.Version, time.Since(back), cacheRetry)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("stale window after Redis came back: %v", time.Since(back).Round(time.Millisecond))
}

// The writer dies while Redis is away: its invalidation is not lost, since
// the cache_outbox row went in with the change; another server's sweep
// sends it.
func TestCacheInvalidationOutlivesItsWriter(t *testing.T) {
	b0, m := openTest(t)
	proxy := startCutProxy(t, testenv.RedisAddr(t))
	a, err := Open(ctx, Config{Map: m, CursorSecret: []byte("test"), Redis: RedisConfig{Addrs: []string{proxy.ln.Addr().String()}, Prefix: b0.cfg.Redis.Prefix}, ObjectCache: b0.cfg.ObjectCache})
	if err != nil {
		t.Fatal(err)
	}
	u := mustUser(t, b0, "orphan")
	b0.Get(ctx, u, idcodec.TypeUser)
	proxy.setCut(true)
	v := rename(t, a, u, "written by a server that dies")
	a.Close() // gone, with its pending invalidation
	proxy.setCut(false)
	if o, _ := b0.Get(ctx, u, idcodec.TypeUser); o.Version != 1 {
		t.Fatalf("setup: expected the stale entry, got v%d", o.Version)
	}
	b, err := Open(ctx, Config{Map: m, CursorSecret: []byte("test"), PairSweep: 100 * time.Millisecond, Redis: b0.cfg.Redis, ObjectCache: b0.cfg.ObjectCache})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	start := time.Now()
	for {
		if o, _ := b.Get(ctx, u, idcodec.TypeUser); o.Version == v {
			break
		}
		if time.Since(start) > cacheGrace+2*time.Second {
			t.Fatalf("the dead writer's invalidation was not swept within %v", time.Since(start))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("swept %v after the writer died", time.Since(start).Round(time.Millisecond))
	if n := rowsOf(t, b, "cache_outbox"); n != 0 {
		time.Sleep(200 * time.Millisecond) // rows are deleted in batches
		if n = rowsOf(t, b, "cache_outbox"); n != 0 {
			t.Fatalf("%d cache_outbox rows left", n)
		}
	}
}

// Each write keeps cache_outbox rows of its own. Writes to one object
// while Redis is away each leave theirs, and once Redis is back the
// writer's resend clears them all: none is left for a sweep (no store
// here sweeps).
func TestCacheResendClearsEveryWritesMarks(t *testing.T) {
	b0, _ := openTest(t)
	proxy := startCutProxy(t, testenv.RedisAddr(t))
	a := openSecond(t, b0, proxy.ln.Addr().String())
	u := mustUser(t, b0, "busy")
	for rowsOf(t, b0, "cache_outbox") != 0 { // the create's, deleted in batches
		time.Sleep(10 * time.Millisecond)
	}
	proxy.setCut(true)
	rename(t, a, u, "first while Redis is away")
	v := rename(t, a, u, "second while Redis is away")
	if n := rowsOf(t, a, "cache_outbox"); n != 2 {
		t.Fatalf("%d cache_outbox rows while Redis is away, want one for each of the two writes", n)
	}
	proxy.setCut(false)
	start := time.Now()
	for n := rowsOf(t, a, "cache_outbox"); n != 0; n = rowsOf(t, a, "cache_outbox") {
		if time.Since(start) > 2*time.Second {
			t.Fatalf("%d cache_outbox rows left %v after Redis came back; the resend (every %v) takes every write's", n, time.Since(start), cacheRetry)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if o, err := b0.Get(ctx, u, idcodec.TypeUser); err != nil || o.Version != v {
		t.Fatalf("read v%d (%v) after the resend, want v%d", o.Version, err, v)
	}
}

// A shard not migrated to cache_outbox per write (keyed by object alone)
// still takes writes: a server asks each shard which key it has and marks
// with upserts there, so a mark of an object that already has one (left
// by a writer that died) replaces it instead of failing the write; the
// shards that are migrated get plain inserts.
func TestWritesOnAShardNotMigratedToMarksPerWrite(t *testing.T) {
	b0, _ := openTest(t)
	ann := mustUser(t, b0, "ann")
	board := mustBoard(t, b0, ann)
	for rowsOf(t, b0, "cache_outbox") != 0 { // the creates', deleted in batches
		time.Sleep(10 * time.Millisecond)
	}
	top := b0.router.Current()
	old, _ := top.Shard(int(idcodec.ShardOf(board)))
	for _, q := range []string{
		"ALTER TABLE " + old.Name + ".cache_outbox DROP PRIMARY KEY, ADD PRIMARY KEY (object_id)",
		"DELETE FROM " + old.Name + ".schema_migrations WHERE version >= " + fmt.Sprint(migrations.CacheOutboxPerWrite),
		"INSERT INTO " + old.Name + ".cache_outbox (object_id, token, created_at) VALUES (" + fmt.Sprint(board) + ", 99, UTC_TIMESTAMP(6))",
	} {
		if _, err := old.Host.DB.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	a := openSecond(t, b0, testenv.RedisAddr(t)) // a server started after the shard went back
	if _, err := a.CreatePin(ctx, model.PinDoc{BoardID: model.ID(board), Link: "https://example.com/p"}, ann); err != nil {
		t.Fatalf("a pin on a board marked by a dead writer, on a shard keyed by object: %v", err)
	}
	start := time.Now()
	for n := rowsOf(t, a, "cache_outbox"); n != 0; n = rowsOf(t, a, "cache_outbox") {
		if time.Since(start) > 2*time.Second {
			t.Fatalf("%d cache_outbox rows left: the create's mark took the row over and its invalidation clears it", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if o, err := b0.Get(ctx, board, idcodec.TypeBoard); err != nil || o.Counts[0] != 1 {
		t.Fatalf("the board after the create: %+v, %v", o.Counts, err)
	}
	other, _ := top.Shard((old.N + 1) % testShards)
	if a.objects.perWrite(ctx, old) || !a.objects.perWrite(ctx, other) {
		t.Fatalf("marks per write on the shard keyed by object %v, on a migrated shard %v; want false, true", a.objects.perWrite(ctx, old), a.objects.perWrite(ctx, other))
	}
}

// A host that is down fails only what depends on it: objects the cache
// holds are still answered (no write can have changed them: their host
// takes none), the others are 503.
func TestCachedObjectsOutliveTheirHost(t *testing.T) {
	second := testenv.StartHost(t, "cache-down")
	s, _ := openTest(t, testenv.MySQLDSN(t), second.DSN())
	var read, unread uint64
	for i := 0; (read == 0 || unread == 0) && i < 200; i++ {
		u := mustUser(t, s, "x")
		if idcodec.ShardOf(u) < testShards/2 {
			continue
		}
		if read == 0 {
			read = u
		} else {
			unread = u
		}
	}
	if _, err := s.Get(ctx, read, idcodec.TypeUser); err != nil {
		t.Fatal(err)
	}
	second.Stop(t)
	if o, err := s.Get(ctx, read, idcodec.TypeUser); err != nil || o.ID != read {
		t.Fatalf("a cached object on a stopped host: %v", err)
	}
	if _, err := s.Get(ctx, unread, idcodec.TypeUser); !model.IsCode(err, model.EUnavailable) {
		t.Fatalf("an object the cache lacks, on a stopped host: %v", err)
	}
	if _, err := s.Update(ctx, read, idcodec.TypeUser, 0, func(d []byte) ([]byte, error) { return d, nil }); !model.IsCode(err, model.EUnavailable) {
		t.Fatalf("a write on a stopped host: %v", err)
	}
	second.Start(t)
}

// A server asks a shard which key its cache_outbox has before a write
// takes its transaction's connection, never while holding one: on a pool
// of one connection, the first writes to each shard succeed and learn
// that it is keyed per write, instead of waiting for a second connection
// until their deadline (and failing).
func TestShardsAskedOutsideTheirTransactions(t *testing.T) {
	s, _ := openTestWith(t, func(c *Config) { c.PoolSize = 1; c.QueryTimeout = time.Second })
	ann := mustUser(t, s, "ann")
	mustPin(t, s, mustBoard(t, s, ann))
	asked := 0
	s.objects.keyed.Range(func(k, v any) bool {
		asked++
		if !v.(keyedAnswer).perWrite {
			t.Errorf("%v: found not keyed per write", k)
		}
		return true
	})
	if asked == 0 {
		t.Fatal("no shard asked")
	}
}

// pipelines records the commands of every pipeline a Redis client sends,
// each as its name and first key.
type pipelines struct {
	mu   sync.Mutex
	sent [][]string
}

func (p *pipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (p *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var sent []string
		for _, c := range cmds {
			if a := c.Args(); len(a) > 1 {
				sent = append(sent, fmt.Sprint(a[0], " ", a[1]))
			}
		}
		p.mu.Lock()
		p.sent = append(p.sent, sent)
		p.mu.Unlock()
		return next(ctx, cmds)
	}
}

// with returns the pipelines that sent a command of name on a key that
// starts with prefix.
func (p *pipelines) with(name, prefix string) [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out [][]string
	for _, cmds := range p.sent {
		if slices.ContainsFunc(cmds, func(c string) bool { return strings.HasPrefix(c, name+" "+prefix) }) {
			out = append(out, cmds)
		}
	}
	return out
}

// A create tells both caches of its commit in one round trip: the
// invalidations of what it changed (its board's and its author's counts
// grew) and its owner for the owner cache go in one pipeline, before the
// create returns.
func TestCreateTellsTheCachesInOneRoundTrip(t *testing.T) {
	s, _ := openTest(t)
	ann := mustUser(t, s, "ann")
	board := mustBoard(t, s, ann)
	if _, err := s.Get(ctx, board, idcodec.TypeBoard); err != nil { // cached
		t.Fatal(err)
	}
	p := &pipelines{}
	s.redis.AddHook(p)
	pin, err := s.CreatePin(ctx, model.PinDoc{BoardID: model.ID(board), Link: "https://example.com/a"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	sets := p.with("hset", s.cfg.Redis.Prefix)
	if len(sets) != 1 {
		t.Fatalf("%d pipelines set owners during the create, want 1: %v", len(sets), sets)
	}
	for _, dropped := range []uint64{board, ann} {
		if key := "del " + s.cfg.ObjectCache.Prefix + strconv.FormatUint(dropped, 10); !slices.Contains(sets[0], key) {
			t.Errorf("the pipeline that set the pin's owner, %v, does not invalidate %d (%q)", sets[0], dropped, key)
		}
	}
	if owners, err := s.ownerCache.Get(ctx, []uint64{pin.ID}); err != nil || owners[0] != ann {
		t.Errorf("the owner cache holds %v, %v for the pin; want ann (%d)", owners, err, ann)
	}
	if n, err := s.redis.Exists(ctx, s.cfg.ObjectCache.Prefix+strconv.FormatUint(board, 10)).Result(); err != nil || n != 0 {
		t.Errorf("the board's entry: %d keys (%v) after the create, want it dropped", n, err)
	}
}
