package topology

import (
	"context"
	"testing"
	"time"

	"github.com/pinstore/pinstore/model"
)

// TestLease: without a lease nothing is refused; with one, a write enters
// only while it holds, waits for its renewal in the write buffer, and is
// EUnavailable after the window; a write that entered before a lapse is
// not acknowledged even once the lease is renewed.
func TestLease(t *testing.T) {
	r, err := New(parse(t, "{shards: 0-7, host: a}"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()

	// No lease (a map file): writes enter and are acknowledged.
	_, release, err := r.EnterShard(ctx, "op", 1, 0, 10)
	if err != nil {
		t.Fatalf("no lease: %v", err)
	}
	release()
	if err := r.Acknowledge("op", time.Now().Add(-time.Hour)); err != nil {
		t.Fatalf("no lease, acknowledge: %v", err)
	}

	// A lease that holds.
	r.SetLease(time.Now().Add(time.Hour))
	entered := time.Now()
	_, release, err = r.EnterShard(ctx, "op", 1, 0, 10)
	if err != nil {
		t.Fatalf("lease held: %v", err)
	}
	release()
	if err := r.Acknowledge("op", entered); err != nil {
		t.Fatalf("lease held, acknowledge: %v", err)
	}

	// Lapsed: no write enters without a window; with one it waits for the
	// renewal, then enters.
	r.SetLease(time.Now().Add(-time.Millisecond))
	if _, _, err := r.EnterShard(ctx, "op", 1, 0, 10); !model.IsCode(err, model.EUnavailable) {
		t.Fatalf("lapsed, no window: %v", err)
	}
	begin := time.Now()
	if _, _, err := r.EnterShard(ctx, "op", 1, 150*time.Millisecond, 10); !model.IsCode(err, model.EUnavailable) || time.Since(begin) < 150*time.Millisecond {
		t.Fatalf("lapsed, window: %v after %v", err, time.Since(begin))
	}
	if err := r.Acknowledge("op", entered); !model.IsCode(err, model.EUnavailable) {
		t.Fatalf("lapsed, acknowledge: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, release, err := r.EnterShard(ctx, "op", 1, 10*time.Second, 10)
		if release != nil {
			release()
		}
		done <- err
	}()
	for r.Buffer().Waiting() != 1 {
		time.Sleep(time.Millisecond)
	}
	r.SetLease(time.Now().Add(time.Hour))
	if err := <-done; err != nil {
		t.Fatalf("waited for the renewal: %v", err)
	}

	// Renewed, but the write entered before the lapse ended: in doubt.
	if err := r.Acknowledge("op", entered); !model.IsCode(err, model.EUnavailable) {
		t.Fatalf("entered before the lapse, acknowledged after the renewal: %v", err)
	}
	if err := r.Acknowledge("op", time.Now()); err != nil {
		t.Fatalf("entered after the renewal: %v", err)
	}
}
