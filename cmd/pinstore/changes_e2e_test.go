package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pinstore "github.com/pinstore/pinstore"
	"github.com/pinstore/pinstore/cluster/changes"
	"github.com/pinstore/pinstore/idcodec"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/model"
)

// changeFleet is a server on a private MariaDB with row binlogs, and the
// environment `pinstore changes` needs to read it.
type changeFleet struct {
	*server
	host *testenv.Host
	env  map[string]string
}

func startChangeFleet(t *testing.T) *changeFleet { return startChangeFleetEnv(t, nil) }

// startChangeFleetEnv is startChangeFleet with more of the server's
// environment.
func startChangeFleetEnv(t *testing.T, extra map[string]string) *changeFleet {
	t.Helper()
	h := testenv.ReplicationHost(t, "changes-e2e", 1)
	env := map[string]string{"PINSTORE_MYSQL_DSN": h.DSN()}
	maps.Copy(env, extra)
	s := startServerEnv(t, env)
	return &changeFleet{server: s, host: h, env: map[string]string{
		"PINSTORE_MYSQL_DSN": h.DSN(), "PINSTORE_SHARDS": strconv.Itoa(e2eShards), "PINSTORE_DB_PREFIX": s.prefix,
	}}
}

// changeLedger is what the writers were told: every acknowledged object
// version and list entry.
type changeLedger struct {
	mu       sync.Mutex
	versions map[string]map[int64]ackedDoc // object id → version → what its response said
	entries  map[string]bool               // "list from->to" added and acknowledged
}

type ackedDoc struct {
	kind        changes.Kind
	description string
}

func (l *changeLedger) object(id string, v int64, d ackedDoc) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.versions[id] == nil {
		l.versions[id] = map[int64]ackedDoc{}
	}
	l.versions[id][v] = d
}

func (l *changeLedger) entry(list, from, to string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries[list+" "+from+"->"+to] = true
}

// call is one request as a writer makes it: the admin token, JSON, an
// Idempotency-Key on creates. It returns the status and the decoded body.
func (f *changeFleet) call(method, path string, body any, key string) (int, object, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, f.base+path, rd)
	if err != nil {
		return 0, object{}, err
	}
	req.Header.Set("Authorization", "Bearer "+e2eAdminToken)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, object{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var o object
	if len(b) > 0 && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, &o); err != nil {
			return resp.StatusCode, o, fmt.Errorf("%s %s: %v: %s", method, path, err, b)
		}
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, o, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, o, nil
}

// consumer runs `pinstore changes`, records every line, and is stopped
// and started again from a token it acknowledged, again and again.
type consumer struct {
	env      map[string]string
	mu       sync.Mutex
	events   []changes.Event
	restarts int
	first    string // the token the first run began with
}

// run consumes until stop is closed; ready gets the first token.
func (c *consumer) run(t *testing.T, stop <-chan struct{}, ready chan<- struct{}) error {
	getenv := func(k string) string { return c.env[k] }
	token := ""
	for first := true; ; first = false {
		ctx, cancel := context.WithCancel(context.Background())
		pr, pw := io.Pipe()
		var stderr bytes.Buffer
		done := make(chan error, 1)
		args := []string{"changes"}
		if token != "" {
			args = append(args, "--after", token)
		}
		go func() {
			err := run(ctx, args, getenv, pw, &stderr)
			pw.Close()
			done <- err
		}()
		go func() {
			select {
			case <-stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		// Read a random number of lines, then "crash": what was read
		// after the token acknowledged comes again.
		limit := 20 + rand.IntN(40)
		var tokens []string
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 0; n < limit && sc.Scan(); n++ {
			var e changes.Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				cancel()
				return fmt.Errorf("a line that is no event: %v: %s", err, sc.Text())
			}
			if e.Token == "" {
				cancel()
				return fmt.Errorf("a line without a token: %s", sc.Text())
			}
			tokens = append(tokens, e.Token)
			if first && n == 0 {
				c.mu.Lock()
				c.first = e.Token
				c.mu.Unlock()
				close(ready)
			}
			if e.Kind != changes.Progress {
				c.mu.Lock()
				c.events = append(c.events, e)
				c.mu.Unlock()
			}
		}
		stopped := false
		select {
		case <-stop:
			stopped = true
		default:
		}
		cancel()
		go io.Copy(io.Discard, pr)
		if err := <-done; err != nil {
			return fmt.Errorf("pinstore changes %v: %v\n%s", args, err, stderr.String())
		}
		if stopped {
			return nil
		}
		if len(tokens) > 0 {
			// Acknowledge the last line, or one a few lines before it.
			token = tokens[max(0, len(tokens)-1-rand.IntN(4))]
		}
		c.mu.Lock()
		c.restarts++
		c.mu.Unlock()
	}
}

func (c *consumer) snapshot() []changes.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]changes.Event(nil), c.events...)
}

