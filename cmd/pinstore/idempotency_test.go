package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/api"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/model"
)

// keyHdr is the headers of a request with an Idempotency-Key.
func keyHdr(key string, more ...string) []string {
	return append([]string{"Idempotency-Key", key}, more...)
}

// sameResponse fails unless b is a replay of a: same status, ETag,
// Location and body, marked replayed (a is not).
func sameResponse(t *testing.T, a, b *response) {
	t.Helper()
	if a.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("the first response is marked replayed")
	}
	if b.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the retry is not marked Idempotent-Replayed: true: %v", b.Header)
	}
	if a.Status != b.Status || !bytes.Equal(a.Body, b.Body) {
		t.Fatalf("replay differs:\nfirst %d %s\nretry %d %s", a.Status, a.Body, b.Status, b.Body)
	}
	for _, h := range []string{"ETag", "Location", "Content-Type"} {
		if a.Header.Get(h) != b.Header.Get(h) {
			t.Fatalf("replay's %s %q, first %q", h, b.Header.Get(h), a.Header.Get(h))
		}
	}
}

// boardToPin starts a server with a user and a board, and returns the
// body of a pin create on it, the test MySQL and the board's shard
// database.
func boardToPin(t *testing.T) (s *server, board object, body string, db *sqlx.DB, shard string) {
	t.Helper()
	s = startServer(t)
	owner := s.create("/v1/users", map[string]any{"username": "keyed"})
	board = s.create("/v1/boards", map[string]any{"owner_id": owner.ID, "name": "b"})
	db, shard = s.shardDB(board.ID)
	return s, board, `{"board_id":"` + board.ID + `"}`, db, shard
}

// keyHome names the database of k's home shard: the shard its hash picks
// (the store's keyHome, on e2eShards shards).
func (s *server) keyHome(k *model.Idempotency) string {
	return fmt.Sprintf("%s%05d", s.prefix, binary.BigEndian.Uint64(k.Hash[8:16])%e2eShards)
}

// shardDB opens the test MySQL and names the shard database of id.
func (s *server) shardDB(id string) (*sqlx.DB, string) {
	s.t.Helper()
	db, err := sqlx.Open("mysql", s.dsn)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { db.Close() })
	return db, fmt.Sprintf("%s%05d", s.prefix, idcodec.ShardOf(mustUint(s.t, id)))
}

