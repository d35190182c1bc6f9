package store

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// Reads that queue behind a busy lane go out together, and each reader
// gets exactly what a read of its own returns: objects of every type on
// every shard, lists with their counts, a deleted pin, missing ids.
func TestPointReadsBatchedAnswerAsAlone(t *testing.T) {
	// One lane per host: reads alone while they come one at a time, and
	// batched as soon as two overlap.
	// Without the object cache, which would answer most reads itself.
	s, _ := openTestWith(t, func(c *Config) { c.PointReadLanes = 1; c.ObjectCache.Disabled = true })
	var users, boards, pins []uint64
	for i := 0; i < 24; i++ {
		u := mustUser(t, s, fmt.Sprintf("u%d", i))
		b := mustBoard(t, s, u)
		users, boards = append(users, u), append(boards, b)
		for j := 0; j < i%3+1; j++ {
			pins = append(pins, mustPin(t, s, b))
		}
	}
	for i := 1; i < len(users); i++ {
		if err := s.AddMapping(ctx, model.UserFollowing, users[i], users[0]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, pins[3], idcodec.TypePin, 0); err != nil {
		t.Fatal(err)
	}

	type read struct {
		id   uint64
		typ  idcodec.Type
		list model.Mapping // 0: Get; else List of this mapping from id
	}
	var reads []read
	for _, id := range users {
		reads = append(reads, read{id, idcodec.TypeUser, 0}, read{id, 0, model.UserFollowers})
	}
	for _, id := range boards {
		reads = append(reads, read{id, idcodec.TypeBoard, 0}, read{id, 0, model.BoardPins})
	}
	for _, id := range pins {
		reads = append(reads, read{id, idcodec.TypePin, 0})
	}
	reads = append(reads,
		read{pins[0] + 1000, idcodec.TypePin, 0}, // no such pin
		read{pins[1], idcodec.TypeBoard, 0},      // a pin's id asked for as a board
		read{users[5] + 1000, 0, model.UserFollowers},
	)
	answer := func(r read) string {
		if r.list != 0 {
			l, err := s.List(ctx, r.list, r.id, model.Page{Limit: 5})
			if err != nil {
				return "error " + model.ErrorCode(err)
			}
			return fmt.Sprintf("count %d entries %v", l.Count, ids(l))
		}
		o, err := s.Get(ctx, r.id, r.typ)
		if err != nil {
			return "error " + model.ErrorCode(err)
		}
		return fmt.Sprintf("%d %d %d %s %s %s", o.ID, o.Type, o.Version, o.CreatedAt, o.UpdatedAt, o.Doc)
	}
	want := make([]string, len(reads))
	for i, r := range reads {
		want[i] = answer(r) // one at a time: every read alone
	}
	if want[len(want)-3] != "error "+string(model.ENotFound) || !bytes.Contains([]byte(want[0]), []byte(`"username":"u0"`)) {
		t.Fatalf("reads alone: %q … %q", want[0], want[len(want)-3])
	}

	reads0, stmts0 := testutil.ToFloat64(s.readStats.Jobs), testutil.ToFloat64(s.readStats.Statements)
	const rounds = 20
	var wg sync.WaitGroup
	errs := make(chan string, rounds*len(reads))
	for range rounds {
		for i, r := range reads {
			wg.Go(func() {
				if got := answer(r); got != want[i] {
					errs <- fmt.Sprintf("read %d (%d as %v/%v): %q, alone %q", i, r.id, r.typ, r.list, got, want[i])
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	n, stmts := testutil.ToFloat64(s.readStats.Jobs)-reads0, testutil.ToFloat64(s.readStats.Statements)-stmts0
	// Every Get and List is one point read; the type mismatch never reaches MySQL.
	if wantN := float64(rounds * (len(reads) - 1)); n != wantN {
		t.Errorf("%v point reads, want %v", n, wantN)
	}
	if n/stmts < 2 {
		t.Errorf("%v reads in %v statements: not batched", n, stmts)
	}
	t.Logf("%v reads in %v statements", n, stmts)
}
