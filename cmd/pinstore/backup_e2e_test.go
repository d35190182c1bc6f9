package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/backup"
	"github.com/pinstore/pinstore/idcodec"
)

// ledger is what a client was told: every write acknowledged, as the
// state it leaves (live pins and their descriptions, likes, follows).
type ledger struct {
	mu      sync.Mutex
	s       *server
	rng     *rand.Rand
	users   []object
	boards  map[string]string // user → board
	pins    map[string]string // live pin → description
	ever    map[string]bool   // every pin ever created
	likes   map[[2]string]bool
	follows map[[2]string]bool
	liked   map[[2]string]bool // every like ever made
	n       int
}

// state is a copy of the ledger's state at one moment.
type state struct {
	pins           map[string]string
	likes, follows map[[2]string]bool
}

func (l *ledger) snapshot() state {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := state{pins: map[string]string{}, likes: map[[2]string]bool{}, follows: map[[2]string]bool{}}
	for k, v := range l.pins {
		st.pins[k] = v
	}
	for k := range l.likes {
		st.likes[k] = true
	}
	for k := range l.follows {
		st.follows[k] = true
	}
	return st
}

// step makes one write of a rotating mix — a keyed create, an edit, a
// delete, a like, a follow — and records it once acknowledged. It fails
// the test with Errorf only, so a goroutine may call it.
func (l *ledger) step() {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, s := l.s.t, l.s
	l.n++
	i := l.n
	u := l.users[l.rng.IntN(len(l.users))]
	live := make([]string, 0, len(l.pins))
	for id := range l.pins {
		live = append(live, id)
	}
	switch {
	case i%5 == 3 && len(live) > 4: // edit
		id := live[l.rng.IntN(len(live))]
		desc := fmt.Sprintf("edited %d", i)
		if r := s.req(http.MethodPatch, "/v1/pins/"+id, map[string]any{"description": desc}); r.Status != http.StatusOK {
			t.Errorf("edit pin %s: %d %s", id, r.Status, truncate(r.Body))
			return
		}
		l.pins[id] = desc
	case i%7 == 5 && len(live) > 8: // delete
		id := live[l.rng.IntN(len(live))]
		if r := s.req(http.MethodDelete, "/v1/pins/"+id, nil); r.Status != http.StatusNoContent {
			t.Errorf("delete pin %s: %d %s", id, r.Status, truncate(r.Body))
			return
		}
		delete(l.pins, id)
		for k := range l.likes {
			if k[1] == id {
				delete(l.likes, k)
			}
		}
	case i%4 == 2 && len(live) > 0: // like
		id := live[l.rng.IntN(len(live))]
		if r := s.req(http.MethodPut, "/v1/users/"+u.ID+"/likes/"+id, nil); r.Status != http.StatusNoContent {
			t.Errorf("like %s: %d %s", id, r.Status, truncate(r.Body))
			return
		}
		l.likes[[2]string{u.ID, id}] = true
		l.liked[[2]string{u.ID, id}] = true
	case i%6 == 1: // follow
		v := l.users[l.rng.IntN(len(l.users))]
		if v.ID == u.ID {
			return
		}
		if r := s.req(http.MethodPut, "/v1/users/"+u.ID+"/following/"+v.ID, nil); r.Status != http.StatusNoContent {
			t.Errorf("follow: %d %s", r.Status, truncate(r.Body))
			return
		}
		l.follows[[2]string{u.ID, v.ID}] = true
	default: // a keyed create
		desc := fmt.Sprintf("pin %d", i)
		r := s.req(http.MethodPost, "/v1/pins", map[string]any{"board_id": l.boards[u.ID], "description": desc},
			keyHdr(fmt.Sprintf("bk-%d-%d", i, l.rng.Int64()))...)
		if r.Status != http.StatusCreated {
			t.Errorf("create pin: %d %s", r.Status, truncate(r.Body))
			return
		}
		var o object
		if err := json.Unmarshal(r.Body, &o); err != nil {
			t.Errorf("create pin: %v", err)
			return
		}
		l.pins[o.ID], l.ever[o.ID] = desc, true
	}
}