func TestIdempotencyKeysE2E(t *testing.T) {
	s := startServer(t)
	owner := s.create("/v1/users", map[string]any{"username": "keyed"})
	board := s.create("/v1/boards", map[string]any{"owner_id": owner.ID, "name": "b"})
	pins := "/v1/boards/" + board.ID + "/pins"
	body := `{"board_id":"` + board.ID + `","description":"once"}`

	// Same key and body twice: one pin, the first response replayed.
	first := s.must(http.StatusCreated, "POST", "/v1/pins", body, keyHdr("k-1")...)
	again := s.must(http.StatusCreated, "POST", "/v1/pins", body, keyHdr(`"k-1"`)...) // the quoted form is the same key
	sameResponse(t, first, again)
	if n := s.count(pins); n != 1 {
		t.Fatalf("board has %d pins after a replayed create, want 1", n)
	}

	// The same key with another body, or another route, is 422 and creates nothing.
	s.fail(http.StatusUnprocessableEntity, model.EKeyReused, "POST", "/v1/pins", `{"board_id":"`+board.ID+`","description":"twice"}`, keyHdr("k-1")...)
	s.fail(http.StatusUnprocessableEntity, model.EKeyReused, "POST", "/v1/boards", map[string]any{"owner_id": owner.ID, "name": "c"}, keyHdr("k-1")...)

	// Bad keys are 400 and create nothing.
	for name, k := range map[string]string{"empty": " ", "too long": strings.Repeat("a", 256), "control": "a\tb", "not ascii": "ключ", "bad quoting": `"a"b"`} {
		p := s.fail(http.StatusBadRequest, model.EInvalid, "POST", "/v1/pins", body, keyHdr(k)...)
		if !strings.Contains(p.Detail, "Idempotency-Key") {
			t.Errorf("%s key: detail %q does not name the header", name, p.Detail)
		}
	}
	if n := s.count(pins); n != 1 {
		t.Fatalf("board has %d pins after refused requests, want 1", n)
	}
	// A read by POST makes a key its own too: k-1 is a create's, and a
	// new key read twice runs twice.
	s.fail(http.StatusUnprocessableEntity, model.EKeyReused, "POST", "/v1/pins/owners", `{"ids":[]}`, keyHdr("k-1")...)
	s.must(http.StatusOK, "POST", "/v1/pins/owners", `{"ids":[]}`, keyHdr("k-read")...)
	s.must(http.StatusOK, "POST", "/v1/pins/owners", `{"ids":[]}`, keyHdr("k-read")...)
	s.fail(http.StatusBadRequest, model.EInvalid, "POST", "/v1/pins/owners", `{"ids":[]}`, keyHdr(" ")...)

	// Keys belong to the token: another principal's k-1 is its own.
	userTok := mintUserToken(t, owner.ID, "1h")
	mine := s.must(http.StatusCreated, "POST", "/v1/pins", body, keyHdr("k-1", bearerHdr(userTok)...)...)
	svc := s.must(http.StatusCreated, "POST", "/v1/pins", body, keyHdr("k-1", bearerHdr(e2eWriteToken)...)...)
	var a, b, c object
	first.decode(t, &a)
	mine.decode(t, &b)
	svc.decode(t, &c)
	if a.ID == b.ID || a.ID == c.ID || b.ID == c.ID || mine.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("other tokens' k-1 did not create their own pins: %s %s %s", a.ID, b.ID, c.ID)
	}
	sameResponse(t, mine, s.must(http.StatusCreated, "POST", "/v1/pins", body, keyHdr("k-1", bearerHdr(userTok)...)...))
	if n := s.count(pins); n != 3 {
		t.Fatalf("board has %d pins, want 3", n)
	}

	// Every create takes a key: users, boards, comments.
	for _, c := range []struct{ path, body string }{
		{"/v1/users", `{"username":"keyed2"}`},
		{"/v1/boards", `{"owner_id":"` + owner.ID + `","name":"k"}`},
		{"/v1/pins/" + a.ID + "/comments", `{"author_id":"` + owner.ID + `","text":"hi"}`},
	} {
		r1 := s.must(http.StatusCreated, "POST", c.path, c.body, keyHdr("k-"+c.path)...)
		sameResponse(t, r1, s.must(http.StatusCreated, "POST", c.path, c.body, keyHdr("k-"+c.path)...))
	}
	if n := s.count("/v1/users/" + owner.ID + "/boards"); n != 2 {
		t.Fatalf("owner has %d boards, want 2", n)
	}
	if n := s.count("/v1/pins/" + a.ID + "/comments"); n != 1 {
		t.Fatalf("pin has %d comments, want 1", n)
	}
	s.must(http.StatusOK, "GET", "/v1/usernames/keyed2", nil)

	// A save (repin) takes a key too: its retry replays the 201, not the
	// 200 a second save without the key answers.
	saves := s.create("/v1/boards", map[string]any{"owner_id": owner.ID, "name": "saves"})
	saveBody := `{"board_id":"` + saves.ID + `"}`
	r1 := s.must(http.StatusCreated, "POST", "/v1/pins/"+a.ID+"/saves", saveBody, keyHdr("k-save")...)
	sameResponse(t, r1, s.must(http.StatusCreated, "POST", "/v1/pins/"+a.ID+"/saves", saveBody, keyHdr("k-save")...))
	s.fail(http.StatusUnprocessableEntity, model.EKeyReused, "POST", "/v1/pins/"+a.ID+"/saves", `{"board_id":"`+board.ID+`"}`, keyHdr("k-save")...)
	if n := s.count("/v1/pins/" + a.ID + "/saves"); n != 1 {
		t.Fatalf("pin has %d saves after a replayed save, want 1", n)
	}

	// A create whose first request failed keeps nothing: the retry runs.
	missing := `{"board_id":"` + fmt.Sprint(mustUint(t, board.ID)+1000) + `"}`
	s.fail(http.StatusNotFound, model.ENotFound, "POST", "/v1/pins", missing, keyHdr("k-missing")...)
	s.fail(http.StatusNotFound, model.ENotFound, "POST", "/v1/pins", missing, keyHdr("k-missing")...)

	// The server restarts: the key is still answered from the shard.
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	s2 := startServerEnv(t, map[string]string{
		"PINSTORE_DB_PREFIX": s.prefix, "PINSTORE_REDIS_PREFIX": s.prefix + "o:", "PINSTORE_OBJECT_CACHE_PREFIX": s.prefix + "c:",
	})
	sameResponse(t, first, s2.must(http.StatusCreated, "POST", "/v1/pins", body, keyHdr("k-1")...))
	if n := s2.count(pins); n != 3 {
		t.Fatalf("board has %d pins after the restart's replay, want 3", n)
	}
}

