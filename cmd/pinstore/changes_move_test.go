package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/changes"
	"github.com/pinstore/pinstore/idcodec"
)

// TestChangeStreamAcrossMove follows the stream while a shard with a
// board's pins moves to the other host (move-shards, run to its finish)
// and writers keep creating and editing pins before, during (copy,
// catch-up) and after the move. A consumer restarted from its tokens
// again and again runs through it, and two others start after the move
// from tokens taken before it: from the first token, and from the last
// one the running consumer had acknowledged before the move began. Each
// tells every acknowledged version, per object in ascending order
// (repeats aside, recognised by their key), and no object version or list
// entry twice under different keys: the move's copy of unchanged data
// tells nothing.
func TestChangeStreamAcrossMove(t *testing.T) {
	f := startReplFleet(t, nil, 0, 0)
	for _, h := range f.hosts {
		// A move's triggers, created by a user without SUPER on a host
		// with a binary log, need this (docs/changes.md).
		h.master.Exec(t, "SET GLOBAL log_bin_trust_function_creators = ON")
	}
	s := startServerEnv(t, f.env)
	cf := &changeFleet{server: s, env: f.env}
	c, stopConsumer, _, _ := startConsumer(t, f.env)

	user := s.create("/v1/users", map[string]any{"username": "mover"})
	board := s.create("/v1/boards", map[string]any{"owner_id": user.ID, "name": "b"})
	bid, _ := strconv.ParseUint(board.ID, 10, 64)
	shard := int(idcodec.ShardOf(bid))
	from, to := "a", "b"
	if shard >= e2eShards/2 {
		from, to = "b", "a"
	}

	w := newPinWriter(cf, board.ID)
	l, write := w.l, w.write
	n := 0
	for ; n < 20; n++ {
		write(n)
	}
	var before []changes.Event
	waitFor(t, 30*time.Second, "the pins before the move told", func() bool {
		before = c.snapshot()
		return len(told(before)) >= len(l.versions)
	})
	tokenBefore := before[len(before)-1].Token

	// Writers go on through the move.
	var moving atomic.Bool
	moving.Store(true)
	wrote := make(chan int)
	go func() {
		i := n
		for ; moving.Load() && i < n+2000; i++ {
			write(i)
		}
		wrote <- i
	}()
	out, err := runCmd(t, f.env, "move-shards", "--range", fmt.Sprintf("%d-%d", shard, shard), "--to", to, "--settle", "2s", "--finish")
	moving.Store(false)
	n = <-wrote
	if err != nil {
		t.Fatalf("move-shards: %v\n%s", err, out)
	}
	t.Logf("moved shard %d from %s to %s with %d pins written before and during it", shard, from, to, n)
	for i := n; i < n+20; i++ {
		write(i)
	}
	last := s.create("/v1/pins", map[string]any{"board_id": board.ID, "description": "last"})
	l.object(last.ID, last.Version, ackedDoc{kind: changes.Created, description: "last"})

	hasLast := func(evs []changes.Event) bool {
		return slices.ContainsFunc(evs, func(e changes.Event) bool { return e.Kind == changes.Created && idStr(e.ID) == last.ID })
	}
	waitFor(t, 60*time.Second, "the running consumer to tell the last pin", func() bool { return hasLast(c.snapshot()) })
	stopConsumer()
	check := func(name string, evs []changes.Event) {
		t.Helper()
		hosts := map[string]bool{}
		for _, e := range evs {
			if e.Shard == shard {
				hosts[e.Host] = true
			}
		}
		if !hosts[from] || !hosts[to] {
			t.Errorf("%s: shard %d's events came from hosts %v, want both %s and %s", name, shard, hosts, from, to)
		}
		checkMoveStream(t, name, evs, l, board.ID)
	}
	check("running consumer", c.snapshot())
	if c.restarts < 2 {
		t.Errorf("the consumer restarted %d times, want at least 2", c.restarts)
	}
	check("from the first token", readChanges(t, f.env, c.first, hasLast))
	// A consumer offline during the whole move: it had acknowledged
	// tokenBefore, and everything after it comes.
	evs := readChanges(t, f.env, tokenBefore, hasLast)
	checkMoveStream(t, "from the token before the move", append(append([]changes.Event(nil), before...), evs...), l, board.ID)
}

