package objcache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// The near copy: the entries this server read from Redis, kept in the
// process (Options.Near), so that a hot read costs no round trip. It keeps
// the cache's rule (no reader gets a version older than one a write
// acknowledged before the read began) across servers, with leases in the
// sense of Gray and Cheriton (SOSP 1989):
//
//   - Every write's invalidation (Invalidate) is published, after its
//     deletes, on one channel every server with a near copy subscribes to,
//     and the writer waits for each such server's acknowledgement before it
//     returns. A server drops the ids from its copy before it acknowledges.
//   - Such a server is a member: it renews its membership (a sorted set
//     scored by Redis's clock) every beat, and with the same script
//     publishes a beat on its own channel. A member serves from its copy
//     only for Fresh after sending a beat it has received back: the beat
//     came over the subscription behind every invalidation published
//     before it, so the member had dropped what those asked.
//   - A writer stops waiting for a member that has not acknowledged Wait
//     after the publication: that member's last beat back was sent before
//     the publication, so its copy went out of use before Fresh after it.
//     A member that lost its subscription (or Redis) stops hearing beats
//     and stops serving the same way, and empties its copy before it
//     serves from it again.
//   - Membership lives in Redis, which may lose it (a restart, an
//     eviction). Its epoch key says since when (Redis's clock) it has been
//     kept; a writer whose epoch is younger than Wait waits until it is
//     Wait old, since a member that Redis forgot may still be serving.
//   - A fill of the copy (after a read from Redis) is refused when any
//     invalidation was applied, or the subscription lost, since the read
//     began.
//
// The proof takes one bound: that the clocks of two servers do not run
// apart by more than the margin between Fresh and Wait over Fresh. A
// write pays one publication in the round trip of its deletes, then the
// wait for the members' acknowledgements (a round trip to Redis and back
// through each member), or Wait when a member has stopped (SIGSTOP, a
// dead process until its membership lapses, a partition).
//
// The near copy needs one Redis: on a Redis Cluster the publications and
// the deletes are on different nodes, with no order between them.

// Defaults for the near copy.
const (
	DefaultNearFresh  = 250 * time.Millisecond
	nearBeatsPerFresh = 5 // beats sent in each Fresh
	nearMargin        = 25 * time.Millisecond
)

// near is the process's copy of entries, with its membership.
type near struct {
	c         *Cache
	id        string // this server's member id
	fresh     time.Duration
	wait      time.Duration // Fresh plus the margin: how long a writer waits for a member
	max       int
	start     time.Time // monotonic origin of live, sent and the entries' until
	members   string    // sorted set: member id → lapse (Redis ms)
	epoch     string    // since when (Redis ms) members has been kept
	channel   string    // every member's: invalidations
	own       string    // this member's: beats and acknowledgements
	pubsub    *redis.PubSub
	cancel    context.CancelFunc
	done      sync.WaitGroup
	pause     sync.Mutex    // held by a test to stop the receive loop
	ready     chan struct{} // closed once subscribed: beats (membership) start then
	readyOnce sync.Once

	mu   sync.RWMutex
	m    map[uint64]nearEntry
	gen  atomic.Uint64 // bumped, under mu, by every invalidation applied and every subscription lost
	live atomic.Int64  // serve until this (ns since start)

	beatMu sync.Mutex
	sent   map[uint64]time.Duration // beat seq → when it was sent (since start)
	seq    uint64

	waitMu sync.Mutex
	waits  map[string]*nearWait

	hits, lapsed prometheus.Counter
}

// nearEntry is an entry of the copy, and until when (ns since start) it
// may answer: the cache's TTL after it was read from Redis.
type nearEntry struct {
	b     []byte
	until int64
}

// nearWait is a writer's wait for the members' acknowledgements: got
// holds those that came before the members were known, left those still
// awaited after.
type nearWait struct {
	got, left map[string]bool
	done      chan struct{}
}

func newNear(c *Cache, entries int, fresh time.Duration) *near {
	if fresh <= 0 {
		fresh = DefaultNearFresh
	}
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	n := &near{
		c: c, id: hex.EncodeToString(raw[:]), fresh: fresh, wait: fresh + fresh/10 + nearMargin, max: entries,
		start: time.Now(), members: c.prefix + "near:members", epoch: c.prefix + "near:epoch",
		channel: c.prefix + "near", m: make(map[uint64]nearEntry), sent: make(map[uint64]time.Duration),
		waits: make(map[string]*nearWait), ready: make(chan struct{}),
	}
	n.own = n.channel + ":" + n.id
	return n
}

// run subscribes and starts the receive and beat loops.
func (n *near) run() {
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	n.pubsub = n.c.client.Subscribe(ctx, n.channel, n.own)
	n.done.Add(2)
	go n.receive(ctx)
	go n.beats(ctx)
}

