package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// setLanes lets at most n point-read statements out to each host.
func setLanes(s *Store, n int) {
	for _, h := range s.topo.Load().hosts {
		h.reads.mu.Lock()
		h.reads.lanes = n
		h.reads.mu.Unlock()
	}
}

// Reads that queue behind a busy lane go out together, and each reader
// gets exactly what a read of its own returns: objects of every type on
// every shard, lists with their counts, a deleted pin, missing ids.
func TestPointReadsBatchedAnswerAsAlone(t *testing.T) {
	s, _ := openTest(t)
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

	setLanes(s, 1)
	reads0, stmts0 := testutil.ToFloat64(s.readStats.reads), testutil.ToFloat64(s.readStats.statements)
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
	n, stmts := testutil.ToFloat64(s.readStats.reads)-reads0, testutil.ToFloat64(s.readStats.statements)-stmts0
	// Every Get and List is one point read; the type mismatch never reaches MySQL.
	if wantN := float64(rounds * (len(reads) - 1)); n != wantN {
		t.Errorf("%v point reads, want %v", n, wantN)
	}
	if n/stmts < 2 {
		t.Errorf("%v reads in %v statements: not batched", n, stmts)
	}
	t.Logf("%v reads in %v statements", n, stmts)
}

// A batch whose statement MySQL refuses (here a shard's table is gone) is
// read again row by row: only the reads on that shard fail.
func TestPointBatchIsolatesABrokenShard(t *testing.T) {
	s, m := openTest(t)
	var good, bad uint64
	for i := 0; (good == 0 || bad == 0) && i < 200; i++ {
		switch u := mustUser(t, s, "x"); idcodec.ShardOf(u) {
		case 2:
			bad = u
		case 5:
			good = u
		}
	}
	if good == 0 || bad == 0 {
		t.Fatal("no users on shards 2 and 5")
	}
	if _, err := s.topo.Load().hosts[0].db.Exec("DROP TABLE " + m.DBName(2) + ".users"); err != nil {
		t.Fatal(err)
	}
	read := func(id uint64) *pointRead {
		sh, local, err := s.resolve("test", id, idcodec.TypeUser)
		if err != nil {
			t.Fatal(err)
		}
		return &pointRead{sh: sh, typ: idcodec.TypeUser, local: local, done: make(chan struct{}, 1)}
	}
	g, b := read(good), read(bad)
	s.runPointBatch([]*pointRead{g, b}, nil)
	var myErr *mysql.MySQLError
	if g.err != nil || g.r.version != 1 || !bytes.Contains(g.r.doc, []byte(`"username":"x"`)) {
		t.Fatalf("read on the healthy shard: %+v, %v", g.r, g.err)
	}
	if !errors.As(b.err, &myErr) || myErr.Number != 1146 {
		t.Fatalf("read on the broken shard: %v", b.err)
	}
	if _, err := s.Get(ctx, bad, idcodec.TypeUser); !model.IsCode(err, model.EUnavailable) {
		t.Fatalf("Get on the broken shard: %v", err)
	}
}

// A queued read whose caller gives up leaves the queue at once, and the
// lane works afterwards.
func TestPointReadLeavesTheQueueWhenCancelled(t *testing.T) {
	s, _ := openTest(t)
	u := mustUser(t, s, "x")
	sh, _, err := s.resolve("test", u, idcodec.TypeUser)
	if err != nil {
		t.Fatal(err)
	}
	q := sh.host.reads
	q.mu.Lock()
	q.busy = q.lanes // every lane taken by statements that never end
	q.mu.Unlock()
	c, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := s.Get(c, u, idcodec.TypeUser); !model.IsCode(err, model.EUnavailable) {
		t.Fatalf("Get with every lane busy: %v", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("the cancelled read returned after %v", el)
	}
	q.mu.Lock()
	left := len(q.queue)
	q.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d reads left in the queue", left)
	}
	s.nextPointBatch(q) // one of the lanes comes free
	if _, err := s.Get(ctx, u, idcodec.TypeUser); err != nil {
		t.Fatal(err)
	}
	q.mu.Lock()
	busy := q.busy
	q.mu.Unlock()
	if busy != q.lanes-1 {
		t.Fatalf("%d lanes busy, want %d", busy, q.lanes-1)
	}
}
