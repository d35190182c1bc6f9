package etcdtopo_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/etcdtopo"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

var ctx = context.Background()

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		name, in  string
		endpoints string
		prefix    string
		user      string
		err       string
	}{
		{"one host, prefix", "etcd://10.0.0.1:2379/prod", "10.0.0.1:2379", "/prod", "", ""},
		{"three hosts", "etcd://a:2379,b:2379,c:2379/x/y/", "a:2379,b:2379,c:2379", "/x/y", "", ""},
		{"no prefix", "etcd://a:2379", "a:2379", "/pinstore", "", ""},
		{"credentials", "etcd://ann:s%40cret@a:2379/p", "a:2379", "/p", "ann", ""},
		{"ipv6", "etcd://[::1]:2379/p", "[::1]:2379", "/p", "", ""},
		{"wrong scheme", "http://a:2379/p", "", "", "", "want etcd://"},
		{"no port", "etcd://a/p", "", "", "", "is not host:port"},
		{"bad port", "etcd://a:99999/p", "", "", "", "no valid port"},
		{"empty host", "etcd://a:2379,,b:2379/p", "", "", "", "is not host:port"},
		{"query", "etcd://a:2379/p?x=1", "", "", "", "no query"},
		{"password never echoed", "etcd://ann:hunter2@a/p", "", "", "", "ann:…@a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := etcdtopo.ParseURL(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("error echoes the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(u.Endpoints, ","); got != tc.endpoints || u.Prefix != tc.prefix || u.Username != tc.user {
				t.Fatalf("got %v %q %q", u.Endpoints, u.Prefix, u.Username)
			}
			if strings.Contains(u.String(), "@") {
				t.Fatalf("String() shows credentials: %s", u)
			}
		})
	}
}

