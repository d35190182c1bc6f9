package jepsen

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// writers is how many clients write at once, each through the three
// servers in turn.
const writers = 12

// op is one write a writer sent, and what came back: the ledger's line.
type op struct {
	kind     string // "create" or "edit"
	writer   int
	server   string
	key      string // the create's Idempotency-Key: names the object
	id       string // the object (a create's from its answer)
	base     int64  // an edit's If-Match
	desc     string // the description sent: unique to the write
	start    time.Time
	end      time.Time
	status   int    // 0: no answer (in doubt)
	err      string // why there was no answer
	version  int64  // the version answered
	answered string // the description answered
}

func (o *op) acked() bool { return o.status >= 200 && o.status < 300 }

// object is a pin a writer created: its own, edited by it alone.
type object struct {
	key, id string
	known   bool // version and desc are what the writer last saw
	version int64
	desc    string
	acked   int64 // the highest version acknowledged to the writer
	edits   int
}

// retry is a create whose answer did not say it was done or refused: sent
// again with the same key and body, as a client does.
type retry struct {
	key, desc string
	tries     int
	due       time.Time
}

// writer is one client: its user and board, its pins, its ledger.
type writer struct {
	n       int
	scen    string
	c       *client
	servers []*server
	board   string
	rng     *rand.Rand

	turn    int
	seq     int
	objs    []*object
	retries []*retry
	ops     []*op
	reads   int // re-reads after an edit was refused or in doubt
	// rollbacks counts re-reads that showed an older version (or
	// another body at the same one) than the writer had acknowledged.
	rollbacks int
}

// workload is the writers of one scenario.
type workload struct {
	scen    string
	writers []*writer
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// startWorkload gives each writer a user and a board (through via, a
// server every node reaches) and starts them.
func startWorkload(t *testing.T, scen string, servers []*server, via *server) *workload {
	t.Helper()
	w := &workload{scen: scen}
	c := newClient()
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	stamp := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	for i := range writers {
		u := c.do(ctx, http.MethodPost, via.base+"/v1/users", map[string]any{"username": fmt.Sprintf("jp_%s_%s_%d", scen, stamp, i)})
		var user struct{ ID string }
		if u.status != http.StatusCreated || json.Unmarshal(u.body, &user) != nil {
			t.Fatalf("writer %d's user: %d %s %v", i, u.status, u.body, u.err)
		}
		b := c.do(ctx, http.MethodPost, via.base+"/v1/boards", map[string]any{"owner_id": user.ID, "name": "jepsen " + scen})
		var board struct{ ID string }
		if b.status != http.StatusCreated || json.Unmarshal(b.body, &board) != nil {
			t.Fatalf("writer %d's board: %d %s %v", i, b.status, b.body, b.err)
		}
		w.writers = append(w.writers, &writer{
			n: i, scen: scen + "-" + stamp, c: newClient(), servers: servers, board: board.ID, turn: i,
			rng: rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano()))),
		})
	}
	for _, wr := range w.writers {
		w.wg.Go(func() { wr.run(ctx) })
	}
	return w
}

// stop stops the writers and returns every write they sent.
func (w *workload) stop() []*op {
	w.cancel()
	w.wg.Wait()
	var ops []*op
	for _, wr := range w.writers {
		ops = append(ops, wr.ops...)
	}
	return ops
}

// rollbacks is how many re-reads showed a writer less than it had been
// acknowledged.
func (w *workload) rollbacks() (n int) {
	for _, wr := range w.writers {
		n += wr.rollbacks
	}
	return n
}

// run writes until ctx is done: creates (keyed), edits of its own pins
// (If-Match), retries of creates in doubt, and re-reads of pins whose
// state an edit left unknown.
func (wr *writer) run(ctx context.Context) {
	for ctx.Err() == nil {
		s := wr.servers[wr.turn%len(wr.servers)]
		wr.turn++
		if r := wr.dueRetry(); r != nil {
			wr.create(ctx, s, r)
			continue
		}
		if o := wr.pick(false); o != nil && wr.rng.IntN(2) == 0 {
			wr.reread(ctx, s, o)
			continue
		}
		if o := wr.pick(true); o != nil && wr.rng.IntN(10) < 6 {
			wr.edit(ctx, s, o)
			continue
		}
		wr.seq++
		key := fmt.Sprintf("%s-w%d-k%d", wr.scen, wr.n, wr.seq)
		wr.create(ctx, s, &retry{key: key, desc: objPrefix(key) + "e0"})
	}
}