// told is the object versions evs tell, as "id vN".
func told(evs []changes.Event) map[string]bool {
	out := map[string]bool{}
	for _, e := range evs {
		if e.IsObject() {
			out[fmt.Sprintf("%s v%d", idStr(e.ID), e.Version)] = true
		}
	}
	return out
}

// checkMoveStream checks what a consumer was told against the ledger:
// every acknowledged version and entry told, each with its document;
// repeats of a key identical; per object, versions ascending once repeats
// are set aside; and no object version or list entry told under two keys.
func checkMoveStream(t *testing.T, name string, evs []changes.Event, l *changeLedger, board string) {
	t.Helper()
	byKey := map[string]changes.Event{}
	keyOf := map[string]string{} // "id vN" or "list from->to" → the key that told it
	last := map[string]int64{}
	for _, e := range evs {
		if prev, ok := byKey[e.Key]; ok {
			if prev.ID != e.ID || prev.Version != e.Version || prev.Kind != e.Kind || prev.To != e.To {
				t.Errorf("%s: key %s told %v and then %v", name, e.Key, prev, e)
			}
			continue
		}
		byKey[e.Key] = e
		what := ""
		switch {
		case e.IsObject():
			id := idStr(e.ID)
			what = fmt.Sprintf("%s v%d", id, e.Version)
			if v, ok := last[id]; ok && e.Version <= v {
				t.Errorf("%s: object %s version %d (%s) after version %d", name, id, e.Version, e.Key, v)
			}
			last[id] = e.Version
			if d, ok := l.versions[id][e.Version]; ok && e.Kind != changes.Deleted {
				var doc struct {
					Description string `json:"description"`
				}
				_ = json.Unmarshal(e.Doc, &doc)
				if doc.Description != d.description {
					t.Errorf("%s: %s told description %q, acknowledged %q", name, what, doc.Description, d.description)
				}
			}
		case e.Kind == changes.Added:
			what = e.List + " " + idStr(e.From) + "->" + idStr(e.To)
		}
		if what == "" {
			continue
		}
		if k, ok := keyOf[what]; ok {
			t.Errorf("%s: %s told under two keys, %s and %s (a copy told as a change?)", name, what, k, e.Key)
		}
		keyOf[what] = e.Key
	}
	for id, vs := range l.versions {
		for v := range vs {
			if _, ok := keyOf[fmt.Sprintf("%s v%d", id, v)]; !ok {
				t.Errorf("%s: acknowledged %s v%d never told", name, id, v)
			}
		}
	}
	for entry := range l.entries {
		if _, ok := keyOf[entry]; !ok {
			t.Errorf("%s: acknowledged entry %s never told", name, entry)
		}
	}
}

// pinWriter creates pins on a board and edits older ones, recording what
// was acknowledged in its ledger; a write refused (held by a move beyond
// the server's buffer) is not acknowledged and not recorded.
type pinWriter struct {
	cf    *changeFleet
	board string
	l     *changeLedger
	mu    sync.Mutex
	pins  []object
}

func newPinWriter(cf *changeFleet, board string) *pinWriter {
	return &pinWriter{cf: cf, board: board, l: &changeLedger{versions: map[string]map[int64]ackedDoc{}, entries: map[string]bool{}}}
}

func (w *pinWriter) write(i int) {
	_, p, err := w.cf.call("POST", "/v1/pins", map[string]any{"board_id": w.board, "description": fmt.Sprintf("p%d", i)}, fmt.Sprintf("mv%d", i))
	if err != nil {
		return
	}
	w.l.object(p.ID, p.Version, ackedDoc{kind: changes.Created, description: fmt.Sprintf("p%d", i)})
	w.l.entry("board_pins", w.board, p.ID)
	w.mu.Lock()
	w.pins = append(w.pins, p)
	old := w.pins[len(w.pins)/2] // edit an older pin
	w.mu.Unlock()
	desc := fmt.Sprintf("e%d", i)
	if _, e, err := w.cf.call("PATCH", "/v1/pins/"+old.ID, map[string]any{"description": desc}, ""); err == nil {
		w.l.object(old.ID, e.Version, ackedDoc{kind: changes.Updated, description: desc})
	}
}