// close leaves the membership and stops the loops.
func (n *near) close() {
	n.cancel()
	_ = n.pubsub.Close()
	n.done.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), n.c.wait)
	defer cancel()
	n.c.client.ZRem(ctx, n.members, n.id)
}

func (n *near) now() time.Duration { return time.Since(n.start) }

// serving reports whether the copy may answer now.
func (n *near) serving() bool { return int64(n.now()) < n.live.Load() }

// get returns id's entry when the copy holds it and may answer.
func (n *near) get(id uint64) ([]byte, bool) {
	now := int64(n.now())
	if now >= n.live.Load() {
		return nil, false
	}
	n.mu.RLock()
	e, ok := n.m[id]
	n.mu.RUnlock()
	if !ok || now >= e.until {
		return nil, false
	}
	return e.b, true
}

// snapshot is what a read takes before it reads Redis, for put.
func (n *near) snapshot() uint64 { return n.gen.Load() }

// put keeps b, read from Redis after snapshot gen, for the cache's TTL,
// unless an invalidation was applied (or the subscription lost) since.
func (n *near) put(id uint64, b []byte, gen uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.gen.Load() != gen {
		return
	}
	if _, ok := n.m[id]; !ok && len(n.m) >= n.max {
		for k := range n.m { // a random victim: Go's map order
			delete(n.m, k)
			break
		}
	}
	n.m[id] = nearEntry{b: b, until: int64(n.now() + n.c.ttl)}
}

// drop removes ids from the copy (nil: everything).
func (n *near) drop(ids []uint64) {
	n.mu.Lock()
	if ids == nil {
		clear(n.m)
	}
	for _, id := range ids {
		delete(n.m, id)
	}
	n.gen.Add(1)
	n.mu.Unlock()
}

// beat renews the membership and publishes a beat on the member's own
// channel, in one script (one Redis, one order).
var beat = redis.NewScript(`local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
if redis.call('EXISTS', KEYS[2]) == 0 then redis.call('SET', KEYS[2], now) end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1`)

// publish publishes an invalidation and returns the age of the
// membership's epoch (ms) and the members.
var publish = redis.NewScript(`local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local e = redis.call('GET', KEYS[2])
if not e then redis.call('SET', KEYS[2], now); e = now end
redis.call('PUBLISH', ARGV[1], ARGV[2])
return {now - tonumber(e), redis.call('ZRANGEBYSCORE', KEYS[1], now, '+inf')}`)

