package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/idcodec"
)

// Edge checks: does a user like a pin, follow a user, for one id or a set
// (TAO's assoc_get), and the read-heavy mix TAO published around them.

// likers is how many seeded users like edgeLikes pins each for the edge
// checks (put by the api client before the scenario, idempotently).
const (
	likers    = 64
	edgeLikes = 4
)

// edgeSet is the likes the edge checks find: likes[i] are the pins
// Users[i] likes.
type edgeSet struct {
	likes [likers][edgeLikes]uint64
}

// newEdgeSet picks the liked pins (the same in every run) and, with a
// client, likes them through the API.
func newEdgeSet(ctx context.Context, st *State, a *apiClient) (*edgeSet, error) {
	e := &edgeSet{}
	for i := range likers {
		for k := range edgeLikes {
			e.likes[i][k] = st.Pins[(i*37+k*1009)%len(st.Pins)]
		}
	}
	if a == nil {
		return e, nil
	}
	var wg sync.WaitGroup
	errs := make([]error, likers)
	for i := range likers { // a user's likes in order, the users at once
		wg.Go(func() {
			for _, p := range e.likes[i] {
				if err := a.do(ctx, http.MethodPut, fmt.Sprintf("/v1/users/%d/likes/%d", st.Users[i], p), "", nil, nil); err != nil {
					errs[i] = fmt.Errorf("edge checks: liking: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	return e, errors.Join(errs...)
}

// edgeCheck is one check: op its name, path the API's, and the raw
// select's parts (table on from's shard, the ids asked for).
type edgeCheck struct {
	op, path string
	table    string
	from     uint64
	tos      []uint64
}

// pick draws one of the four checks, half of the single ones for an edge
// that exists; the contains forms ask for 10 ids, about half held.
func (e *edgeSet) pick(p picks, w *worker) edgeCheck { return e.pickOf(p, w, 4) }

// pickOne picks one of the checks of a single id: like-check or
// follow-check.
func (e *edgeSet) pickOne(p picks, w *worker) edgeCheck { return e.pickOf(p, w, 2) }

// pickOf picks one of the first n of like-check, follow-check,
// likes-contains and follows-contains, alike.
func (e *edgeSet) pickOf(p picks, w *worker, n int) edgeCheck {
	st := p.st
	switch w.rng.IntN(n) {
	case 0:
		i := w.rng.IntN(likers)
		pin := e.likes[i][w.rng.IntN(edgeLikes)]
		if w.rng.IntN(2) == 0 {
			pin = p.pin(w)
		}
		return edgeCheck{op: "like-check", path: fmt.Sprintf("/v1/users/%d/likes/%d", st.Users[i], pin), table: "user_likes", from: st.Users[i], tos: []uint64{pin}}
	case 1:
		u, to := p.user(w), st.Users[st.Heavy[w.rng.IntN(len(st.Heavy))]] // every seeded user follows the heavy ones
		if w.rng.IntN(2) == 0 {
			to = p.user(w)
		}
		return edgeCheck{op: "follow-check", path: fmt.Sprintf("/v1/users/%d/following/%d", u, to), table: "user_following", from: u, tos: []uint64{to}}
	case 2:
		i := w.rng.IntN(likers)
		tos := append([]uint64(nil), e.likes[i][:]...)
		for len(tos) < 10 {
			tos = append(tos, p.pin(w))
		}
		return edgeCheck{op: "likes-contains", path: fmt.Sprintf("/v1/users/%d/likes/contains?ids=%s", st.Users[i], joinIDs(tos)), table: "user_likes", from: st.Users[i], tos: tos}
	default:
		u := p.user(w)
		var tos []uint64
		for _, h := range st.Heavy {
			tos = append(tos, st.Users[h])
		}
		for len(tos) < 10 {
			tos = append(tos, p.user(w))
		}
		return edgeCheck{op: "follows-contains", path: fmt.Sprintf("/v1/users/%d/following/contains?ids=%s", u, joinIDs(tos)), table: "user_following", from: u, tos: tos}
	}
}

func joinIDs(ids []uint64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = idStr(id)
	}
	return strings.Join(s, ",")
}

// apiEdge runs check c on the API: 204 and 404 are both answers.
func apiEdge(ctx context.Context, a *apiClient, c edgeCheck) error {
	err := a.do(ctx, http.MethodGet, c.path, "", nil, nil)
	if he, ok := err.(*httpError); ok && he.status == http.StatusNotFound && !strings.Contains(c.op, "contains") {
		return nil
	}
	return err
}

// edge is the raw equivalent of check c: the edge rows alone, one
// primary-key select (IN for a set) on from's shard, reading neither
// from's row nor those of the ids.
func (b *baseline) edge(ctx context.Context, c edgeCheck) error {
	q, args, err := sqlx.In("SELECT to_id FROM "+b.dbOf(c.from)+"."+c.table+" WHERE from_id = ? AND to_id IN (?)", c.from, c.tos)
	if err != nil {
		return err
	}
	rows, err := b.db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
	}
	return rows.Err()
}

// edgeLimit is the Redis limit of check c: one MGET of the cache entries
// of from and the ids.
func (b *baseline) edgeLimit(ctx context.Context, c edgeCheck) error {
	return b.cacheMGet(ctx, b.cacheKeys(append([]uint64{c.from}, c.tos...)))
}

// taoMix is the read-heavy mix of requests TAO serves (Bronson et al.,
// USENIX ATC 2013: assoc_range 40.9 %, obj_get 28.9 %, assoc_get 15.7 %,
// assoc_count 11.7 %, assoc_time_range 2.8 %, writes 0.2 %), rounded, and
// mapped onto pinstore (BENCHMARKS.md).
var taoMix = opMix{
	{"list", 41}, {"object", 29}, {"edge", 16}, {"count", 12}, {"time-range", 3}, {"write", 0.2},
}

// apiTAO runs one operation of the mix on the API; an edge check reports
// under its own name.
func apiTAO(ctx context.Context, a *apiClient, p picks, e *edgeSet, w *worker, op string) (string, error) {
	switch op {
	case "list": // a user's followers, first page of 50, with the users
		return op, a.do(ctx, http.MethodGet, fmt.Sprintf("/v1/users/%d/followers?limit=50", p.listUser(w)), "", nil, nil)
	case "object":
		return op, a.do(ctx, http.MethodGet, "/v1/pins/"+idStr(p.pin(w)), "", nil, nil)
	case "edge":
		c := e.pick(p, w)
		return "edge: " + c.op, apiEdge(ctx, a, c)
	case "count": // a user's follower count, carried on the user
		return op, a.do(ctx, http.MethodGet, fmt.Sprintf("/v1/users/%d", p.listUser(w)), "", nil, nil)
	case "time-range": // a user's followers of the last hour
		return op, a.do(ctx, http.MethodGet, fmt.Sprintf("/v1/users/%d/followers?limit=50&since=%s", p.listUser(w), time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)), "", nil, nil)
	default: // like a pin, or take back a like of this worker's
		u, pin, method := p.user(w), p.pin(w), http.MethodPut
		if n := len(w.liked); n > 0 && w.rng.IntN(2) == 0 {
			u, pin, method = w.liked[n-1][0], w.liked[n-1][1], http.MethodDelete
			w.liked = w.liked[:n-1]
		} else {
			w.liked = append(w.liked, [2]uint64{u, pin})
		}
		return op, a.do(ctx, method, fmt.Sprintf("/v1/users/%d/likes/%d", u, pin), "", nil, nil)
	}
}

// baseTAO is one operation of the mix straight on MySQL.
func (b *baseline) baseTAO(ctx context.Context, p picks, e *edgeSet, w *worker, op string) (string, error) {
	switch op {
	case "list":
		return op, b.linkbench(ctx, p, w, "getlinklist")
	case "object":
		return op, b.getPin(ctx, p.pin(w))
	case "edge":
		c := e.pick(p, w)
		return "edge: " + c.op, b.edge(ctx, c)
	case "count":
		return op, b.linkbench(ctx, p, w, "countlink")
	case "time-range":
		u := p.listUser(w)
		since := time.Now().Add(-time.Hour).UnixMilli()
		rows, err := b.db.QueryContext(ctx, "SELECT to_id FROM "+b.dbOf(u)+".user_followers WHERE from_id = ? AND sequence >= ? ORDER BY sequence DESC, to_id DESC LIMIT 51", u, since)
		if err != nil {
			return op, err
		}
		var ids []uint64
		for rows.Next() {
			var id uint64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return op, err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if len(ids) > 50 {
			ids = ids[:50]
		}
		_, err = b.getMany(ctx, ids, idcodec.TypeUser)
		return op, err
	default:
		u, pin := p.user(w), p.pin(w)
		if n := len(w.liked); n > 0 && w.rng.IntN(2) == 0 {
			u, pin = w.liked[n-1][0], w.liked[n-1][1]
			w.liked = w.liked[:n-1]
			return op, b.unlike(ctx, u, pin)
		}
		w.liked = append(w.liked, [2]uint64{u, pin})
		return op, b.like(ctx, u, pin)
	}
}