// during runs the writer from pin number from while fn runs, and returns
// fn's error and the next pin number.
func (w *pinWriter) during(from int, fn func() error) (int, error) {
	var moving atomic.Bool
	moving.Store(true)
	wrote := make(chan int)
	go func() {
		i := from
		for ; moving.Load() && i < from+2000; i++ {
			w.write(i)
		}
		wrote <- i
	}()
	err := fn()
	moving.Store(false)
	return <-wrote, err
}

// TestChangeStreamMoveToEmptyHostAndBack moves a shard to a host that
// held no shards when the stream started, with writers running, and then
// reverts the move: the stream reads the empty host from its start, and
// both directions tell every acknowledged version once (repeats aside),
// in order per object, with nothing told for the copies.
func TestChangeStreamMoveToEmptyHostAndBack(t *testing.T) {
	f := startReplFleet(t, nil, 0, 0)
	for _, h := range f.hosts {
		h.master.Exec(t, "SET GLOBAL log_bin_trust_function_creators = ON")
	}
	half := fmt.Sprintf("%d-%d", e2eShards/2, e2eShards-1)
	if out, err := runCmd(t, f.env, "move-shards", "--range", half, "--to", "a", "--settle", "500ms", "--finish"); err != nil {
		t.Fatalf("emptying host b: %v\n%s", err, out)
	}
	s := startServerEnv(t, f.env)
	cf := &changeFleet{server: s, env: f.env}
	c, stopConsumer, _, _ := startConsumer(t, f.env)
	user := s.create("/v1/users", map[string]any{"username": "empty"})
	board := s.create("/v1/boards", map[string]any{"owner_id": user.ID, "name": "b"})
	bid, _ := strconv.ParseUint(board.ID, 10, 64)
	shard := int(idcodec.ShardOf(bid))
	rng := fmt.Sprintf("%d-%d", shard, shard)
	w := newPinWriter(cf, board.ID)
	n := 0
	for ; n < 10; n++ {
		w.write(n)
	}
	n, err := w.during(n, func() error {
		out, err := runCmd(t, f.env, "move-shards", "--range", rng, "--to", "b", "--settle", "2s")
		if err != nil {
			return fmt.Errorf("move: %v\n%s", err, out)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := n; i < n+10; i++ {
		w.write(i)
	}
	n += 10
	n, err = w.during(n, func() error {
		out, err := runCmd(t, f.env, "move-shards", "--range", rng, "--to", "b", "--settle", "2s", "--revert")
		if err != nil {
			return fmt.Errorf("revert: %v\n%s", err, out)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := n; i < n+10; i++ {
		w.write(i)
	}
	last := s.create("/v1/pins", map[string]any{"board_id": board.ID, "description": "last"})
	w.l.object(last.ID, last.Version, ackedDoc{kind: changes.Created, description: "last"})
	hasLast := func(evs []changes.Event) bool {
		return slices.ContainsFunc(evs, func(e changes.Event) bool { return e.Kind == changes.Created && idStr(e.ID) == last.ID })
	}
	waitFor(t, 60*time.Second, "the running consumer to tell the last pin", func() bool { return hasLast(c.snapshot()) })
	stopConsumer()
	for name, evs := range map[string][]changes.Event{
		"running consumer":     c.snapshot(),
		"from the first token": readChanges(t, f.env, c.first, hasLast),
	} {
		var onB bool
		for _, e := range evs {
			onB = onB || e.Shard == shard && e.Host == "b"
		}
		if !onB {
			t.Errorf("%s: no event of shard %d from host b, where it lived between the move and the revert", name, shard)
		}
		checkMoveStream(t, name, evs, w.l, board.ID)
	}
}
