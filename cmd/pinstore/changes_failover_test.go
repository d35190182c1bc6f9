package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/changes"
)

// TestChangeStreamAcrossFailover follows a host's stream while its master
// fails over to its replica: the running consumer goes on from the
// promoted replica, and a token taken before the failover resumes there,
// with no event lost and GTIDs that go on ascending.
func TestChangeStreamAcrossFailover(t *testing.T) {
	f := startReplFleet(t, nil, 1)
	h := f.hosts[0]
	s := startServerEnv(t, f.env)
	c, _, _, _ := startConsumer(t, f.env)

	user := s.create("/v1/users", map[string]any{"username": "cf"})
	board := s.create("/v1/boards", map[string]any{"owner_id": user.ID, "name": "b"})
	var before, after []string
	for range 5 {
		before = append(before, s.create("/v1/pins", map[string]any{"board_id": board.ID}).ID)
	}
	created := func(evs []changes.Event) []string {
		var out []string
		for _, e := range evs {
			if e.Kind == changes.Created && e.Type == "pin" && !slices.Contains(out, idStr(e.ID)) {
				out = append(out, idStr(e.ID))
			}
		}
		return out
	}
	var told []changes.Event
	waitFor(t, 30*time.Second, "the pins before the failover told", func() bool {
		told = c.snapshot()
		return len(created(told)) == len(before)
	})
	token := told[len(told)-1].Token // acknowledged before the failover

	if out, err := runCmd(t, f.env, "failover", "--host", "a", "--to", h.replicas[0].Addr()); err != nil {
		t.Fatalf("failover: %v\n%s", err, out)
	}
	waitFor(t, 10*time.Second, "the server to route by the new map", func() bool {
		return shardMapOf(t, s).Hosts[0].Addr == taddr(h.replicas[0])
	})
	for range 5 {
		after = append(after, s.create("/v1/pins", map[string]any{"board_id": board.ID}).ID)
	}
	all := append(append([]string(nil), before...), after...)
	waitFor(t, 30*time.Second, "the running consumer to tell the pins after the failover", func() bool {
		return len(created(c.snapshot())) == len(all)
	})
	if got := created(c.snapshot()); !slices.Equal(got, all) {
		t.Errorf("the running consumer told pins %v, want %v", got, all)
	}
	checkAscending(t, c.snapshot())

	// From the token taken before the failover, on the promoted replica.
	// Events the old master committed after the token (a pin's list
	// entries, its counts) may come first, under its own server id; every
	// event after them is the promoted replica's.
	evs := readChanges(t, f.env, token, func(evs []changes.Event) bool {
		return len(created(evs)) == len(after)
	})
	if got := created(evs); !slices.Equal(got, after) {
		t.Errorf("from the token before the failover: pins %v, want %v", got, after)
	}
	checkAscending(t, append(told, evs...))
	promoted := ""
	for _, e := range evs {
		server := strings.Split(e.GTID, "-")[1]
		switch {
		case promoted == "" && server != "1":
			promoted = server
		case promoted != "" && server != promoted:
			t.Errorf("event %s of server %s after the promoted replica's (server %s) began", e.Key, server, promoted)
		}
		if e.Kind == changes.Created && e.Type == "pin" && slices.Contains(after, idStr(e.ID)) && server == "1" {
			t.Errorf("pin %s created after the failover carries the old master's GTID %s", idStr(e.ID), e.GTID)
		}
	}
	if promoted == "" {
		t.Error("no event from the promoted replica after the token")
	}
}

// readChanges runs `pinstore changes --after token` until the events it
// has told (progress lines aside) are enough and returns them.
func readChanges(t *testing.T, env map[string]string, token string, enough func([]changes.Event) bool) []changes.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"changes", "--after", token}, func(k string) string { return env[k] }, pw, &stderr)
		pw.Close()
		done <- err
	}()
	var out []changes.Event
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for !enough(out) && sc.Scan() {
		var e changes.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		if e.Kind != changes.Progress {
			out = append(out, e)
		}
	}
	cancel()
	go io.Copy(io.Discard, pr)
	if err := <-done; err != nil {
		t.Fatalf("pinstore changes: %v\n%s", err, stderr.String())
	}
	if !enough(out) {
		t.Fatalf("pinstore changes told %d events in 30s, not enough\n%s", len(out), stderr.String())
	}
	return out
}

// checkAscending checks that, repeats aside, each shard's events come in
// ascending GTID sequence and index.
func checkAscending(t *testing.T, evs []changes.Event) {
	t.Helper()
	type place struct{ seq, index uint64 }
	at := map[int]place{}
	seen := map[string]bool{}
	for _, e := range evs {
		if seen[e.Key] {
			continue
		}
		seen[e.Key] = true
		parts := strings.Split(e.GTID, "-")
		seq, _ := strconv.ParseUint(parts[len(parts)-1], 10, 64)
		p := place{seq, uint64(e.Index)}
		if prev, ok := at[e.Shard]; ok && (p.seq < prev.seq || p.seq == prev.seq && p.index <= prev.index) {
			t.Errorf("shard %d: %s after sequence %d index %d", e.Shard, e.Key, prev.seq, prev.index)
		}
		at[e.Shard] = p
	}
}
