package topology

import (
	"context"
	"testing"
	"time"

	"github.com/pinstore/pinstore/model"
)

// TestWriteBuffer: a write to a read-only shard waits for the map that
// makes it writable and then routes to the new host; without such a map
// it is EMoving after the window; with no window, or the buffer full, at
// once.
func TestWriteBuffer(t *testing.T) {
	r, err := New(parse(t, "{shards: 0-3, host: a}", "{shards: 4-7, host: a, read_only: true}"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()

	sh, release, err := r.EnterShard(ctx, "op", 2, time.Second, 10)
	if err != nil || sh.Host.Name != "a" || sh.ReadOnly {
		t.Fatalf("writable shard: %+v %v", sh, err)
	}
	release()

	type result struct {
		sh  Shard
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		sh, release, err := r.EnterShard(ctx, "op", 5, 10*time.Second, 10)
		if release != nil {
			release()
		}
		done <- result{sh, err, time.Now()}
	}()
	for r.Buffer().Waiting() != 1 {
		time.Sleep(time.Millisecond)
	}
	// Another map that leaves it read-only: still waiting.
	if err := r.Reload(parse(t, "{shards: 0-3, host: b}", "{shards: 4-7, host: a, read_only: true}")); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		t.Fatalf("returned before the switch: %+v", res)
	case <-time.After(100 * time.Millisecond):
	}
	switched := time.Now()
	if err := r.Reload(parse(t, "{shards: 0-3, host: b}", "{shards: 4-7, host: b}")); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || res.sh.Host.Name != "b" || res.sh.ReadOnly || res.sh.N != 5 {
		t.Fatalf("after the switch: %+v", res)
	}
	if d := res.at.Sub(switched); d > time.Second {
		t.Logf("the waiting write took %v to see the switch", d)
	}
	if w, e := r.Buffer().Waited.Load(), r.Buffer().Expired.Load(); w != 1 || e != 0 {
		t.Fatalf("waited %d expired %d", w, e)
	}

	// No map comes: EMoving after the window; no window or a full
	// buffer: at once.
	if err := r.Reload(parse(t, "{shards: 0-3, host: b}", "{shards: 4-7, host: b, read_only: true}")); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if _, _, err := r.EnterShard(ctx, "op", 6, 200*time.Millisecond, 10); !model.IsCode(err, model.EMoving) || time.Since(begin) < 200*time.Millisecond {
		t.Fatalf("window: %v after %v", err, time.Since(begin))
	}
	if _, _, err := r.EnterShard(ctx, "op", 6, 0, 10); !model.IsCode(err, model.EMoving) {
		t.Fatalf("no window: %v", err)
	}
	if _, _, err := r.EnterShard(ctx, "op", 6, time.Second, 0); !model.IsCode(err, model.EMoving) {
		t.Fatalf("full buffer: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	if _, _, err := r.EnterShard(cctx, "op", 6, 10*time.Second, 10); !model.IsCode(err, model.EMoving) {
		t.Fatalf("cancelled: %v", err)
	}
	if r.Buffer().Waiting() != 0 {
		t.Fatalf("%d still counted as waiting", r.Buffer().Waiting())
	}
}

// TestDrain: Drain returns only once the writes pinned to older versions
// have ended; writes pinned after the change do not hold it up.
func TestDrain(t *testing.T) {
	r, err := New(parse(t, "{shards: 0-7, host: a}"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	if err := r.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	old, releaseOld := r.Enter()
	if err := r.Reload(parse(t, "{shards: 0-3, host: a}", "{shards: 4-7, host: b}")); err != nil {
		t.Fatal(err)
	}
	cur, releaseNew := r.Enter()
	if cur == old {
		t.Fatal("Enter pinned the replaced version")
	}
	drained := make(chan error, 1)
	go func() { drained <- r.Drain(ctx) }()
	select {
	case err := <-drained:
		t.Fatalf("drained while a write on the old map runs: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	releaseOld()
	select {
	case err := <-drained:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not drained after the old write ended")
	}
	releaseNew()
	c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, releaseOld = r.Enter()
	_ = r.Reload(parse(t, "{shards: 0-7, host: b}"))
	if err := r.Drain(c); err == nil {
		t.Fatal("Drain returned with a write pinned to the old map")
	}
	releaseOld()
}

// TestEnterShards: a write to two shards waits, pinning nothing (a move
// of the writable one drains meanwhile), until one map has both writable,
// and routes both by that map.
func TestEnterShards(t *testing.T) {
	r, err := New(parse(t, "{shards: 0-3, host: a}", "{shards: 4-7, host: a, read_only: true}"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()

	type result struct {
		a, b Shard
		err  error
	}
	done := make(chan result, 1)
	go func() {
		a, b, release, err := r.EnterShards(ctx, "op", 2, 5, 10*time.Second, 10)
		if release != nil {
			release()
		}
		done <- result{a, b, err}
	}()
	for r.Buffer().Waiting() != 1 {
		time.Sleep(time.Millisecond)
	}
	// The writable shard's range is held and switched by another move:
	// the waiting write holds up neither its drain nor its switch.
	if err := r.Reload(parse(t, "{shards: 0-3, host: a, read_only: true}", "{shards: 4-7, host: a, read_only: true}")); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := r.Drain(c); err != nil {
		t.Fatalf("drain while a two-shard write waits: %v", err)
	}
	if err := r.Reload(parse(t, "{shards: 0-3, host: b}", "{shards: 4-7, host: a, read_only: true}")); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		t.Fatalf("returned while shard 5 is read-only: %+v", res)
	case <-time.After(100 * time.Millisecond):
	}
	if err := r.Reload(parse(t, "{shards: 0-3, host: b}", "{shards: 4-7, host: b}")); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || res.a.N != 2 || res.b.N != 5 || res.a.Host.Name != "b" || res.b.Host.Name != "b" || res.a.ReadOnly || res.b.ReadOnly {
		t.Fatalf("after the switch: %+v", res)
	}

	// One shard twice; a shard outside the map; no window.
	a, b, release, err := r.EnterShards(ctx, "op", 6, 6, time.Second, 10)
	if err != nil || a.N != 6 || b.N != 6 {
		t.Fatalf("one shard twice: %+v %+v %v", a, b, err)
	}
	release()
	if _, _, _, err := r.EnterShards(ctx, "op", 1, 8, time.Second, 10); !model.IsCode(err, model.EInvalid) {
		t.Fatalf("shard outside the map: %v", err)
	}
	if err := r.Reload(parse(t, "{shards: 0-3, host: b, read_only: true}", "{shards: 4-7, host: b}")); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := r.EnterShards(ctx, "op", 5, 1, 0, 10); !model.IsCode(err, model.EMoving) {
		t.Fatalf("no window: %v", err)
	}
	if r.Buffer().Waiting() != 0 {
		t.Fatalf("%d still counted as waiting", r.Buffer().Waiting())
	}
}
