package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
)

func TestOwners(t *testing.T) {
	s, _ := openTest(t)
	a, b := mustUser(t, s, "a"), mustUser(t, s, "b")
	pa, pb := mustPin(t, s, mustBoard(t, s, a)), mustPin(t, s, mustBoard(t, s, b))
	gone := mustPin(t, s, mustBoard(t, s, a))
	if err := s.Delete(ctx, gone, idcodec.TypePin, 0); err != nil {
		t.Fatal(err)
	}
	// Written through on create: the cache already holds pa and pb.
	cached, err := s.owners.cache.Get(ctx, []uint64{pa, pb, gone})
	if err != nil || cached[0] != a || cached[1] != b || cached[2] != 0 {
		t.Fatalf("cache after create = %v, %v", cached, err)
	}
	// A miss is read through from MySQL and filled.
	if err := s.owners.cache.Delete(ctx, pb); err != nil {
		t.Fatal(err)
	}
	got, err := s.Owners(ctx, []uint64{pa, pb, gone})
	if err != nil || len(got) != 2 || got[pa] != a || got[pb] != b {
		t.Fatalf("Owners = %v, %v", got, err)
	}
	if cached, _ := s.owners.cache.Get(ctx, []uint64{pb}); cached[0] != b {
		t.Fatalf("miss not filled: %v", cached)
	}
	if _, err := s.Owners(ctx, []uint64{pa, a}); !model.IsCode(err, model.ENotFound) {
		t.Fatalf("a user id in an owner look-up: %v", err)
	}
}

func TestOwnersWithoutRedis(t *testing.T) {
	s, m := openTest(t)
	u := mustUser(t, s, "solo")
	p := mustPin(t, s, mustBoard(t, s, u))
	// A second store on the same shards whose Redis is a closed port.
	dead := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	s2, err := Open(context.Background(), Config{Map: m, CursorSecret: []byte("x"), Redis: RedisConfig{Addrs: []string{dead}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	got, err := s2.Owners(ctx, []uint64{p})
	if err != nil || got[p] != u {
		t.Fatalf("Owners with Redis down = %v, %v", got, err)
	}
	if _, err := s2.CreatePin(ctx, model.PinDoc{BoardID: model.ID(mustBoard(t, s2, u))}); err != nil {
		t.Fatalf("create with Redis down: %v", err)
	}
	ready := map[string]bool{}
	for _, h := range s2.Ready(ctx) {
		ready[h.Name] = h.OK
	}
	if ready["redis"] || !ready["mysql:h0"] {
		t.Fatalf("ready = %v", ready)
	}
}
