package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
)

// linkbench is the LinkBench operation mix (Armstrong et al., SIGMOD 2013,
// the default workload's shares) mapped onto pinstore; see BENCHMARKS.md.
var linkbench = opMix{
	{"getlinklist", 50.71}, {"getnode", 12.93}, {"addlink", 8.99}, {"updatelink", 8.01},
	{"updatenode", 7.37}, {"countlink", 4.89}, {"deletelink", 2.99}, {"addnode", 2.57},
	{"deletenode", 1.01}, {"getlink", 0.53},
}

// opMix is a mix of named operations, each with its share (any scale).
type opMix []struct {
	name   string
	weight float64
}

// pick draws an operation with the odds of its share.
func (m opMix) pick(w *worker) string {
	total := 0.0
	for _, o := range m {
		total += o.weight
	}
	x := w.rng.Float64() * total
	for _, o := range m {
		if x < o.weight {
			return o.name
		}
		x -= o.weight
	}
	return m[0].name
}

// picks shared by the api and baseline sides, so both see the same
// distribution of ids.
type picks struct{ st *State }

func (p picks) pin(w *worker) uint64 { return p.st.Pins[w.rng.IntN(len(p.st.Pins))] }

// listUser: a user whose followers are listed; one in five is heavily
// followed (≈ 255 followers, so the page is full), the rest are random.
func (p picks) listUser(w *worker) uint64 {
	if w.rng.IntN(5) == 0 {
		return p.st.Users[p.st.Heavy[w.rng.IntN(len(p.st.Heavy))]]
	}
	return p.st.Users[w.rng.IntN(len(p.st.Users))]
}

func (p picks) user(w *worker) uint64 { return p.st.Users[w.rng.IntN(len(p.st.Users))] }

// sink is the board (and its owner) a create-pin goes to.
func (p picks) sink(w *worker) (board, owner uint64) {
	i := p.st.Others[w.rng.IntN(len(p.st.Others))]
	return p.st.Boards[i], p.st.Users[i]
}

// move: a followee's board and two distinct pins of it (item, anchor).
func (p picks) move(w *worker) (board, item, anchor uint64) {
	i := p.st.Followees[w.rng.IntN(len(p.st.Followees))]
	ps := p.st.BoardPins[i]
	a := w.rng.IntN(len(ps))
	b := (a + 1 + w.rng.IntN(len(ps)-1)) % len(ps)
	return p.st.Boards[i], ps[a], ps[b]
}

// ownerBatches are precomputed sets of 1,000 distinct seeded pins.
func ownerBatches(st *State, n int) [][]uint64 {
	rng := rand.New(rand.NewPCG(7, 7))
	out := make([][]uint64, n)
	for i := range out {
		perm := rng.Perm(len(st.Pins))[:1000]
		for _, j := range perm {
			out[i] = append(out[i], st.Pins[j])
		}
	}
	return out
}

func idStr(id uint64) string { return strconv.FormatUint(id, 10) }

func pinBody(board uint64, n int) []byte {
	b, _ := json.Marshal(map[string]string{
		"board_id":    idStr(board),
		"link":        fmt.Sprintf("https://example.com/new/%d", n),
		"description": "Pin created under load by the harness, with a realistic description",
		"image_url":   fmt.Sprintf("https://img.example.com/new/%d.jpg", n),
	})
	return b
}

