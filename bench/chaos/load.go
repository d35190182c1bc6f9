package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// global holds the acknowledged users and pins every worker may target
// (follow any user, like any pin).
type global struct {
	mu    sync.RWMutex
	users []*object
	pins  []*object
	// reads checked for freshness, and the faults they are measured against (fresh.go)
	stale  staleness
	faults faults
}

func (g *global) addUser(o *object) { g.mu.Lock(); g.users = append(g.users, o); g.mu.Unlock() }
func (g *global) addPin(o *object)  { g.mu.Lock(); g.pins = append(g.pins, o); g.mu.Unlock() }

func (g *global) randomUser(r *rand.Rand) *object {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if len(g.users) == 0 {
		return nil
	}
	return g.users[r.IntN(len(g.users))]
}

// randomPin picks any pin, half the time among the newest 500 (fresh pins
// get the likes, and race with their deletes).
func (g *global) randomPin(r *rand.Rand) *object {
	g.mu.RLock()
	defer g.mu.RUnlock()
	n := len(g.pins)
	if n == 0 {
		return nil
	}
	if r.IntN(2) == 0 && n > 500 {
		return g.pins[n-1-r.IntN(500)]
	}
	return g.pins[r.IntN(n)]
}

type worker struct {
	id    int
	runID string
	rng   *rand.Rand
	c     *client
	st    *stats
	g     *global
	j     *journal

	users   []*object
	boards  []*object
	pins    []*object // own pins not (possibly) deleted: the ones it edits and deletes
	allPins []*object // every own pin with an acknowledged create
	follows map[[2]uint64]*pair
	likes   map[[2]uint64]*pair
	byUserF map[uint64][]*pair
	byUserL map[uint64][]*pair

	unknownCreates map[string]int
	resolved       resolution // creates with an unknown outcome, by what their retry found (create.go)
	seq            int
}

func newWorker(id int, runID string, seed uint64, c *client, st *stats, g *global, j *journal) *worker {
	return &worker{
		id: id, runID: runID, rng: rand.New(rand.NewPCG(seed, uint64(id))), c: c, st: st, g: g, j: j,
		follows: map[[2]uint64]*pair{}, likes: map[[2]uint64]*pair{},
		byUserF: map[uint64][]*pair{}, byUserL: map[uint64][]*pair{},
		unknownCreates: map[string]int{}, resolved: resolution{},
	}
}

// opWeights is the operation mix (relative weights).
var opWeights = []struct {
	name string
	w    int
}{
	{"create_user", 2},
	{"create_board", 4},
	{"create_pin", 18},
	{"follow", 12},
	{"unfollow", 5},
	{"like", 14},
	{"unlike", 6},
	{"patch_pin", 10},
	{"patch_board", 4},
	{"delete_pin", 5},
	{"read", 20},
}

func pickOp(r *rand.Rand) string {
	total := 0
	for _, o := range opWeights {
		total += o.w
	}
	n := r.IntN(total)
	for _, o := range opWeights {
		if n < o.w {
			return o.name
		}
		n -= o.w
	}
	return "read"
}

// run drives operations until the deadline. Requests use a context that
// the deadline does not cancel: an operation that started finishes, so the
// end of the run makes no unknown outcomes.
func (w *worker) run(deadline time.Time) {
	ctx := context.Background()
	// Start with two users, each with a board.
	for len(w.users) < 2 && time.Now().Before(deadline) {
		if u := w.createUser(ctx); u != nil {
			for w.createBoard(ctx, u) == nil && time.Now().Before(deadline) {
			}
		}
	}
	for time.Now().Before(deadline) {
		var a answer
		switch pickOp(w.rng) {
		case "create_user":
			if u := w.createUser(ctx); u != nil {
				w.createBoard(ctx, u)
			}
			continue
		case "create_board":
			a = w.createBoardAns(ctx, w.ownUser())
		case "create_pin":
			a = w.createPin(ctx)
		case "follow":
			a = w.follow(ctx)
		case "unfollow":
			a = w.unfollow(ctx)
		case "like":
			a = w.like(ctx)
		case "unlike":
			a = w.unlike(ctx)
		case "patch_pin":
			a = w.patchPin(ctx)
		case "patch_board":
			a = w.patchBoard(ctx)
		case "delete_pin":
			a = w.deletePin(ctx)
		case "read":
			a = w.read(ctx)
		}
		w.backoff(a)
	}
}