// testMap is a valid map over two hosts that need not exist: the package
// never connects to MySQL.
func testMap(t *testing.T, split int, roFirst ...int) *shardmap.Map {
	t.Helper()
	y := fmt.Sprintf("shards: 8\ndb_prefix: t\nhosts:\n  h0: {master: \"root@tcp(127.0.0.1:1)/\"}\n  h1: {master: \"root@tcp(127.0.0.1:2)/\"}\nranges:\n  - {shards: 0-%d, host: h0}\n  - {shards: %d-7, host: h1, read_only: %v}\n", split-1, split, len(roFirst) > 0)
	m, err := shardmap.Parse([]byte(y), 8, "t")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func dial(t *testing.T, e *testenv.Etcd) *etcdtopo.Client {
	t.Helper()
	u, err := etcdtopo.ParseURL(e.URL(testenv.UniquePrefix(t, "topo")))
	if err != nil {
		t.Fatal(err)
	}
	c, err := etcdtopo.Dial(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestMapCompareAndSwap(t *testing.T) {
	e := testenv.StartEtcd(t, 1)
	c := dial(t, e)

	if _, _, err := c.Map(ctx, 8, "t"); !model.IsCode(err, model.ENotFound) || !strings.Contains(err.Error(), "pinstore topology push") {
		t.Fatalf("no map yet: %v", err)
	}
	rev1, err := c.PutMap(ctx, testMap(t, 4), 0, "first")
	if err != nil {
		t.Fatal(err)
	}
	// A second first push loses: the map exists now.
	if _, err := c.PutMap(ctx, testMap(t, 5), 0, "also first"); !model.IsCode(err, model.EConflict) || !strings.Contains(err.Error(), "created by someone else") {
		t.Fatalf("second creation: %v", err)
	}
	m, rev, err := c.Map(ctx, 8, "t")
	if err != nil || rev != rev1 || m.Version() != testMap(t, 4).Version() {
		t.Fatalf("read back: %v rev %d/%d", err, rev, rev1)
	}
	// Two writers read revision rev1: one wins, the other is told why.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() { _, errs[i] = c.PutMap(ctx, testMap(t, 2+i*4), rev1, fmt.Sprintf("writer %d", i)) })
	}
	wg.Wait()
	won, lost := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case model.IsCode(err, model.EConflict) && strings.Contains(err.Error(), fmt.Sprintf("changed since it was read (revision %d, now", rev1)):
			lost++
		default:
			t.Fatalf("unexpected: %v", err)
		}
	}
	if won != 1 || lost != 1 {
		t.Fatalf("won %d lost %d", won, lost)
	}
	// A map that does not validate is never written.
	bad := testMap(t, 4)
	bad.Ranges = bad.Ranges[:1]
	_, rev, _ = c.Map(ctx, 8, "t")
	if _, err := c.PutMap(ctx, bad, rev, "bad"); !model.IsCode(err, model.EInvalid) || !strings.Contains(err.Error(), "gap") {
		t.Fatalf("bad map: %v", err)
	}
	if _, rev2, _ := c.Map(ctx, 8, "t"); rev2 != rev {
		t.Fatalf("a bad map changed the revision %d → %d", rev, rev2)
	}
	// One written by hand that does not validate is refused on read, naming
	// the problem and the revision.
	if _, err := c.Etcd().Put(ctx, c.MapKey(), "shards: 8\nhosts: {}\n"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Map(ctx, 8, "t"); !model.IsCode(err, model.EInvalid) || !strings.Contains(err.Error(), "does not validate") || !strings.Contains(err.Error(), "no hosts") {
		t.Fatalf("hand-written bad map: %v", err)
	}
}

func TestDialDown(t *testing.T) {
	u, _ := etcdtopo.ParseURL(fmt.Sprintf("etcd://127.0.0.1:%d/p", testenv.FreePort(t)))
	begin := time.Now()
	_, err := etcdtopo.Dial(ctx, u)
	if !model.IsCode(err, model.EUnavailable) || !strings.Contains(err.Error(), "is not answering") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(begin); d > 30*time.Second {
		t.Fatalf("Dial took %v", d)
	}
}

// follower is a Follower whose Apply records the maps it was given.
type follower struct {
	*etcdtopo.Follower
	mu      sync.Mutex
	applied []string // versions
	refuse  func(*shardmap.Map) error
	drain   chan struct{} // with drains: each receive lets one Drain return
}

func follow(t *testing.T, c *etcdtopo.Client, id string, m *shardmap.Map, rev int64, drains ...bool) *follower {
	t.Helper()
	f := &follower{applied: []string{m.Version()}}
	var drain func(context.Context) error
	if len(drains) > 0 {
		f.drain = make(chan struct{})
		drain = func(ctx context.Context) error {
			select {
			case <-f.drain:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	f.Follower = c.Follow(ctx, rev, m.Version(), etcdtopo.FollowConfig{
		Drain: drain,
		ID:    id, Addr: "127.0.0.1:0", Shards: 8, DBPrefix: "t",
		LeaseTTL: 2 * time.Second, Beat: 200 * time.Millisecond, StaleAfter: time.Second,
		Apply: func(m *shardmap.Map, rev int64) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.refuse != nil {
				if err := f.refuse(m); err != nil {
					return err
				}
			}
			f.applied = append(f.applied, m.Version())
			return nil
		},
	})
	t.Cleanup(f.Close)
	return f
}

func (f *follower) last() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied[len(f.applied)-1]
}

// eventually polls cond every 20ms for up to d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFollowAppliesAndRejects(t *testing.T) {
	e := testenv.StartEtcd(t, 1)
	c := dial(t, e)
	m0 := testMap(t, 4)
	rev, err := c.PutMap(ctx, m0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	f := follow(t, c, "s1", m0, rev)
	eventually(t, 5*time.Second, "healthy", func() bool { ok, _ := f.Health(); return ok })

	m1 := testMap(t, 2)
	if rev, err = c.PutMap(ctx, m1, rev, ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "new map applied", func() bool { return f.last() == m1.Version() })

	// Written by hand and invalid: rejected, the map in force stays, and
	// Health says why.
	put, err := c.Etcd().Put(ctx, c.MapKey(), "shards: 8\ndb_prefix: t\nhosts: {h0: {master: \"root@tcp(127.0.0.1:1)/\"}}\nranges: [{shards: 0-6, host: h0}]\n")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "bad map reported", func() bool {
		ok, why := f.Health()
		return !ok && strings.Contains(why, fmt.Sprintf("revision %d was rejected", put.Header.Revision)) && strings.Contains(why, "gap")
	})
	if f.last() != m1.Version() {
		t.Fatalf("routed by a bad map: %s", f.last())
	}
	// Apply can refuse too (the shard count cannot change while running).
	f.mu.Lock()
	f.refuse = func(m *shardmap.Map) error {
		if m.Version() == testMap(t, 6).Version() {
			return fmt.Errorf("refused by the server")
		}
		return nil
	}
	f.mu.Unlock()
	_, rev, _ = c.RawMap(ctx)
	if rev, err = c.PutMap(ctx, testMap(t, 6), rev, ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "refusal reported", func() bool { _, why := f.Health(); return strings.Contains(why, "refused by the server") })
	// A good map after them is taken, and health comes back.
	m3 := testMap(t, 3)
	if _, err = c.PutMap(ctx, m3, rev, ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "good map after bad ones", func() bool { ok, _ := f.Health(); return ok && f.last() == m3.Version() })
	for _, v := range f.applied {
		if v == testMap(t, 6).Version() {
			t.Fatal("a refused map was recorded as applied")
		}
	}
}

func TestRegistrations(t *testing.T) {
	e := testenv.StartEtcd(t, 1)
	c := dial(t, e)
	m0 := testMap(t, 4)
	rev, err := c.PutMap(ctx, m0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	a := follow(t, c, "a:1", m0, rev, true)
	b := follow(t, c, "b:2", m0, rev, true)
	eventually(t, 5*time.Second, "both registered", func() bool {
		regs, _, err := c.Servers(ctx)
		return err == nil && len(regs) == 2 && regs[0].ID == "a:1" && regs[1].ID == "b:2" && regs[0].Version == m0.Version()
	})
	m1 := testMap(t, 2)
	if _, err := c.PutMap(ctx, m1, rev, ""); err != nil {
		t.Fatal(err)
	}
	// Drained is what a move waits for: each server reports it when told.
	done := make(chan error, 1)
	go func() { _, err := c.WaitDrained(ctx, m1.Version(), 10*time.Second); done <- err }()
	eventually(t, 5*time.Second, "both applied", func() bool { return a.last() == m1.Version() && b.last() == m1.Version() })
	eventually(t, 5*time.Second, "both registered the new version, not drained", func() bool {
		regs, _, err := c.Servers(ctx)
		return err == nil && len(regs) == 2 && regs[0].Version == m1.Version() && regs[1].Version == m1.Version() && regs[0].Drained == m0.Version()
	})
	a.drain <- struct{}{}
	select {
	case err := <-done:
		t.Fatalf("WaitDrained returned before b drained: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	b.drain <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// A server that is late is named.
	_, err = c.WaitDrained(ctx, "nosuchversion", 500*time.Millisecond)
	if !model.IsCode(err, model.EUnavailable) || !strings.Contains(err.Error(), "a:1") || !strings.Contains(err.Error(), "b:2") {
		t.Fatalf("late servers: %v", err)
	}
	// Close revokes the lease: the registration goes at once.
	b.Close()
	regs, _, err := c.Servers(ctx)
	if err != nil || len(regs) != 1 || regs[0].ID != "a:1" {
		t.Fatalf("after close: %v %v", regs, err)
	}
}

func TestEtcdDownAndBack(t *testing.T) {
	e := testenv.StartEtcd(t, 1)
	c := dial(t, e)
	m0 := testMap(t, 4)
	rev, err := c.PutMap(ctx, m0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	f := follow(t, c, "s1", m0, rev)
	eventually(t, 5*time.Second, "healthy", func() bool { ok, _ := f.Health(); return ok })

	e.StopAll()
	eventually(t, 10*time.Second, "stale while etcd is down", func() bool {
		ok, why := f.Health()
		return !ok && strings.Contains(why, "topology stale") && strings.Contains(why, m0.Version())
	})
	if f.last() != m0.Version() {
		t.Fatal("the map in force changed while etcd was down")
	}
	if _, err := c.PutMap(ctx, testMap(t, 2), rev, ""); !model.IsCode(err, model.EUnavailable) || !strings.Contains(err.Error(), "is not answering") {
		t.Fatalf("a change while etcd is down: %v", err)
	}
	time.Sleep(3 * time.Second) // longer than the lease TTL: the registration must come back by itself

	e.StartAll()
	eventually(t, 20*time.Second, "healthy again", func() bool { ok, _ := f.Health(); return ok })
	m1 := testMap(t, 2)
	if _, err := c.PutMap(ctx, m1, rev, ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "watch resumed", func() bool { return f.last() == m1.Version() })
	eventually(t, 10*time.Second, "registered again", func() bool {
		regs, _, err := c.Servers(ctx)
		return err == nil && len(regs) == 1 && regs[0].ID == "s1"
	})
}

func TestThreeMembersOneDown(t *testing.T) {
	e := testenv.StartEtcd(t, 3)
	c := dial(t, e)
	m0 := testMap(t, 4)
	rev, err := c.PutMap(ctx, m0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	f := follow(t, c, "s1", m0, rev)
	eventually(t, 5*time.Second, "healthy", func() bool { ok, _ := f.Health(); return ok })
	for _, down := range []int{0, 1} { // the member the client first talks to, then another
		e.Stop(down)
		m := testMap(t, 2+down)
		_, rev, err = c.RawMap(ctx)
		if err == nil {
			_, err = c.PutMap(ctx, m, rev, "")
		}
		if err != nil {
			t.Fatalf("member %d down: %v", down, err)
		}
		eventually(t, 10*time.Second, fmt.Sprintf("applied with member %d down", down), func() bool { return f.last() == m.Version() })
		time.Sleep(1500 * time.Millisecond) // longer than StaleAfter
		if ok, why := f.Health(); !ok {
			t.Fatalf("member %d down: %s", down, why)
		}
		e.Start(down)
	}
}

func TestMoveLock(t *testing.T) {
	e := testenv.StartEtcd(t, 1)
	c := dial(t, e)
	h := c.Home()
	l, err := h.LockMoves(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.State()) != 0 {
		t.Fatalf("state %q", l.State())
	}
	if _, err := h.LockMoves(ctx); !model.IsCode(err, model.EConflict) || !strings.Contains(err.Error(), "another pinstore move-shards is running") {
		t.Fatalf("second lock: %v", err)
	}
	if err := l.Save(ctx, []byte("range: 0-3\n")); err != nil {
		t.Fatal(err)
	}
	if err := l.Save(ctx, []byte("range: 0-3\nstep: hold\n")); err != nil {
		t.Fatal(err)
	}
	l.Unlock()
	l2, err := h.LockMoves(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(l2.State()) != "range: 0-3\nstep: hold\n" {
		t.Fatalf("state after relock: %q", l2.State())
	}
	// A state changed behind the holder's back is not overwritten.
	if _, err := c.Etcd().Put(ctx, strings.TrimSuffix(c.MapKey(), "map")+"move", "edited by hand"); err != nil {
		t.Fatal(err)
	}
	if err := l2.Save(ctx, []byte("x")); !model.IsCode(err, model.EConflict) {
		t.Fatalf("save over a hand edit: %v", err)
	}
	l2.Unlock()
}