func buildScenario(name string, c config, st *State, a *apiClient, base *baseline) (scenario, error) {
	p := picks{st}
	var sc scenario
	get := func(path string) func(ctx context.Context) error {
		return func(ctx context.Context) error { return a.do(ctx, http.MethodGet, path, "", nil, nil) }
	}
	switch name {
	case "get-pin":
		sc.note = "GET /v1/pins/{id}, random seeded pin"
		sc.api = func(ctx context.Context, w *worker) (string, error) {
			return name, a.do(ctx, http.MethodGet, "/v1/pins/"+idStr(p.pin(w)), "", nil, nil)
		}
		if base != nil {
			sc.base = func(ctx context.Context, w *worker) (string, error) { return name, base.getPin(ctx, p.pin(w)) }
			sc.limit = func(ctx context.Context, w *worker) (string, error) { return name, base.cacheGet(ctx, p.pin(w)) }
		}
	case "get-pin-bare":
		// The API read of get-pin beside the bare primary-key select, which
		// leaves out the counts the API's pin carries.
		sc.note = "GET /v1/pins/{id} beside a bare PK select (no counts)"
		sc.api = func(ctx context.Context, w *worker) (string, error) {
			return name, a.do(ctx, http.MethodGet, "/v1/pins/"+idStr(p.pin(w)), "", nil, nil)
		}
		if base != nil {
			sc.base = func(ctx context.Context, w *worker) (string, error) { return name, base.getPinBare(ctx, p.pin(w)) }
			sc.limit = func(ctx context.Context, w *worker) (string, error) { return name, base.cacheGet(ctx, p.pin(w)) }
		}
	case "create-pin":
		sc.note = "POST /v1/pins on one of 58 boards"
		sc.api = func(ctx context.Context, w *worker) (string, error) {
			b, _ := p.sink(w)
			return name, a.do(ctx, http.MethodPost, "/v1/pins", "application/json", pinBody(b, w.rng.IntN(1e9)), nil)
		}
		if base != nil {
			sc.base = func(ctx context.Context, w *worker) (string, error) {
				b, o := p.sink(w)
				_, err := base.createPin(ctx, b, o)
				return name, err
			}
		}
	case "board-page-d0":
		sc.note = "GET /v1/boards/{big}/pins?limit=50 (first page)"
		f := get(fmt.Sprintf("/v1/boards/%d/pins?limit=50", st.BigBoard))
		sc.api = func(ctx context.Context, w *worker) (string, error) { return name, f(ctx) }
		if base != nil {
			sc.base = func(ctx context.Context, w *worker) (string, error) {
				return name, base.boardPage(ctx, st.BigBoard, nil, 0)
			}
			// The limit: the page's 50 pins in one MGET, as the server reads
			// them from the cache (without the page of the list itself).
			ids, _, err := base.page(context.Background(), base.dbOf(st.BigBoard), "board_pins", st.BigBoard, nil, 0, 50)
			if err != nil {
				return sc, fmt.Errorf("%s: the first page: %w", name, err)
			}
			keys := base.cacheKeys(ids)
			sc.limit = func(ctx context.Context, w *worker) (string, error) { return name, base.cacheMGet(ctx, keys) }
		}
	case "board-page-d10k-cursor":
		if st.Cursor10k == "" {
			return sc, fmt.Errorf("%s: the seeded board has no depth-10,000 cursor", name)
		}
		sc.note = "same, cursor of position 10,000"
		f := get(fmt.Sprintf("/v1/boards/%d/pins?limit=50&cursor=%s", st.BigBoard, url.QueryEscape(st.Cursor10k)))
		sc.api = func(ctx context.Context, w *worker) (string, error) { return name, f(ctx) }
		if base != nil {
			pos := &keyPos{st.Depth10kSeq, st.Depth10kTo}
			sc.base = func(ctx context.Context, w *worker) (string, error) {
				return name, base.boardPage(ctx, st.BigBoard, pos, 0)
			}
		}
	case "board-page-d10k-offset":
		sc.note = "same, offset=10000"
		f := get(fmt.Sprintf("/v1/boards/%d/pins?limit=50&offset=10000", st.BigBoard))
		sc.api = func(ctx context.Context, w *worker) (string, error) { return name, f(ctx) }
		if base != nil {
			sc.base = func(ctx context.Context, w *worker) (string, error) {
				return name, base.boardPage(ctx, st.BigBoard, nil, 10000)
			}
		}
	case "feed-200":
		sc.note = "GET /v1/users/{feeder}/feed?limit=50, 200 followees × 5 pins"
		f := get(fmt.Sprintf("/v1/users/%d/feed?limit=50", st.Feeder))
		sc.api = func(ctx context.Context, w *worker) (string, error) { return name, f(ctx) }
		if base != nil {
			sc.base = func(ctx context.Context, w *worker) (string, error) { return name, base.feed(ctx, st.Feeder) }
		}
	case "board-page-viewer":
		sc.note = "GET /v1/boards/{big}/pins?limit=50&viewer={feeder}: the page with what the viewer liked"
		f := get(fmt.Sprintf("/v1/boards/%d/pins?limit=50&viewer=%d", st.BigBoard, st.Feeder))
		sc.api = func(ctx context.Context, w *worker) (string, error) { return name, f(ctx) }
		if base != nil {
			sc.base = func(ctx context.Context, w *worker) (string, error) {
				return name, base.viewerPage(ctx, "board_pins", st.BigBoard, st.Feeder)
			}
		}
	case "feed-viewer":
		sc.note = "GET /v1/users/{feeder}/feed?limit=50&viewer={feeder}"
		f := get(fmt.Sprintf("/v1/users/%d/feed?limit=50&viewer=%d", st.Feeder, st.Feeder))
		sc.api = func(ctx context.Context, w *worker) (string, error) { return name, f(ctx) }
		if base != nil {
			sc.base = func(ctx context.Context, w *worker) (string, error) {
				return name, base.viewerPage(ctx, "user_feed", st.Feeder, st.Feeder)
			}
		}
	case "like-one-pin", "like-many-pins":
		one := name == "like-one-pin"
		sc.note = "PUT (or, for a pair the worker liked, DELETE) /v1/users/{random}/likes/{pin}: "
		if one {
			sc.note += "every like on one viral pin"
		} else {
			sc.note += "likes spread over every seeded pin"
		}
		pick := func(w *worker) (uint64, uint64, bool) { // user, pin, unlike
			if n := len(w.liked); n > 0 && w.rng.IntN(2) == 0 {
				l := w.liked[n-1]
				w.liked = w.liked[:n-1]
				return l[0], l[1], true
			}
			pin := st.Pins[0]
			if !one {
				pin = p.pin(w)
			}
			u := p.user(w)
			w.liked = append(w.liked, [2]uint64{u, pin})
			return u, pin, false
		}
		sc.api = func(ctx context.Context, w *worker) (string, error) {
			u, pin, unlike := pick(w)
			method := http.MethodPut
			if unlike {
				method = http.MethodDelete
			}
			return name, a.do(ctx, method, fmt.Sprintf("/v1/users/%d/likes/%d", u, pin), "", nil, nil)
		}
		if base != nil {
			sc.base = func(ctx context.Context, w *worker) (string, error) {
				u, pin, unlike := pick(w)
				if unlike {
					return name, base.unlike(ctx, u, pin)
				}
				return name, base.like(ctx, u, pin)
			}
		}
	case "owners-1000":
		sc.note = "POST /v1/pins/owners, 1,000 random pins (Redis warm)"
		batches := ownerBatches(st, 16)
		bodies := make([][]byte, len(batches))
		for i, b := range batches {
			ids := make([]string, len(b))
			for j, id := range b {
				ids[j] = idStr(id)
			}
			bodies[i], _ = json.Marshal(map[string]any{"ids": ids})
		}
		sc.api = func(ctx context.Context, w *worker) (string, error) {
			return name, a.do(ctx, http.MethodPost, "/v1/pins/owners", "application/json", bodies[w.rng.IntN(len(bodies))], nil)
		}
		if base != nil {
			sc.base = func(ctx context.Context, w *worker) (string, error) {
				return name, base.owners(ctx, batches[w.rng.IntN(len(batches))])
			}
		}
	case "edge-check", "edge-check-one", "tao-mix":
		e, err := newEdgeSet(context.Background(), st, a)
		if err != nil {
			return sc, err
		}
		if name != "tao-mix" {
			sc.note = "GET /v1/users/{id}/likes/{pin}, …/following/{user}, and their contains?ids= forms (10 ids), a quarter each, half of the single ones held"
			pick := e.pick
			if name == "edge-check-one" {
				sc.note = "GET /v1/users/{id}/likes/{pin} and …/following/{user}, half each, half of them held: edge-check's checks of one id"
				pick = e.pickOne
			}
			sc.api = func(ctx context.Context, w *worker) (string, error) {
				c := pick(p, w)
				return c.op, apiEdge(ctx, a, c)
			}
			if base != nil {
				sc.base = func(ctx context.Context, w *worker) (string, error) {
					c := pick(p, w)
					return c.op, base.edge(ctx, c)
				}
				sc.limit = func(ctx context.Context, w *worker) (string, error) {
					c := pick(p, w)
					return c.op, base.edgeLimit(ctx, c)
				}
			}
			break
		}
		sc.note = "TAO's read-heavy mix: lists 41 %, object reads 29 %, edge checks 16 %, counts 12 %, time ranges 3 %, writes 0.2 %"
		sc.api = func(ctx context.Context, w *worker) (string, error) { return apiTAO(ctx, a, p, e, w, taoMix.pick(w)) }
		if base != nil {
			sc.base = func(ctx context.Context, w *worker) (string, error) {
				return base.baseTAO(ctx, p, e, w, taoMix.pick(w))
			}
		}
	case "linkbench":
		sc.note = "LinkBench mix, see mapping"
		sc.api = func(ctx context.Context, w *worker) (string, error) {
			op := linkbench.pick(w)
			return op, apiLinkbench(ctx, a, p, w, op)
		}
		if base != nil {
			sc.base = func(ctx context.Context, w *worker) (string, error) {
				op := linkbench.pick(w)
				return op, base.linkbench(ctx, p, w, op)
			}
		}
	default:
		return sc, fmt.Errorf("unknown scenario %q (have %v)", name, allScenarios)
	}
	return sc, nil
}