// requireState checks the server holds exactly st: every pin live at the
// time with its content, no other pin ever created; every like and follow
// of the time, no other.
func (l *ledger) requireState(st state) {
	t, s := l.s.t, l.s
	t.Helper()
	for id := range l.ever {
		want, live := st.pins[id]
		r := s.req(http.MethodGet, "/v1/pins/"+id, nil)
		switch {
		case live && r.Status != http.StatusOK:
			t.Errorf("pin %s (shard %d), live at the restore's time, answers %d", id, shardOf(t, id), r.Status)
		case live:
			var o object
			r.decode(t, &o)
			if o.Description != want {
				t.Errorf("pin %s (shard %d): description %q, acknowledged %q", id, shardOf(t, id), o.Description, want)
			}
		case r.Status != http.StatusNotFound:
			t.Errorf("pin %s (shard %d), not live at the restore's time, answers %d", id, shardOf(t, id), r.Status)
		}
	}
	for k := range l.liked {
		r := s.req(http.MethodGet, "/v1/users/"+k[0]+"/likes/"+k[1], nil)
		if want := map[bool]int{true: http.StatusNoContent, false: http.StatusNotFound}[st.likes[k]]; r.Status != want {
			t.Errorf("like %s → %s: %d, want %d", k[0], k[1], r.Status, want)
		}
	}
	for _, u := range l.users {
		n := 0
		for k := range st.follows {
			if k[0] == u.ID {
				n++
			}
		}
		ids, count := s.all("/v1/users/"+u.ID+"/following", 50)
		if len(ids) != n || count != int64(n) {
			t.Errorf("user %s follows %d (count %d); at the restore's time %d", u.ID, len(ids), count, n)
		}
		for _, v := range ids {
			if !st.follows[[2]string{u.ID, v}] {
				t.Errorf("user %s follows %s, not followed at the restore's time", u.ID, v)
			}
		}
	}
}

func shardOf(t *testing.T, id string) int {
	n, err := strconv.ParseUint(id, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return int(idcodec.ShardOf(n))
}

// TestBackupRestoreToTimeE2E: two hosts, each a master and a replica
// (separate mariadbd processes), the real server, writes through the API
// recorded in a client ledger. Each host is backed up (from its replica)
// while writes go on, one backup is verified, more writes, the time T
// noted, more writes, then two accidents: a shard database dropped on one
// master, every pin of a shard overwritten by hand on the other. The
// binary logs are copied and both hosts restored to T and loaded back:
// every write acknowledged before T is there with its content, none after
// T, and repair --dry-run finds nothing to fix.
func TestBackupRestoreToTimeE2E(t *testing.T) {
	f := startReplFleet(t, nil, 1, 1)
	s := startServerEnv(t, f.env)
	l := newLedger(s, 1, "bk")

	// Backups, with writes going on.
	dir := t.TempDir()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				l.step()
			}
		}
	})
	for _, h := range f.hosts {
		out, err := runCmd(t, f.env, "backup", "--host", h.name, "--to", filepath.Join(dir, "backup-"+h.name))
		if err != nil {
			close(stop)
			t.Fatalf("backup %s: %v\n%s", h.name, err, out)
		}
		if !strings.Contains(out, "copying replica "+h.replicas[0].Addr()) || !strings.Contains(out, "not yet verified") {
			t.Errorf("backup %s output:\n%s", h.name, out)
		}
	}
	close(stop)
	wg.Wait()
	if out, err := runCmd(t, f.env, "backup", "verify", filepath.Join(dir, "backup-a")); err != nil || !strings.Contains(out, "is good") {
		t.Fatalf("backup verify: %v\n%s", err, out)
	}
	if m, err := backup.ReadManifest(filepath.Join(dir, "backup-a")); err != nil || m.Verified == nil || !m.Verified.OK || m.SourceRole != "replica" {
		t.Fatalf("manifest after verify: %v %+v", err, m)
	}

	// More writes; T; more writes.
	for range 40 {
		l.step()
	}
	time.Sleep(2 * time.Second) // the servers' outboxes finish the pairs' second halves
	at := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(at) + 50*time.Millisecond)
	before := l.snapshot()
	atT, err := runCmd(t, f.env, "repair", "--dry-run")
	if err != nil {
		t.Fatalf("repair --dry-run at T: %v\n%s", err, atT)
	}
	for range 40 {
		l.step()
	}
	for id := range before.pins { // edits and deletes of pins that were live at T
		l.mu.Lock()
		_, still := l.pins[id]
		l.mu.Unlock()
		if still {
			s.must(http.StatusOK, http.MethodPatch, "/v1/pins/"+id, map[string]any{"description": "after T"})
			l.mu.Lock()
			l.pins[id] = "after T"
			l.mu.Unlock()
			break
		}
	}
	if got := l.snapshot(); len(got.pins) == len(before.pins) && len(got.likes) == len(before.likes) {
		t.Fatalf("the writes after T changed nothing the test can see")
	}

	// The accidents: a shard database of host a dropped; host b's pins of
	// one shard overwritten by hand.
	var dropShard, smashShard = -1, -1
	for id := range before.pins {
		switch sh := shardOf(t, id); {
		case sh < e2eShards/2 && dropShard < 0:
			dropShard = sh
		case sh >= e2eShards/2 && smashShard < 0:
			smashShard = sh
		}
	}
	if dropShard < 0 || smashShard < 0 {
		t.Fatalf("no live pin on one of the hosts: shards %d, %d", dropShard, smashShard)
	}
	f.hosts[0].master.Exec(t, fmt.Sprintf("DROP DATABASE %s%05d", f.prefix, dropShard))
	f.hosts[1].master.Exec(t, fmt.Sprintf(`UPDATE %s%05d.pins SET doc = JSON_SET(doc, '$.description', 'overwritten')`, f.prefix, smashShard))

	// The binary logs, then the restores to T, loaded into the masters
	// with the servers stopped (a server running between two hosts'
	// restores would carry one host's later state into the other's), then
	// a server started again.
	if err := s.stop(); err != nil {
		t.Fatalf("stopping the server: %v", err)
	}
	for _, h := range f.hosts {
		if out, err := runCmd(t, f.env, "binlogs", "--host", h.name, "--to", filepath.Join(dir, "binlogs-"+h.name), "--once"); err != nil {
			t.Fatalf("binlogs %s: %v\n%s", h.name, err, out)
		}
	}
	for _, h := range f.hosts {
		out, err := runCmd(t, f.env, "restore", "--backup", filepath.Join(dir, "backup-"+h.name), "--datadir", filepath.Join(dir, "restored-"+h.name),
			"--binlogs", filepath.Join(dir, "binlogs-"+h.name), "--to-time", at.UTC().Format(time.RFC3339), "--load")
		if err != nil {
			t.Fatalf("restore %s: %v\n%s", h.name, err, out)
		}
		t.Logf("restore %s:\n%s", h.name, out)
	}
	l.s = startServerEnv(t, f.env)
	l.requireState(before)

	out, err := runCmd(t, f.env, "repair", "--dry-run")
	if err != nil {
		t.Fatalf("repair --dry-run: %v\n%s", err, out)
	}
	requireNothingToRepair(t, out)
	if out != atT { // the same pairs, feed rows and users as at T
		t.Errorf("repair --dry-run at T:\n%safter the restore:\n%s", atT, out)
	}
}