func (n *near) beats(ctx context.Context) {
	defer n.done.Done()
	select { // a member that writers wait for must hear them
	case <-ctx.Done():
		return
	case <-n.ready:
	}
	tick := time.NewTicker(n.fresh / nearBeatsPerFresh)
	defer tick.Stop()
	lapseAfter := 2 * n.wait
	lapse := strconv.FormatInt(lapseAfter.Milliseconds(), 10)
	// A beat that fails now and then (a Redis round trip slower than the
	// cache's timeout on a busy machine) costs nothing: the next renews
	// the membership, and at worst the copy pauses for a moment while
	// reads go to Redis. Only a membership that lapses, beats failing for
	// longer than its lapse, is worth an operator's attention.
	var failingSince time.Time
	warned := false
	for {
		n.beatMu.Lock()
		n.seq++
		seq, now := n.seq, n.now()
		for s, at := range n.sent { // beats that never came back (Redis away): too old to matter
			if at < now-n.fresh {
				delete(n.sent, s)
			}
		}
		n.sent[seq] = now
		n.beatMu.Unlock()
		c, cancel := context.WithTimeout(ctx, n.c.wait)
		err := beat.Run(c, n.c.client, []string{n.members, n.epoch}, n.id, lapse, n.own, "b "+strconv.FormatUint(seq, 10)).Err()
		cancel()
		switch {
		case ctx.Err() != nil:
		case err != nil:
			if failingSince.IsZero() {
				failingSince = time.Now()
				n.c.log.Debug("object cache: a near copy beat failed; the next one renews the membership", "err", err.Error())
			}
			if !warned && time.Since(failingSince) >= lapseAfter {
				n.c.log.Warn("object cache: the near copy's membership lapsed: Redis has not taken its renewal for "+lapseAfter.String()+
					"; until it does, this server reads from Redis instead of its near copy (never a stale answer). If this repeats, Redis or this server is overloaded or cut off from the other: check Redis's latency and this server's CPU",
					"err", err.Error())
				warned = true
			}
		case !failingSince.IsZero():
			if warned {
				n.c.log.Info("object cache: the near copy renews its membership again", "after", time.Since(failingSince).Round(time.Millisecond).String())
			}
			failingSince, warned = time.Time{}, false
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// receive applies invalidations, acknowledges them, takes beats back and
// delivers acknowledgements to this server's writers.
func (n *near) receive(ctx context.Context) {
	defer n.done.Done()
	for {
		msg, err := n.pubsub.Receive(ctx)
		if ctx.Err() != nil {
			return
		}
		n.pause.Lock()
		n.pause.Unlock() //nolint:staticcheck // a test holds it to pause the loop
		if err != nil {
			// Whatever was published meanwhile is lost: empty the copy. go-redis
			// has reconnected and subscribed again, or the next Receive will.
			n.drop(nil)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if _, ok := msg.(*redis.Subscription); ok {
			// Subscribed (again): a read that took its snapshot before may
			// have missed an invalidation published before this.
			n.drop(nil)
			n.readyOnce.Do(func() { close(n.ready) })
			continue
		}
		m, ok := msg.(*redis.Message)
		if !ok {
			continue
		}
		kind, rest, _ := strings.Cut(m.Payload, " ")
		switch kind {
		case "i": // "i <writer> <token> <id> <id>…"
			writer, rest, _ := strings.Cut(rest, " ")
			token, rest, _ := strings.Cut(rest, " ")
			var ids []uint64
			for f := range strings.FieldsSeq(rest) {
				if id, err := strconv.ParseUint(f, 10, 64); err == nil {
					ids = append(ids, id)
				}
			}
			if writer == n.id {
				continue // the writer applies its own (announce)
			}
			n.drop(ids)
			go func() {
				c, cancel := context.WithTimeout(ctx, n.c.wait)
				defer cancel()
				n.c.client.Publish(c, n.channel+":"+writer, "a "+token+" "+n.id)
			}()
		case "b": // a beat of ours, back
			seq, err := strconv.ParseUint(rest, 10, 64)
			if err != nil {
				continue
			}
			n.beatMu.Lock()
			sent, ok := n.sent[seq]
			for s := range n.sent {
				if s <= seq {
					delete(n.sent, s)
				}
			}
			n.beatMu.Unlock()
			if ok && int64(sent+n.fresh) > n.live.Load() {
				n.live.Store(int64(sent + n.fresh))
			}
		case "a": // "a <token> <member>"
			token, member, _ := strings.Cut(rest, " ")
			n.waitMu.Lock()
			switch w := n.waits[token]; {
			case w == nil:
			case w.left == nil:
				w.got[member] = true
			case w.left[member]:
				delete(w.left, member)
				if len(w.left) == 0 {
					close(w.done)
				}
			}
			n.waitMu.Unlock()
		}
	}
}

// announce queues, on pipe (after the deletes of ids), the publication of
// their invalidation. The returned func, called once pipe is sent (always:
// it releases the wait), applies it to this server's copy and waits for
// every member's acknowledgement, or for the members that did not give it
// to stop serving.
func (n *near) announce(ctx context.Context, pipe redis.Pipeliner, ids []uint64) func() error {
	var raw [8]byte
	_, _ = rand.Read(raw[:])
	token := hex.EncodeToString(raw[:])
	var b strings.Builder
	b.WriteString("i " + n.id + " " + token)
	for _, id := range ids {
		b.WriteByte(' ')
		b.WriteString(strconv.FormatUint(id, 10))
	}
	w := &nearWait{got: make(map[string]bool), done: make(chan struct{})}
	n.waitMu.Lock()
	n.waits[token] = w
	n.waitMu.Unlock()
	cmd := publish.Eval(ctx, pipe, []string{n.members, n.epoch}, n.channel, b.String())
	return func() error {
		sent := time.Now()
		// This server's copy: dropped once the deletes are done, so that a
		// read that took its snapshot after the drop reads Redis after them.
		n.drop(ids)
		defer func() {
			n.waitMu.Lock()
			delete(n.waits, token)
			n.waitMu.Unlock()
		}()
		res, err := cmd.Slice()
		if err != nil {
			return err
		}
		if len(res) != 2 {
			return fmt.Errorf("objcache: the invalidation's publication answered %v", res)
		}
		age, _ := res[0].(int64)
		members, _ := res[1].([]any)
		until := sent.Add(n.wait)
		if young := n.wait - time.Duration(age)*time.Millisecond; young > 0 {
			// Redis may have forgotten members that still serve: wait them out.
			n.lapsed.Inc()
			time.Sleep(young)
		}
		n.waitMu.Lock()
		w.left = make(map[string]bool, len(members))
		for _, m := range members {
			if s, ok := m.(string); ok && s != n.id && !w.got[s] {
				w.left[s] = true
			}
		}
		waiting := len(w.left)
		n.waitMu.Unlock()
		if waiting == 0 {
			return nil
		}
		select {
		case <-w.done:
			return nil
		case <-time.After(time.Until(until)):
			n.lapsed.Inc()
			return nil
		}
	}
}