// A retry while the first request runs is 409; the first then completes
// and the retry after it is its replay.
func TestIdempotencyKeyInFlightE2E(t *testing.T) {
	s, board, body, db, shard := boardToPin(t)

	// Hold the first create in flight: the board row it reads is locked.
	tx, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec("SELECT local_id FROM "+shard+".boards WHERE local_id = ? FOR UPDATE", mustUint(t, board.ID)&(1<<36-1)); err != nil {
		t.Fatal(err)
	}
	done := make(chan *response, 1)
	go func() { done <- s.req("POST", "/v1/pins", body, keyHdr("slow")...) }()
	k := model.NewIdempotency("service:e2e-admin", "slow", "POST", "/v1/pins", []byte(body))
	home := s.keyHome(k)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := db.Get(&n, "SELECT COUNT(*) FROM "+home+".idempotency_claims WHERE state = 0 AND key_hash = ?", k.Hash[:]); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first request never claimed its key")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r := s.req("POST", "/v1/pins", body, keyHdr("slow")...)
	if r.Status != http.StatusConflict || r.problem(t).Code != model.EKeyInUse || r.Header.Get("Retry-After") == "" {
		t.Fatalf("retry in flight: %d %s %v, want 409 %s with Retry-After", r.Status, r.Body, r.Header, model.EKeyInUse)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	first := <-done
	if first.Status != http.StatusCreated {
		t.Fatalf("the first request: %d %s", first.Status, first.Body)
	}
	sameResponse(t, first, s.must(http.StatusCreated, "POST", "/v1/pins", body, keyHdr("slow")...))
	if n := s.count("/v1/boards/" + board.ID + "/pins"); n != 1 {
		t.Fatalf("board has %d pins, want 1", n)
	}
}

// A server killed between claiming a key and its create leaves the key
// pending: a retry within the lease is 409, one after it creates exactly
// one pin.
func TestIdempotencyKeyAfterDeadClaimE2E(t *testing.T) {
	s, board, body, db, shard := boardToPin(t)
	k := model.NewIdempotency("service:e2e-admin", "dead-claim", "POST", "/v1/pins", []byte(body))
	home := s.keyHome(k)
	var target int
	if _, err := fmt.Sscanf(strings.TrimPrefix(shard, s.prefix), "%d", &target); err != nil {
		t.Fatal(err)
	}
	claim := func(age string) {
		t.Helper()
		if _, err := db.Exec("REPLACE INTO "+home+".idempotency_claims (key_hash, fingerprint, state, claim, claimed_at, target, expires_at) VALUES (?, ?, 0, 42, UTC_TIMESTAMP(6) - INTERVAL "+age+", ?, UTC_TIMESTAMP(6) + INTERVAL 1 DAY)", k.Hash[:], k.Fingerprint[:], target); err != nil {
			t.Fatal(err)
		}
	}
	claim("1 SECOND") // within the lease: the claimant may be running
	s.fail(http.StatusConflict, model.EKeyInUse, "POST", "/v1/pins", body, keyHdr("dead-claim")...)
	claim("1 MINUTE") // past the lease: the claimant is dead
	first := s.must(http.StatusCreated, "POST", "/v1/pins", body, keyHdr("dead-claim")...)
	sameResponse(t, first, s.must(http.StatusCreated, "POST", "/v1/pins", body, keyHdr("dead-claim")...))
	if n := s.count("/v1/boards/" + board.ID + "/pins"); n != 1 {
		t.Fatalf("board has %d pins, want 1", n)
	}
}

// usersOnShards creates users until n of them live on n different shards.
func (s *server) usersOnShards(n int, name string) []object {
	s.t.Helper()
	var out []object
	seen := map[uint32]bool{}
	for i := 0; len(out) < n; i++ {
		if i > 200 {
			s.t.Fatalf("no %d users on distinct shards after 200 creates", n)
		}
		u := s.create("/v1/users", map[string]any{"username": fmt.Sprintf("%s%d", name, i)})
		if sh := idcodec.ShardOf(mustUint(s.t, u.ID)); !seen[sh] {
			seen[sh] = true
			out = append(out, u)
		}
	}
	return out
}

// A key first used on one POST route, then with another request on any
// POST route (every ordered pair, the same route with another body
// included), for objects on another shard than the first request's: the
// second is 422 idempotency_key_reused and creates nothing, and the first
// is still replayed.
func TestIdempotencyKeyReusedAcrossRoutesE2E(t *testing.T) {
	s := startServer(t)
	users := s.usersOnShards(2, "pair")
	type slot struct{ user, board, pin, saves string }
	var slots [2]slot
	for i, u := range users {
		b := s.create("/v1/boards", map[string]any{"owner_id": u.ID, "name": "b"}).ID
		slots[i] = slot{user: u.ID, board: b,
			pin:   s.create("/v1/pins", map[string]any{"board_id": b}).ID,
			saves: s.create("/v1/boards", map[string]any{"owner_id": u.ID, "name": "saves"}).ID}
	}
	// Each POST route's request for slot i (its objects on users[i]'s
	// shard), and how many of what it makes there exist.
	type postRoute struct {
		path  func(i int, tag string) string
		body  func(i int, tag string) string
		made  func(i int, tag string) int64
		reads bool // creates nothing: a retry runs again (200), not a replay
	}
	routes := map[string]postRoute{
		"/v1/users": {
			path: func(int, string) string { return "/v1/users" },
			body: func(i int, tag string) string { return fmt.Sprintf(`{"username":"u%s%d"}`, tag, i) },
			made: func(i int, tag string) int64 {
				if s.req(http.MethodGet, fmt.Sprintf("/v1/usernames/u%s%d", tag, i), nil).Status == http.StatusOK {
					return 1
				}
				return 0
			},
		},
		"/v1/boards": {
			path: func(int, string) string { return "/v1/boards" },
			body: func(i int, tag string) string { return `{"owner_id":"` + slots[i].user + `","name":"` + tag + `"}` },
			made: func(i int, _ string) int64 { return s.count("/v1/users/" + slots[i].user + "/boards") },
		},
		"/v1/pins": {
			path: func(int, string) string { return "/v1/pins" },
			body: func(i int, tag string) string {
				return `{"board_id":"` + slots[i].board + `","description":"` + tag + `"}`
			},
			made: func(i int, _ string) int64 { return s.count("/v1/boards/" + slots[i].board + "/pins") },
		},
		"/v1/boards/{id}/sections": {
			path: func(i int, _ string) string { return "/v1/boards/" + slots[i].board + "/sections" },
			body: func(i int, tag string) string { return `{"name":"` + tag + `"}` },
			made: func(i int, _ string) int64 { return s.count("/v1/boards/" + slots[i].board + "/sections") },
		},
		"/v1/pins/owners": {
			path:  func(int, string) string { return "/v1/pins/owners" },
			body:  func(i int, _ string) string { return `{"ids":["` + slots[i].pin + `"]}` },
			made:  func(int, string) int64 { return 0 },
			reads: true,
		},
		"/v1/pins/{id}/saves": {
			path: func(i int, _ string) string { return "/v1/pins/" + slots[1-i].pin + "/saves" },
			body: func(i int, _ string) string { return `{"board_id":"` + slots[i].saves + `"}` },
			made: func(i int, _ string) int64 { return s.count("/v1/boards/" + slots[i].saves + "/pins") },
		},
		"/v1/pins/{id}/comments": {
			path: func(i int, _ string) string { return "/v1/pins/" + slots[i].pin + "/comments" },
			body: func(i int, tag string) string { return `{"author_id":"` + slots[i].user + `","text":"` + tag + `"}` },
			made: func(i int, _ string) int64 { return s.count("/v1/pins/" + slots[i].pin + "/comments") },
		},
	}
	var posts []string
	for _, r := range api.RouteRules() {
		if r.Method != http.MethodPost {
			continue
		}
		if _, ok := routes[r.Pattern]; !ok {
			t.Fatalf("POST %s has no request in this test", r.Pattern)
		}
		posts = append(posts, r.Pattern)
	}
	n := 0
	for _, a := range posts {
		for _, b := range posts {
			n++
			tag := fmt.Sprintf("p%d", n)
			key := "pair-" + tag
			ra, rb := routes[a], routes[b]
			first := s.req(http.MethodPost, ra.path(0, tag), ra.body(0, tag), keyHdr(key)...)
			if first.Status != http.StatusCreated && first.Status != http.StatusOK {
				t.Fatalf("%s then %s: the first request: %d %s", a, b, first.Status, first.Body)
			}
			before := rb.made(1, tag)
			p := s.fail(http.StatusUnprocessableEntity, model.EKeyReused, http.MethodPost, rb.path(1, tag), rb.body(1, tag), keyHdr(key)...)
			if !strings.Contains(p.Detail, "another request") {
				t.Errorf("%s then %s: detail %q", a, b, p.Detail)
			}
			if after := rb.made(1, tag); after != before {
				t.Fatalf("%s then %s: the refused request made %d (had %d)", a, b, after, before)
			}
			again := s.req(http.MethodPost, ra.path(0, tag), ra.body(0, tag), keyHdr(key)...)
			if ra.reads {
				if again.Status != http.StatusOK || !bytes.Equal(again.Body, first.Body) {
					t.Fatalf("%s then %s: the read again: %d %s", a, b, again.Status, again.Body)
				}
				continue
			}
			sameResponse(t, first, again)
		}
	}
	t.Logf("%d ordered pairs of %d POST routes", n, len(posts))
}

// A key keeps the object its create answered with, and the answer is
// rendered from it: a retry after the object changed still answers the
// first response.
func TestIdempotencyReplayAfterAnEditE2E(t *testing.T) {
	s, board, body, _, _ := boardToPin(t)
	first := s.must(http.StatusCreated, "POST", "/v1/pins", body, keyHdr("edited")...)
	var pin object
	first.decode(t, &pin)
	s.must(http.StatusOK, "PATCH", "/v1/pins/"+pin.ID, `{"description":"changed"}`)
	sameResponse(t, first, s.must(http.StatusCreated, "POST", "/v1/pins", body, keyHdr("edited")...))
	if n := s.count("/v1/boards/" + board.ID + "/pins"); n != 1 {
		t.Fatalf("board has %d pins, want 1", n)
	}
}

// Keys written by an earlier version kept the rendered answer rather
// than the object: an upgraded server replays them as they are.
func TestIdempotencyKeyOfAnEarlierVersionE2E(t *testing.T) {
	s, board, body, db, shard := boardToPin(t)
	first := s.must(http.StatusCreated, "POST", "/v1/pins", body)
	var pin object
	first.decode(t, &pin)
	k := model.NewIdempotency("service:e2e-admin", "earlier", "POST", "/v1/pins", []byte(body))
	var target int
	if _, err := fmt.Sscanf(strings.TrimPrefix(shard, s.prefix), "%d", &target); err != nil {
		t.Fatal(err)
	}
	stored, err := json.Marshal(map[string]any{"status": first.Status, "etag": first.Header.Get("ETag"),
		"location": first.Header.Get("Location"), "body": strings.TrimSuffix(string(first.Body), "\n")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO "+s.keyHome(k)+".idempotency_claims (key_hash, fingerprint, state, claim, claimed_at, target, expires_at) VALUES (?, ?, 0, 42, UTC_TIMESTAMP(6), ?, UTC_TIMESTAMP(6) + INTERVAL 1 DAY)", k.Hash[:], k.Fingerprint[:], target); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO "+shard+".idempotency_outcomes (key_hash, claim, state, object_id, response, expires_at) VALUES (?, 42, 1, ?, ?, UTC_TIMESTAMP(6) + INTERVAL 1 DAY)", k.Hash[:], mustUint(t, pin.ID), stored); err != nil {
		t.Fatal(err)
	}
	sameResponse(t, first, s.must(http.StatusCreated, "POST", "/v1/pins", body, keyHdr("earlier")...))
	if n := s.count("/v1/boards/" + board.ID + "/pins"); n != 1 {
		t.Fatalf("board has %d pins, want 1", n)
	}
}