// backoff sleeps a little after an answer that says the server is down
// or overloaded, so workers don't spin while it restarts.
func (w *worker) backoff(a answer) {
	if a.outcome == notSent || a.status == http.StatusServiceUnavailable || a.kind == "reset" || a.kind == "eof" {
		time.Sleep(time.Duration(20+w.rng.IntN(40)) * time.Millisecond)
	}
}

func (w *worker) next() int { w.seq++; return w.seq }

func (w *worker) ownUser() *object { return w.users[w.rng.IntN(len(w.users))] }

func (w *worker) log(op string, a answer, id, target, field, value string) {
	w.j.log(journalEntry{T: a.end, Ms: a.end.Sub(a.start).Milliseconds(), Worker: w.id, Op: op, ID: id, Target: target, Field: field, Value: value, Outcome: a.outcome.String(), Kind: a.kind})
}

func (w *worker) anomaly(format string, args ...any) {
	w.st.anomaly(fmt.Sprintf("worker %d: ", w.id) + fmt.Sprintf(format, args...))
}

func parseID(b []byte) (uint64, wireObject, error) {
	var o wireObject
	if err := json.Unmarshal(b, &o); err != nil {
		return 0, o, err
	}
	id, err := strconv.ParseUint(o.ID, 10, 64)
	return id, o, err
}

func (w *worker) createUser(ctx context.Context) *object {
	n := w.next()
	name := fmt.Sprintf("c%s_%d_%d", w.runID, w.id, n)
	a := w.create(ctx, "create_user", "/v1/users", map[string]string{"username": name, "display_name": "chaos"}, w.marker(n))
	w.backoff(a)
	switch a.outcome {
	case acked:
		id, _, err := parseID(a.body)
		if err != nil {
			w.anomaly("create_user: 2xx with an unreadable body: %v", err)
			return nil
		}
		u := &object{id: id, typ: "user", worker: w.id, fixed: map[string]string{"username": name}, fields: map[string]*value{}, live: newValue(alive)}
		w.log("create_user", a, u.ids(), "", "username", name)
		w.users = append(w.users, u)
		w.g.addUser(u)
		return u
	case unknownSettled, unknownPending:
		w.unknownCreates["user"]++
	case rejected:
		w.anomaly("create_user %s: %s %s", name, a.kind, a.body)
	}
	w.log("create_user", a, "", "", "username", name)
	return nil
}

func (w *worker) createBoard(ctx context.Context, u *object) *object {
	a := w.createBoardAns(ctx, u)
	w.backoff(a)
	if a.outcome == acked {
		return w.boards[len(w.boards)-1]
	}
	return nil
}

func (w *worker) createBoardAns(ctx context.Context, u *object) answer {
	n := w.next()
	name, desc := fmt.Sprintf("board-%d-%d", w.id, n), fmt.Sprintf("created-%d-%d", w.id, n)
	a := w.create(ctx, "create_board", "/v1/boards", map[string]any{"owner_id": u.ids(), "name": name, "description": desc, "data": map[string]string{"marker": w.marker(n)}}, w.marker(n))
	switch a.outcome {
	case acked:
		id, _, err := parseID(a.body)
		if err != nil {
			w.anomaly("create_board: 2xx with an unreadable body: %v", err)
			return a
		}
		b := &object{id: id, typ: "board", worker: w.id, fixed: map[string]string{"owner_id": u.ids()},
			fields: map[string]*value{"name": newValue(name), "description": newValue(desc)}, live: newValue(alive)}
		w.boards = append(w.boards, b)
		w.log("create_board", a, b.ids(), u.ids(), "name", name)
		return a
	case unknownSettled, unknownPending:
		w.unknownCreates["board"]++
		u.unknownBoards++
	case rejected:
		w.anomaly("create_board for live user %d: %s %s", u.id, a.kind, a.body)
	}
	w.log("create_board", a, "", u.ids(), "name", name)
	return a
}