func apiLinkbench(ctx context.Context, a *apiClient, p picks, w *worker, op string) error {
	switch op {
	case "getlinklist": // a user's followers, first page of 50 with the user objects
		return a.do(ctx, http.MethodGet, fmt.Sprintf("/v1/users/%d/followers?limit=50", p.listUser(w)), "", nil, nil)
	case "getnode":
		return a.do(ctx, http.MethodGet, "/v1/pins/"+idStr(p.pin(w)), "", nil, nil)
	case "addlink": // like a pin
		u, pin := p.user(w), p.pin(w)
		if err := a.do(ctx, http.MethodPut, fmt.Sprintf("/v1/users/%d/likes/%d", u, pin), "", nil, nil); err != nil {
			return err
		}
		w.liked = append(w.liked, [2]uint64{u, pin})
		return nil
	case "updatelink": // move a pin within its board
		b, item, anchor := p.move(w)
		body := []byte(`{"after":"` + idStr(anchor) + `"}`)
		return a.do(ctx, http.MethodPut, fmt.Sprintf("/v1/boards/%d/pins/%d/position", b, item), "application/json", body, nil)
	case "updatenode": // JSON merge patch of a pin
		body := []byte(`{"description":"edited under load ` + strconv.Itoa(w.rng.IntN(1e6)) + `"}`)
		return a.do(ctx, http.MethodPatch, "/v1/pins/"+idStr(p.pin(w)), "application/merge-patch+json", body, nil)
	case "countlink": // a user's follower count: carried on the user, read in the same statement
		return a.do(ctx, http.MethodGet, fmt.Sprintf("/v1/users/%d", p.listUser(w)), "", nil, nil)
	case "deletelink": // unlike one of this worker's likes (or a random pair)
		u, pin := p.user(w), p.pin(w)
		if n := len(w.liked); n > 0 {
			u, pin = w.liked[n-1][0], w.liked[n-1][1]
			w.liked = w.liked[:n-1]
		}
		return a.do(ctx, http.MethodDelete, fmt.Sprintf("/v1/users/%d/likes/%d", u, pin), "", nil, nil)
	case "addnode":
		b, _ := p.sink(w)
		var c created
		if err := a.do(ctx, http.MethodPost, "/v1/pins", "application/json", pinBody(b, w.rng.IntN(1e9)), &c); err != nil {
			return err
		}
		id, _ := strconv.ParseUint(c.ID, 10, 64)
		w.created = append(w.created, id)
		return nil
	case "deletenode": // delete a pin this worker created; create one first if none
		if len(w.created) == 0 {
			if err := apiLinkbench(ctx, a, p, w, "addnode"); err != nil {
				return err
			}
		}
		id := w.created[len(w.created)-1]
		w.created = w.created[:len(w.created)-1]
		return a.do(ctx, http.MethodDelete, "/v1/pins/"+idStr(id), "", nil, nil)
	case "getlink": // does this user like this pin: 204 or 404, from the user's shard
		err := a.do(ctx, http.MethodGet, fmt.Sprintf("/v1/users/%d/likes/%d", p.user(w), p.pin(w)), "", nil, nil)
		if he, ok := err.(*httpError); ok && he.status == http.StatusNotFound {
			err = nil // not liked: an answer, not a failure
		}
		return err
	}
	return fmt.Errorf("unknown op %s", op)
}