// startConsumer starts a consumer of `pinstore changes` with env and
// waits for its first token. stop ends it (once; the test's end stops it
// too) and fails the test if it ended with an error; done is closed when
// it ends, by stop or by itself, and then err says why.
func startConsumer(t *testing.T, env map[string]string) (c *consumer, stop func(), done <-chan struct{}, err func() error) {
	t.Helper()
	c = &consumer{env: env}
	stopCh, ready, ended := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var runErr error
	go func() {
		runErr = c.run(t, stopCh, ready)
		close(ended)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(stopCh)
			<-ended
			if runErr != nil {
				t.Error(runErr)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-ready:
	case <-ended:
		t.Fatalf("the consumer stopped before its first token: %v", runErr)
	case <-time.After(30 * time.Second):
		t.Fatal("no token from pinstore changes within 30s")
	}
	return c, stop, ended, func() error { <-ended; return runErr }
}

// TestChangeStreamEndToEnd runs writers against the real server on a
// host with row binlogs and a consumer of `pinstore changes` that is
// stopped and resumed from its tokens many times: every acknowledged
// write is told, each object's versions never go backwards, each shard's
// GTIDs ascend, and each version's document is the one acknowledged.
func TestChangeStreamEndToEnd(t *testing.T) {
	f := startChangeFleet(t)
	l := &changeLedger{versions: map[string]map[int64]ackedDoc{}, entries: map[string]bool{}}
	c, stopConsumer, consumerDone, consumerErr := startConsumer(t, f.env)

	const writers, rounds = 3, 12
	users := make([]string, writers)
	boards := make([]string, writers)
	for w := range writers {
		_, u, err := f.call("POST", "/v1/users", map[string]any{"username": fmt.Sprintf("chg%d%s", w, strings.TrimSuffix(f.prefix, "_"))}, fmt.Sprintf("u%d", w))
		if err != nil {
			t.Fatal(err)
		}
		l.object(u.ID, 1, ackedDoc{kind: changes.Created})
		_, b, err := f.call("POST", "/v1/boards", map[string]any{"owner_id": u.ID, "name": "b"}, fmt.Sprintf("b%d", w))
		if err != nil {
			t.Fatal(err)
		}
		l.object(b.ID, 1, ackedDoc{kind: changes.Created})
		l.entry("user_boards", u.ID, b.ID)
		users[w], boards[w] = u.ID, b.ID
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				me, other := users[w], users[(w+1)%writers]
				if _, _, err := f.call("PUT", "/v1/users/"+me+"/following/"+other, nil, ""); err != nil {
					return err
				}
				l.entry("user_following", me, other)
				l.entry("user_followers", other, me)
				for i := range rounds {
					desc := fmt.Sprintf("w%d pin %d", w, i)
					_, p, err := f.call("POST", "/v1/pins", map[string]any{"board_id": boards[w], "description": desc}, fmt.Sprintf("p%d-%d", w, i))
					if err != nil {
						return err
					}
					l.object(p.ID, 1, ackedDoc{kind: changes.Created, description: desc})
					l.entry("board_pins", boards[w], p.ID)
					l.entry("user_pins", me, p.ID)
					if i%3 == 1 {
						desc += " edited"
						_, e, err := f.call("PATCH", "/v1/pins/"+p.ID, map[string]any{"description": desc}, "")
						if err != nil {
							return err
						}
						l.object(p.ID, e.Version, ackedDoc{kind: changes.Updated, description: desc})
						p.Version = e.Version
					}
					if _, _, err := f.call("PUT", "/v1/users/"+other+"/likes/"+p.ID, nil, ""); err != nil {
						return err
					}
					l.entry("user_likes", other, p.ID)
					l.entry("pin_likers", p.ID, other)
					if i%4 == 2 {
						_, s, err := f.call("POST", "/v1/pins/"+p.ID+"/saves", map[string]any{"board_id": boards[(w+1)%writers]}, fmt.Sprintf("s%d-%d", w, i))
						if err != nil {
							return err
						}
						l.object(s.ID, 1, ackedDoc{kind: changes.Created, description: desc})
						l.entry("pin_saves", p.ID, s.ID)
					}
					if i%5 == 4 {
						if _, _, err := f.call("DELETE", "/v1/pins/"+p.ID, nil, ""); err != nil {
							return err
						}
						l.object(p.ID, p.Version+1, ackedDoc{kind: changes.Deleted, description: desc})
					}
				}
				return nil
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	// Wait until the consumer has been told every acknowledged write.
	missing := func(evs []changes.Event) []string {
		seen := map[string]bool{}
		for _, e := range evs {
			if e.IsObject() {
				seen[fmt.Sprintf("%s v%d", idStr(e.ID), e.Version)] = true
			} else if e.Kind == changes.Added {
				seen[fmt.Sprintf("%s %s->%s", e.List, idStr(e.From), idStr(e.To))] = true
			}
		}
		var out []string
		l.mu.Lock()
		defer l.mu.Unlock()
		for id, vs := range l.versions {
			for v := range vs {
				if k := fmt.Sprintf("%s v%d", id, v); !seen[k] {
					out = append(out, k)
				}
			}
		}
		for k := range l.entries {
			if !seen[k] {
				out = append(out, k)
			}
		}
		return out
	}
	var evs []changes.Event
	deadline := time.Now().Add(60 * time.Second)
	for {
		evs = c.snapshot()
		m := missing(evs)
		if len(m) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s the stream has not told %d acknowledged writes, e.g. %v", len(m), m[:min(5, len(m))])
		}
		select {
		case <-consumerDone:
			t.Fatalf("the consumer stopped: %v", consumerErr())
		case <-time.After(200 * time.Millisecond):
		}
	}
	stopConsumer()
	if t.Failed() {
		t.FailNow()
	}

	// Repeats carry the same key and the same content; drop them.
	byKey := map[string]string{}
	var uniq []changes.Event
	dups := 0
	for _, e := range evs {
		e.Token = ""
		b, _ := json.Marshal(e)
		if prev, ok := byKey[e.Key]; ok {
			dups++
			if prev != string(b) {
				t.Errorf("key %s told twice differently:\n%s\n%s", e.Key, prev, b)
			}
			continue
		}
		byKey[e.Key] = string(b)
		uniq = append(uniq, e)
	}
	version := map[model64]int64{}
	type place struct{ seq, index uint64 }
	shardAt := map[int]place{}
	for _, e := range uniq {
		if e.IsObject() {
			if v := version[model64(e.ID)]; e.Version < v {
				t.Errorf("%s %d: version %d after %d", e.Type, uint64(e.ID), e.Version, v)
			}
			version[model64(e.ID)] = e.Version
			if acked, ok := l.versions[idStr(e.ID)][e.Version]; ok {
				var doc struct {
					Description string `json:"description"`
					Active      bool   `json:"active"`
				}
				if err := json.Unmarshal(e.Doc, &doc); err != nil {
					t.Errorf("%s: document %s: %v", e.Key, e.Doc, err)
				}
				if e.Kind != acked.kind || (e.Type == "pin" && doc.Description != acked.description) || doc.Active != (acked.kind != changes.Deleted) {
					t.Errorf("%s v%d: told %s %s, acknowledged %s %q", idStr(e.ID), e.Version, e.Kind, e.Doc, acked.kind, acked.description)
				}
			}
			if p, err := idcodec.Decode(uint64(e.ID)); err != nil || int(p.Shard) != e.Shard {
				t.Errorf("%s: id %d is not on shard %d", e.Key, uint64(e.ID), e.Shard)
			}
		}
		parts := strings.Split(e.GTID, "-")
		seq, _ := strconv.ParseUint(parts[len(parts)-1], 10, 64)
		at := place{seq, uint64(e.Index)}
		if prev, ok := shardAt[e.Shard]; ok && (at.seq < prev.seq || at.seq == prev.seq && at.index <= prev.index) {
			t.Errorf("shard %d: %s after sequence %d index %d", e.Shard, e.Key, prev.seq, prev.index)
		}
		shardAt[e.Shard] = at
	}
	t.Logf("%d events (%d told again after a restart) over %d restarts of the consumer; %d objects, %d list entries acknowledged",
		len(uniq), dups, c.restarts, len(l.versions), len(l.entries))
	if c.restarts < 3 {
		t.Errorf("the consumer restarted %d times, want several", c.restarts)
	}

	// GET /v1/changes from the same first token tells the same events, in
	// the same order, a batch at a time.
	var keys []string
	for _, e := range uniq {
		keys = append(keys, e.Key)
	}
	f.checkHTTPChanges(t, c.first, keys, users[0])
}

// checkHTTPChanges reads GET /v1/changes in batches from token until it has
// as many events as want and checks their keys are want, each line valid
// by the spec's ChangeEvent; and that user tokens and bad parameters are
// refused.
func (f *changeFleet) checkHTTPChanges(t *testing.T, token string, want []string, user string) {
	t.Helper()
	schema := loadSpec(t, "openapi.yaml", pinstore.OpenAPI).Components.Schemas["ChangeEvent"].Value
	var got []string
	for batches := 0; len(got) < len(want); batches++ {
		if batches > 50 {
			t.Fatalf("GET /v1/changes: %d events in 50 batches, want %d", len(got), len(want))
		}
		r := f.must(http.StatusOK, "GET", "/v1/changes?limit=100&wait=5&after="+url.QueryEscape(token), nil)
		if ct := r.Header.Get("Content-Type"); ct != "application/x-ndjson" {
			t.Fatalf("GET /v1/changes: Content-Type %q", ct)
		}
		lines := strings.Split(strings.TrimSuffix(string(r.Body), "\n"), "\n")
		for i, line := range lines {
			var v any
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Fatalf("line %d of a batch is not JSON: %v: %s", i, err, line)
			}
			if err := schema.VisitJSON(v); err != nil {
				t.Fatalf("line %d of a batch is no ChangeEvent: %v: %s", i, err, line)
			}
			var e changes.Event
			json.Unmarshal([]byte(line), &e)
			if i == len(lines)-1 {
				if e.Kind != changes.Progress {
					t.Fatalf("a batch's last line is %s, not progress", line)
				}
				token = e.Token
			} else if e.Kind != changes.Progress {
				got = append(got, e.Key)
			}
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("GET /v1/changes told other events than pinstore changes:\n%v\nwant\n%v", got, want)
	}
	f.as(mintUserToken(t, user, "1h"), http.StatusForbidden, "GET", "/v1/changes", nil)
	f.fail(http.StatusBadRequest, "invalid_argument", "GET", "/v1/changes?after=not-a-token", nil)
	f.fail(http.StatusBadRequest, "invalid_argument", "GET", "/v1/changes?types=pins", nil)
	f.fail(http.StatusBadRequest, "invalid_argument", "GET", "/v1/changes?limit=0", nil)
}

type model64 uint64

func idStr(id model.ID) string { return strconv.FormatUint(uint64(id), 10) }

// TestChangesSnapshot is a first sync through the command line: `pinstore
// changes --snapshot` tells every object and list entry the API made,
// marked as the snapshot, then a progress line, then the changes made
// after it; with --after it is refused.
func TestChangesSnapshot(t *testing.T) {
	f := startChangeFleet(t)
	_, u, err := f.call("POST", "/v1/users", map[string]any{"username": "snap" + strings.TrimSuffix(f.prefix, "_")}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, b, err := f.call("POST", "/v1/boards", map[string]any{"owner_id": u.ID, "name": "b"}, "")
	if err != nil {
		t.Fatal(err)
	}
	_, p, err := f.call("POST", "/v1/pins", map[string]any{"board_id": b.ID, "description": "before"}, "")
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"changes", "--snapshot"}, func(k string) string { return f.env[k] }, pw, &stderr)
		pw.Close()
	}()
	lines := make(chan changes.Event, 100)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e changes.Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Errorf("a line that is no event: %s", sc.Text())
			}
			lines <- e
		}
		close(lines)
	}()
	read := func() changes.Event {
		t.Helper()
		select {
		case e, ok := <-lines:
			if !ok {
				t.Fatalf("pinstore changes --snapshot ended: %v\n%s", <-done, stderr.String())
			}
			return e
		case <-time.After(30 * time.Second):
			t.Fatal("no line from pinstore changes --snapshot within 30s")
		}
		return changes.Event{}
	}
	// The snapshot: the three objects and the entries the pin and board
	// made, in any order, and then its token.
	want := map[string]bool{
		"created user " + u.ID: true, "created board " + b.ID: true, "created pin " + p.ID: true,
		"added user_boards " + u.ID + "->" + b.ID: true, "added board_pins " + b.ID + "->" + p.ID: true, "added user_pins " + u.ID + "->" + p.ID: true,
	}
	for e := read(); e.Kind != changes.Progress; e = read() {
		if !e.Snapshot || e.GTID != "" || e.Token != "" {
			t.Fatalf("a snapshot line: %+v", e)
		}
		what := string(e.Kind) + " " + e.Type + " " + idStr(e.ID)
		if !e.IsObject() {
			what = string(e.Kind) + " " + e.List + " " + idStr(e.From) + "->" + idStr(e.To)
		}
		if !want[what] {
			t.Fatalf("the snapshot told %s, which the API did not make", what)
		}
		delete(want, what)
	}
	if len(want) > 0 {
		t.Fatalf("the snapshot did not tell %v", want)
	}
	// Then the stream: an edit made now, not in the snapshot.
	if _, _, err := f.call("PATCH", "/v1/pins/"+p.ID, map[string]any{"description": "after"}, ""); err != nil {
		t.Fatal(err)
	}
	for {
		e := read()
		if e.Kind == changes.Progress {
			continue
		}
		if e.Snapshot || e.Kind != changes.Updated || idStr(e.ID) != p.ID || e.Version != 2 || e.Token == "" {
			t.Fatalf("after the snapshot: %+v, want the pin's edit", e)
		}
		break
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("pinstore changes --snapshot: %v\n%s", err, stderr.String())
	}

	err = run(context.Background(), []string{"changes", "--snapshot", "--after", "x"}, func(k string) string { return f.env[k] }, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "takes no --after") {
		t.Fatalf("--snapshot with --after: %v", err)
	}
}