// requireNothingToRepair fails unless repair --dry-run's report counts no
// broken pair, feed row or username row.
func requireNothingToRepair(t *testing.T, out string) {
	t.Helper()
	var raw map[string]any
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("repair output: %v\n%s", err, out)
	}
	var bad []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(path+"."+k, x)
			}
		case []any:
			for i, x := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), x)
			}
		case float64:
			for _, k := range []string{"dead_endpoint", "missing_inverse", "orphan_inverse", "missing", "stale", "claimed", "finished"} {
				if strings.HasSuffix(path, "."+k) && v != 0 {
					bad = append(bad, fmt.Sprintf("%s = %v", path, v))
				}
			}
		}
	}
	walk("", raw)
	if cs, _ := raw["usernames"].(map[string]any)["collisions"].([]any); len(cs) > 0 {
		bad = append(bad, fmt.Sprintf("username collisions: %v", cs))
	}
	if len(bad) > 0 {
		t.Errorf("repair --dry-run finds something to fix after the restore: %s\n%s", strings.Join(bad, "; "), out)
	}
}

// TestBackupRestoreAfterMoveE2E: host a is backed up (from its replica)
// while writes go on through the real server, then its shards 2-3 move to
// host b (move-shards, run to its finish) with more writes before and
// after, T is noted, a pin on a's remaining shards is edited after T, and
// one of those shards' databases is dropped. A restore of a's backup to T
// without --shards is refused, naming the moved range and changing
// nothing; one naming a moved shard is refused too; one naming a's
// remaining shards 0-1 loads them: every write acknowledged before T is
// back where the map now says, the edit after T is not, and the moved
// range keeps, on host b, every write made there since the move.
func TestBackupRestoreAfterMoveE2E(t *testing.T) {
	f := startReplFleet(t, nil, 1, 1)
	for _, h := range f.hosts {
		// A move's triggers, created by a user without SUPER on a host
		// with a binary log, need this (docs/changes.md).
		h.master.Exec(t, "SET GLOBAL log_bin_trust_function_creators = ON")
	}
	s := startServerEnv(t, f.env)
	l := newLedger(s, 3, "mv")
	dir := t.TempDir()
	bk := filepath.Join(dir, "backup-a")
	if out, err := runCmd(t, f.env, "backup", "--host", "a", "--to", bk); err != nil {
		t.Fatalf("backup a: %v\n%s", err, out)
	}
	for range 30 {
		l.step()
	}
	// Host a holds shards 0-3; the half without the first live pin moves.
	keep, half := "0-1", "2-3"
	for id := range l.snapshot().pins {
		if sh := shardOf(t, id); sh < e2eShards/2 {
			if sh >= e2eShards/4 {
				keep, half = half, keep
			}
			break
		}
	}
	kept := func(sh int) bool { return fmt.Sprint(sh/2*2, "-", sh/2*2+1) == keep }
	if out, err := runCmd(t, f.env, "move-shards", "--range", half, "--to", "b", "--settle", "1s", "--finish"); err != nil {
		t.Fatalf("move-shards %s: %v\n%s", half, err, out)
	}
	// More writes, until a pin on a's remaining shards is live (the one
	// that chose them may have been deleted since).
	liveKept := func() bool {
		for id := range l.snapshot().pins {
			if kept(shardOf(t, id)) {
				return true
			}
		}
		return false
	}
	for i := 0; i < 40 || !liveKept() && i < 400; i++ {
		l.step()
	}
	time.Sleep(2 * time.Second) // the servers' outboxes finish the pairs' second halves
	at := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(at) + 50*time.Millisecond)
	before := l.snapshot()

	// After T: an edit of a pin on a's remaining shards, then the accident.
	dropShard, edited := -1, ""
	for id := range before.pins {
		if sh := shardOf(t, id); kept(sh) {
			if edited == "" {
				edited = id
				s.must(http.StatusOK, http.MethodPatch, "/v1/pins/"+id, map[string]any{"description": "after T"})
			}
			if dropShard < 0 {
				dropShard = sh
			}
		}
	}
	if dropShard < 0 {
		t.Fatalf("no live pin on host a's remaining shards at T")
	}
	f.hosts[0].master.Exec(t, fmt.Sprintf("DROP DATABASE %s%05d", f.prefix, dropShard))
	if err := s.stop(); err != nil {
		t.Fatalf("stopping the server: %v", err)
	}
	bl := filepath.Join(dir, "binlogs-a")
	if out, err := runCmd(t, f.env, "binlogs", "--host", "a", "--to", bl, "--once"); err != nil {
		t.Fatalf("binlogs a: %v\n%s", err, out)
	}

	args := []string{"restore", "--backup", bk, "--binlogs", bl, "--to-time", at.UTC().Format(time.RFC3339), "--load"}
	target := filepath.Join(dir, "restored-a")
	out, err := runCmd(t, f.env, append(args, "--datadir", target)...)
	if err == nil || !strings.Contains(out+err.Error(), half+" now on host b") || !strings.Contains(out+err.Error(), "those still on host a: "+keep) {
		t.Fatalf("restore of a host whose range moved, without --shards: %v\n%s", err, out)
	}
	out, err = runCmd(t, f.env, append(args, "--datadir", target, "--shards", "0-3")...)
	if err == nil || !strings.Contains(out+err.Error(), "shard "+half[:1]+" has moved to host b") {
		t.Fatalf("restore naming a moved shard: %v\n%s", err, out)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("a refused restore created %s", target)
	}
	out, err = runCmd(t, f.env, append(args, "--datadir", target, "--shards", keep)...)
	if err != nil {
		t.Fatalf("restore of shards %s: %v\n%s", keep, err, out)
	}
	t.Logf("restore a %s:\n%s", keep, out)
	l.s = startServerEnv(t, f.env)
	l.requireState(before)
	requireNothingToRepair(t, mustRun(t, f.env, "repair", "--dry-run"))
}

func mustRun(t *testing.T, env map[string]string, args ...string) string {
	t.Helper()
	out, err := runCmd(t, env, args...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", args[0], err, out)
	}
	return out
}

// newLedger makes six users with a board each through s, then takes 60
// random steps.
func newLedger(s *server, seed uint64, name string) *ledger {
	l := &ledger{s: s, rng: rand.New(rand.NewPCG(seed, seed+1)), boards: map[string]string{}, pins: map[string]string{},
		ever: map[string]bool{}, likes: map[[2]string]bool{}, follows: map[[2]string]bool{}, liked: map[[2]string]bool{}}
	for i := range 6 {
		u := s.create("/v1/users", map[string]any{"username": fmt.Sprintf("%s%d", name, i)})
		l.users = append(l.users, u)
		l.boards[u.ID] = s.create("/v1/boards", map[string]any{"owner_id": u.ID, "name": "b"}).ID
	}
	for range 60 {
		l.step()
	}
	return l
}