func (w *worker) createPin(ctx context.Context) answer {
	b := w.boards[w.rng.IntN(len(w.boards))]
	n := w.next()
	link, desc := fmt.Sprintf("https://example.com/%d/%d", w.id, n), fmt.Sprintf("created-%d-%d", w.id, n)
	a := w.create(ctx, "create_pin", "/v1/pins", map[string]any{"board_id": b.ids(), "link": link, "description": desc, "data": map[string]string{"marker": w.marker(n)}}, w.marker(n))
	switch a.outcome {
	case acked:
		id, wo, err := parseID(a.body)
		if err != nil {
			w.anomaly("create_pin: 2xx with an unreadable body: %v", err)
			return a
		}
		if wo.OwnerID != b.fixed["owner_id"] {
			w.anomaly("create_pin %d: owner_id %s, want the board's owner %s", id, wo.OwnerID, b.fixed["owner_id"])
		}
		p := &object{id: id, typ: "pin", worker: w.id, fixed: map[string]string{"board_id": b.ids(), "owner_id": b.fixed["owner_id"]},
			fields: map[string]*value{"link": newValue(link), "description": newValue(desc)}, live: newValue(alive)}
		w.pins = append(w.pins, p)
		w.allPins = append(w.allPins, p)
		w.g.addPin(p)
		w.log("create_pin", a, p.ids(), b.ids(), "description", desc)
		return a
	case unknownSettled, unknownPending:
		w.unknownCreates["pin"]++
		b.unknownPins++
		for _, u := range w.users {
			if u.ids() == b.fixed["owner_id"] {
				u.unknownPins++
			}
		}
	case rejected:
		w.anomaly("create_pin on live board %d: %s %s", b.id, a.kind, a.body)
	}
	w.log("create_pin", a, "", b.ids(), "description", desc)
	return a
}

func pairOf(m map[[2]uint64]*pair, by map[uint64][]*pair, from, to *object) *pair {
	k := [2]uint64{from.id, to.id}
	p := m[k]
	if p == nil {
		p = &pair{from: from, to: to, member: newValue(absent)}
		m[k] = p
		by[from.id] = append(by[from.id], p)
	}
	return p
}

// pairWrite sends the add (PUT) or remove (DELETE) of pair p in the
// user's list coll and records what the answer means for it. A 404 is an
// anomaly unless notFoundOK (a like's pin may have been deleted meanwhile).
func (w *worker) pairWrite(ctx context.Context, op, coll string, p *pair, add, notFoundOK bool) answer {
	method, state := http.MethodDelete, absent
	if add {
		method, state = http.MethodPut, present
	}
	a := w.c.do(ctx, method, "/v1/users/"+p.from.ids()+"/"+coll+"/"+p.to.ids(), nil, "")
	w.st.record(op, a, true)
	p.member.apply(state, a.outcome)
	if add && a.outcome == acked {
		p.addStart, p.addEnd = a.start, a.end
	}
	if a.outcome == rejected && !(notFoundOK && a.status == http.StatusNotFound) {
		w.anomaly("%s %d → %d: %s %s", op, p.from.id, p.to.id, a.kind, a.body)
	}
	w.log(op, a, p.from.ids(), p.to.ids(), "", "")
	return a
}

// follow: a follow of a live user by a live user is never refused.
func (w *worker) follow(ctx context.Context) answer {
	u := w.ownUser()
	v := w.g.randomUser(w.rng)
	if v == nil || v == u {
		return answer{}
	}
	return w.pairWrite(ctx, "follow", "following", pairOf(w.follows, w.byUserF, u, v), true, false)
}

func (w *worker) unfollow(ctx context.Context) answer {
	u := w.ownUser()
	ps := w.byUserF[u.id]
	if len(ps) == 0 {
		return w.follow(ctx)
	}
	return w.pairWrite(ctx, "unfollow", "following", ps[w.rng.IntN(len(ps))], false, false)
}

// like: a 404 is normal here, another worker may have deleted the pin.
func (w *worker) like(ctx context.Context) answer {
	u := w.ownUser()
	pin := w.g.randomPin(w.rng)
	if pin == nil {
		return answer{}
	}
	return w.pairWrite(ctx, "like", "likes", pairOf(w.likes, w.byUserL, u, pin), true, true)
}

func (w *worker) unlike(ctx context.Context) answer {
	u := w.ownUser()
	ps := w.byUserL[u.id]
	if len(ps) == 0 {
		return w.like(ctx)
	}
	return w.pairWrite(ctx, "unlike", "likes", ps[w.rng.IntN(len(ps))], false, false)
}