// objPrefix starts every description of the object key names.
func objPrefix(key string) string { return key + "/" }

// pick returns a random pin whose state is known (or unknown).
func (wr *writer) pick(known bool) *object {
	var c []*object
	for _, o := range wr.objs {
		if o.known == known {
			c = append(c, o)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[wr.rng.IntN(len(c))]
}

func (wr *writer) dueRetry() *retry {
	now := time.Now()
	for i, r := range wr.retries {
		if now.After(r.due) {
			wr.retries = append(wr.retries[:i], wr.retries[i+1:]...)
			return r
		}
	}
	return nil
}

// create sends a keyed create; one in doubt, refused with 409 (the key
// in use) or 5xx is sent again later, up to 5 times.
func (wr *writer) create(ctx context.Context, s *server, r *retry) {
	o := &op{kind: "create", writer: wr.n, server: s.name, key: r.key, desc: r.desc, start: time.Now()}
	a := wr.c.do(ctx, http.MethodPost, s.base+"/v1/pins", map[string]any{"board_id": wr.board, "description": r.desc}, "Idempotency-Key", r.key)
	wr.record(o, a) // also one the stop cut short: it may have been committed
	switch {
	case o.acked():
		if o.id == "" || o.answered != r.desc {
			o.err = "acknowledged without the pin sent: " + string(a.body)
			return
		}
		for _, x := range wr.objs {
			if x.key == r.key {
				return // a replay of a create already acknowledged
			}
		}
		wr.objs = append(wr.objs, &object{key: r.key, id: o.id, known: true, version: o.version, desc: r.desc, acked: o.version})
	case a.status == 0 || a.status == http.StatusConflict || a.status >= 500:
		if r.tries < 5 {
			r.tries++
			r.due = time.Now().Add(time.Duration(r.tries) * 500 * time.Millisecond)
			wr.retries = append(wr.retries, r)
		}
	}
}

// edit sends an If-Match edit of one of its pins.
func (wr *writer) edit(ctx context.Context, s *server, x *object) {
	x.edits++
	desc := fmt.Sprintf("%se%d", objPrefix(x.key), x.edits)
	o := &op{kind: "edit", writer: wr.n, server: s.name, key: x.key, id: x.id, base: x.version, desc: desc, start: time.Now()}
	a := wr.c.do(ctx, http.MethodPatch, s.base+"/v1/pins/"+x.id, map[string]any{"description": desc}, "If-Match", fmt.Sprintf("%q", strconv.FormatInt(x.version, 10)))
	wr.record(o, a)
	if o.acked() && o.answered == desc && o.version > x.version {
		x.version, x.desc = o.version, desc
		x.acked = max(x.acked, o.version)
		return
	}
	x.known = false // refused, in doubt, or an odd answer: read it again
}

// reread reads a pin whose state an edit left unknown.
func (wr *writer) reread(ctx context.Context, s *server, x *object) {
	a := wr.c.do(ctx, http.MethodGet, s.base+"/v1/pins/"+x.id, nil)
	p, ok := a.pin()
	if a.status != http.StatusOK || !ok {
		return
	}
	wr.reads++
	if p.Version < x.acked || !strings.HasPrefix(p.Description, objPrefix(x.key)) {
		wr.rollbacks++
	}
	x.known, x.version, x.desc = true, p.Version, p.Description
}

// record completes o with answer a and adds it to the ledger.
func (wr *writer) record(o *op, a answer) {
	o.end, o.status = time.Now(), a.status
	if a.err != nil {
		o.err = a.err.Error()
	}
	if p, ok := a.pin(); ok && o.acked() {
		if o.kind == "create" {
			o.id = p.ID
		}
		o.version, o.answered = p.Version, p.Description
	}
	wr.ops = append(wr.ops, o)
}