// patch sends a merge patch of one field and checks the answer's value.
func (w *worker) patch(ctx context.Context, op, coll string, o *object, field string) answer {
	v := fmt.Sprintf("%s-w%d-%d", field, w.id, w.next())
	if field == "link" {
		v = "https://example.com/edit/" + v
	}
	body, _ := json.Marshal(map[string]string{field: v})
	a := w.c.do(ctx, http.MethodPatch, "/v1/"+coll+"/"+o.ids(), body, "application/merge-patch+json")
	w.st.record(op, a, true)
	o.fields[field].apply(v, a.outcome)
	switch a.outcome {
	case acked:
		var wo wireObject
		if err := json.Unmarshal(a.body, &wo); err != nil || wo.field(field) != v {
			w.anomaly("%s %d: 2xx answer has %s %q, want %q", op, o.id, field, wo.field(field), v)
		}
		o.fresh.ack(a.body)
	case rejected:
		w.anomaly("%s of live %s %d: %s %s", op, o.typ, o.id, a.kind, a.body)
	}
	w.log(op, a, o.ids(), "", field, v)
	return a
}

func (w *worker) patchPin(ctx context.Context) answer {
	if len(w.pins) == 0 {
		return w.createPin(ctx)
	}
	p := w.pins[w.rng.IntN(len(w.pins))]
	return w.patch(ctx, "patch_pin", "pins", p, []string{"link", "description"}[w.rng.IntN(2)])
}

func (w *worker) patchBoard(ctx context.Context) answer {
	b := w.boards[w.rng.IntN(len(w.boards))]
	return w.patch(ctx, "patch_board", "boards", b, []string{"name", "description"}[w.rng.IntN(2)])
}

func (w *worker) deletePin(ctx context.Context) answer {
	if len(w.pins) < 5 {
		return w.createPin(ctx)
	}
	i := w.rng.IntN(len(w.pins))
	p := w.pins[i]
	a := w.c.do(ctx, http.MethodDelete, "/v1/pins/"+p.ids(), nil, "")
	w.st.record("delete_pin", a, true)
	p.live.apply(dead, a.outcome)
	if a.outcome == acked {
		p.fresh.deletedAt.Store(a.end.UnixNano())
	}
	switch a.outcome {
	case acked, unknownSettled, unknownPending:
		p.deleteTried, p.delStart, p.delEnd, p.delOutcome = true, a.start, a.end, a.outcome
		// Possibly deleted: the worker stops editing it.
		w.pins[i] = w.pins[len(w.pins)-1]
		w.pins = w.pins[:len(w.pins)-1]
	case rejected:
		w.anomaly("delete of live pin %d: %s %s", p.id, a.kind, a.body)
	}
	w.log("delete_pin", a, p.ids(), "", "", "")
	return a
}

// read is one of a few reads, for a realistic mix (and owner look-ups
// that fill the owner cache). Reads are counted, not verified.
func (w *worker) read(ctx context.Context) answer {
	var a answer
	op := ""
	switch w.rng.IntN(4) {
	case 0:
		p := w.g.randomPin(w.rng)
		if p == nil {
			return a
		}
		op = "read_pin"
		version, deleted := p.fresh.version.Load(), p.fresh.deletedAt.Load()
		a = w.c.do(ctx, http.MethodGet, "/v1/pins/"+p.ids(), nil, "")
		w.g.stale.check(&w.g.faults, "pin", p.id, version, deleted, a)
	case 1:
		b := w.boards[w.rng.IntN(len(w.boards))]
		if w.rng.IntN(2) == 0 {
			op = "read_board"
			version := b.fresh.version.Load()
			a = w.c.do(ctx, http.MethodGet, "/v1/boards/"+b.ids(), nil, "")
			w.g.stale.check(&w.g.faults, "board", b.id, version, 0, a)
			break
		}
		op = "read_board_pins"
		a = w.c.do(ctx, http.MethodGet, "/v1/boards/"+b.ids()+"/pins?limit=25", nil, "")
	case 2:
		ids := make([]string, 0, 50)
		for range 50 {
			if p := w.g.randomPin(w.rng); p != nil {
				ids = append(ids, p.ids())
			}
		}
		op = "read_owners"
		a = w.c.do(ctx, http.MethodPost, "/v1/pins/owners", map[string][]string{"ids": ids}, "")
	default:
		u := w.g.randomUser(w.rng)
		if u == nil {
			return a
		}
		op = "read_followers"
		a = w.c.do(ctx, http.MethodGet, "/v1/users/"+u.ids()+"/followers?limit=10", nil, "")
	}
	// A read of a deleted pin is a normal 404.
	if a.status == http.StatusNotFound && op == "read_pin" {
		a.outcome, a.kind = acked, "ok"
	}
	w.st.record(op, a, false)
	return a
}
