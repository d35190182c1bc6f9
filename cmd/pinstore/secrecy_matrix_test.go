package main

// The secrecy matrix: every route of the table (api.RouteRules), as the
// owner of a board, another user and a service token, against a board
// that is public, secret from the start, or flipped secret → public →
// secret with comments, likes and saves made while it was public. What
// another user must get follows from what the route declares: a request
// naming a secret object on a pathObjects or bodyObjects route is exactly
// the 404 problem of the same request naming missing objects, and no such
// request, read or write, changes a row; every other answer shows no
// secret object, no like of one, no owner of one, and the owner's counts
// without them. The owner and the service token see and do everything.
// A route added to the table without a case here fails the test.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/api"
)

// who is the principal of one request of the matrix.
type who int

const (
	asOwner who = iota
	asOther
	asService
)

func (w who) String() string { return [...]string{"owner", "other user", "service token"}[w] }

// world is one board's story: S owns board B (public, secret, or
// flipped), O is another user.
type world struct {
	s            *server
	name         string
	secret       bool // B ends secret
	S, O         object
	sTok, oTok   string
	B, B2, OB    string // S's board under test, S's public board, O's board
	P, P2, Q, P3 string // pins on B; a pin on B2; S's save of Q onto B
	CS, CO       string // comments on P by S, and by O (made while public; "" when B was secret from the start)
	SC, SC2      string // sections of B; P is in SC
	secretIDs    []string
	n            int
}

// newWorld builds a world with the service token. flips > 0 makes B
// public first, with O's comment and like, then flips it that many times
// (odd: it ends secret).
func newWorld(t *testing.T, s *server, name string, secretFromStart bool, flips int) *world {
	t.Helper()
	w := &world{s: s, name: name, secret: secretFromStart || flips%2 == 1}
	w.S = s.create("/v1/users", map[string]any{"username": "s_" + name})
	w.O = s.create("/v1/users", map[string]any{"username": "o_" + name})
	w.sTok, w.oTok = mintUserToken(t, w.S.ID, "1h"), mintUserToken(t, w.O.ID, "1h")
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+w.S.ID+"/following/"+w.O.ID, nil)
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+w.O.ID+"/following/"+w.S.ID, nil)
	w.B = s.create("/v1/boards", map[string]any{"owner_id": w.S.ID, "name": "b", "secret": secretFromStart}).ID
	w.B2 = s.create("/v1/boards", map[string]any{"owner_id": w.S.ID, "name": "b2"}).ID
	w.OB = s.create("/v1/boards", map[string]any{"owner_id": w.O.ID, "name": "ob"}).ID
	w.P = s.create("/v1/pins", map[string]any{"board_id": w.B, "description": "p"}).ID
	w.P2 = s.create("/v1/pins", map[string]any{"board_id": w.B, "description": "p2"}).ID
	w.Q = s.create("/v1/pins", map[string]any{"board_id": w.B2, "description": "q"}).ID
	w.P3 = s.create("/v1/pins/"+w.Q+"/saves", map[string]any{"board_id": w.B}).ID
	w.CS = s.create("/v1/pins/"+w.P+"/comments", map[string]any{"author_id": w.S.ID, "text": "by s"}).ID
	w.SC = s.create("/v1/boards/"+w.B+"/sections", map[string]any{"name": "sc"}).ID
	w.SC2 = s.create("/v1/boards/"+w.B+"/sections", map[string]any{"name": "sc2"}).ID
	s.must(http.StatusOK, http.MethodPut, "/v1/pins/"+w.P+"/section", map[string]any{"section_id": w.SC})
	s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+w.S.ID+"/likes/"+w.P, nil)
	if !secretFromStart {
		w.CO = s.create("/v1/pins/"+w.P+"/comments", map[string]any{"author_id": w.O.ID, "text": "by o"}).ID
		s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+w.O.ID+"/likes/"+w.P, nil)
	}
	for i := range flips {
		s.as(w.sTok, http.StatusOK, http.MethodPatch, "/v1/boards/"+w.B, map[string]any{"secret": i%2 == 0})
	}
	if w.secret {
		w.secretIDs = []string{w.B, w.P, w.P2, w.P3, w.CS, w.SC, w.SC2}
		if w.CO != "" {
			w.secretIDs = append(w.secretIDs, w.CO)
		}
	}
	return w
}

// uniq is a name no other request of the world uses.
func (w *world) uniq(prefix string) string {
	w.n++
	return fmt.Sprintf("%s%s%d", prefix, w.name, w.n)
}

// freshPin is a new pin on B (secret when B is).
func (w *world) freshPin() string {
	return w.s.create("/v1/pins", map[string]any{"board_id": w.B}).ID
}

// freshBoard is a new board of owner, secret as B is when like is set.
func (w *world) freshBoard(owner string, like bool) string {
	return w.s.create("/v1/boards", map[string]any{"owner_id": owner, "name": "f", "secret": like && w.secret}).ID
}

// freshComment is a new comment by author on P (made by the service
// token; O cannot comment on a secret P, so only while it is public).
func (w *world) freshComment(author string) string {
	return w.s.create("/v1/pins/"+w.P+"/comments", map[string]any{"author_id": author, "text": "f"}).ID
}

// actor is the user a request of as acts for: O for the other user, S
// for the owner and the service token.
func (w *world) actor(as who) string {
	if as == asOther {
		return w.O.ID
	}
	return w.S.ID
}

// mreq is one request of the matrix.
type mreq struct {
	method, path string
	body         any
	tok          string // "" : the principal's own token
}

// mcase is one request a route is tried with. build makes it for a
// principal; fresh asks for objects of its own to change (a write by the
// owner or the service token, or by the other user against a public
// board), so that the world's objects stay for the other cases. ok is
// the status the owner and the service token get (svc when it differs),
// public the other user's when B is public. shows lists what the owner
// and the service token must see in the answer.
type mcase struct {
	build       func(w *world, as who, fresh bool) mreq
	ok, svc     int
	public      int
	shows       func(w *world) []string
	onlyIfOther func(w *world) bool // the case applies only when this holds (an object that exists only in some worlds)
}

func get(path string) func(*world, who, bool) mreq {
	return func(*world, who, bool) mreq { return mreq{method: http.MethodGet, path: path} }
}

// matrixCases are the requests of every route, keyed "METHOD pattern".
func matrixCases() map[string][]mcase {
	sPath := func(f func(w *world) string) func(*world, who, bool) mreq {
		return func(w *world, _ who, _ bool) mreq { return mreq{method: http.MethodGet, path: f(w)} }
	}
	ids := func(f func(w *world) []string) func(*world) []string { return f }
	return map[string][]mcase{
		"GET /healthz":                  {{build: get("/healthz"), ok: 200, public: 200}},
		"GET /readyz":                   {{build: get("/readyz"), ok: 200, public: 200}},
		"GET /openapi.yaml":             {{build: get("/openapi.yaml"), ok: 200, public: 200}},
		"GET /docs":                     {{build: get("/docs"), ok: 200, public: 200}},
		"GET /docs/redoc.standalone.js": {{build: get("/docs/redoc.standalone.js"), ok: 200, public: 200}},
		"GET /metrics":                  {{build: get("/metrics"), ok: 403, svc: 200, public: 403}},
		"GET /v1/admin/shard-map":       {{build: get("/v1/admin/shard-map"), ok: 403, svc: 200, public: 403}},
		"GET /fleet":                    {{build: get("/fleet"), ok: 200, public: 200}},
		"GET /v1/admin/fleet":           {{build: get("/v1/admin/fleet"), ok: 403, svc: 200, public: 403}},
		// The stream itself needs hosts with row binlogs (changes_e2e_test.go):
		// here a malformed token, which a service token is told is one.
		"GET /v1/changes":  {{build: get("/v1/changes?after=x"), ok: 403, svc: 400, public: 403}},
		"GET /v1/ids/{id}": {{build: sPath(func(w *world) string { return "/v1/ids/" + w.P }), ok: 200, public: 200}},

		"POST /v1/users": {{build: func(w *world, _ who, _ bool) mreq {
			return mreq{method: http.MethodPost, path: "/v1/users", body: map[string]any{"username": w.uniq("n")}}
		}, ok: 403, svc: 201, public: 403}},
		"GET /v1/users":                {{build: sPath(func(w *world) string { return "/v1/users?ids=" + w.S.ID + "," + w.O.ID }), ok: 200, public: 200}},
		"GET /v1/usernames/{username}": {{build: sPath(func(w *world) string { return "/v1/usernames/" + w.S.Username }), ok: 200, public: 200}},
		"GET /v1/users/{id}":           {{build: sPath(func(w *world) string { return "/v1/users/" + w.S.ID }), ok: 200, public: 200}},
		"PATCH /v1/users/{id}": {{build: func(w *world, _ who, _ bool) mreq {
			return mreq{method: http.MethodPatch, path: "/v1/users/" + w.S.ID, body: map[string]any{"display_name": w.uniq("d")}}
		}, ok: 200, public: 403}},
		"DELETE /v1/users/{id}": {{build: func(w *world, as who, fresh bool) mreq {
			if as == asOther {
				return mreq{method: http.MethodDelete, path: "/v1/users/" + w.S.ID}
			}
			u := w.s.create("/v1/users", map[string]any{"username": w.uniq("del")}).ID
			r := mreq{method: http.MethodDelete, path: "/v1/users/" + u}
			if as == asOwner { // a user deletes themself
				r.tok = mintUserToken(w.s.t, u, "1h")
			}
			return r
		}, ok: 204, public: 403}},
		"GET /v1/users/{id}/boards": {{build: sPath(func(w *world) string { return "/v1/users/" + w.S.ID + "/boards?limit=250" }), ok: 200, public: 200,
			shows: ids(func(w *world) []string { return []string{w.B} })}},
		"GET /v1/users/{id}/pins": {{build: sPath(func(w *world) string { return "/v1/users/" + w.S.ID + "/pins?limit=250" }), ok: 200, public: 200,
			shows: ids(func(w *world) []string { return []string{w.P, w.P2, w.P3} })}},
		"GET /v1/users/{id}/following":             {{build: sPath(func(w *world) string { return "/v1/users/" + w.O.ID + "/following" }), ok: 200, public: 200}},
		"GET /v1/users/{id}/followers":             {{build: sPath(func(w *world) string { return "/v1/users/" + w.O.ID + "/followers" }), ok: 200, public: 200}},
		"GET /v1/users/{id}/following/contains":    {{build: sPath(func(w *world) string { return "/v1/users/" + w.O.ID + "/following/contains?ids=" + w.S.ID }), ok: 200, public: 200}},
		"GET /v1/users/{id}/following/{target_id}": {{build: sPath(func(w *world) string { return "/v1/users/" + w.O.ID + "/following/" + w.S.ID }), ok: 204, public: 204}},
		"PUT /v1/users/{id}/following/{target_id}": {{build: func(w *world, as who, _ bool) mreq {
			if as == asOther {
				return mreq{method: http.MethodPut, path: "/v1/users/" + w.O.ID + "/following/" + w.S.ID}
			}
			return mreq{method: http.MethodPut, path: "/v1/users/" + w.S.ID + "/following/" + w.O.ID}
		}, ok: 204, public: 204}},
		"DELETE /v1/users/{id}/following/{target_id}": {{build: func(w *world, as who, _ bool) mreq {
			x := w.s.create("/v1/users", map[string]any{"username": w.uniq("x")}).ID // followed by no one
			return mreq{method: http.MethodDelete, path: "/v1/users/" + w.actor(as) + "/following/" + x}
		}, ok: 204, public: 204}},
		"GET /v1/users/{id}/likes": {{build: sPath(func(w *world) string { return "/v1/users/" + w.S.ID + "/likes" }), ok: 200, public: 200,
			shows: ids(func(w *world) []string { return []string{w.P} })}},
		"GET /v1/users/{id}/likes/contains": {{build: sPath(func(w *world) string { return "/v1/users/" + w.S.ID + "/likes/contains?ids=" + w.P + "," + w.Q }), ok: 200, public: 200,
			shows: ids(func(w *world) []string { return []string{w.P} })}},
		"GET /v1/users/{id}/likes/{pin_id}": {{build: sPath(func(w *world) string { return "/v1/users/" + w.S.ID + "/likes/" + w.P }), ok: 204, public: 204}},
		"PUT /v1/users/{id}/likes/{pin_id}": {{build: func(w *world, as who, _ bool) mreq {
			return mreq{method: http.MethodPut, path: "/v1/users/" + w.actor(as) + "/likes/" + w.P}
		}, ok: 204, public: 204}},
		"DELETE /v1/users/{id}/likes/{pin_id}": {{build: func(w *world, as who, fresh bool) mreq {
			pin := w.P
			if fresh {
				pin = w.freshPin()
				w.s.must(http.StatusNoContent, http.MethodPut, "/v1/users/"+w.actor(as)+"/likes/"+pin, nil)
			}
			return mreq{method: http.MethodDelete, path: "/v1/users/" + w.actor(as) + "/likes/" + pin}
		}, ok: 204, public: 204}},
		"GET /v1/users/{id}/feed": {{build: sPath(func(w *world) string { return "/v1/users/" + w.O.ID + "/feed?limit=100" }), ok: 200, public: 200}},

		"POST /v1/boards": {{build: func(w *world, _ who, _ bool) mreq {
			return mreq{method: http.MethodPost, path: "/v1/boards", body: map[string]any{"owner_id": w.S.ID, "name": "n"}}
		}, ok: 201, public: 403}},
		"GET /v1/boards": {{build: sPath(func(w *world) string { return "/v1/boards?ids=" + w.B + "," + w.B2 }), ok: 200, public: 200,
			shows: ids(func(w *world) []string { return []string{w.B} })}},
		"GET /v1/boards/{id}": {{build: sPath(func(w *world) string { return "/v1/boards/" + w.B }), ok: 200, public: 200}},
		"PATCH /v1/boards/{id}": {{build: func(w *world, _ who, _ bool) mreq {
			return mreq{method: http.MethodPatch, path: "/v1/boards/" + w.B, body: map[string]any{"description": w.uniq("d")}}
		}, ok: 200, public: 403}},
		"DELETE /v1/boards/{id}": {{build: func(w *world, _ who, fresh bool) mreq {
			b := w.B
			if fresh {
				b = w.freshBoard(w.S.ID, true)
			}
			return mreq{method: http.MethodDelete, path: "/v1/boards/" + b}
		}, ok: 204, public: 403}},
		"GET /v1/boards/{id}/pins": {{build: sPath(func(w *world) string { return "/v1/boards/" + w.B + "/pins" }), ok: 200, public: 200,
			shows: ids(func(w *world) []string { return []string{w.P} })}},
		"PUT /v1/boards/{id}/pins/{pin_id}/position": {{build: func(w *world, _ who, _ bool) mreq {
			return mreq{method: http.MethodPut, path: "/v1/boards/" + w.B + "/pins/" + w.P + "/position", body: map[string]any{"before": w.P2}}
		}, ok: 204, public: 403}},
		"POST /v1/boards/{id}/sections": {{build: func(w *world, _ who, _ bool) mreq {
			return mreq{method: http.MethodPost, path: "/v1/boards/" + w.B + "/sections", body: map[string]any{"name": w.uniq("s")}}
		}, ok: 201, public: 403}},
		"GET /v1/boards/{id}/sections": {{build: sPath(func(w *world) string { return "/v1/boards/" + w.B + "/sections?limit=250" }), ok: 200, public: 200,
			shows: ids(func(w *world) []string { return []string{w.SC, w.SC2} })}},
		"PUT /v1/boards/{id}/sections/{section_id}/position": {{build: func(w *world, _ who, _ bool) mreq {
			return mreq{method: http.MethodPut, path: "/v1/boards/" + w.B + "/sections/" + w.SC2 + "/position", body: map[string]any{"before": w.SC}}
		}, ok: 204, public: 403}},
		"GET /v1/sections/{id}": {{build: sPath(func(w *world) string { return "/v1/sections/" + w.SC }), ok: 200, public: 200}},
		"PATCH /v1/sections/{id}": {{build: func(w *world, _ who, _ bool) mreq {
			return mreq{method: http.MethodPatch, path: "/v1/sections/" + w.SC, body: map[string]any{"name": w.uniq("s")}}
		}, ok: 200, public: 403}},
		"DELETE /v1/sections/{id}": {{build: func(w *world, _ who, fresh bool) mreq {
			sc := w.SC
			if fresh {
				sc = w.s.create("/v1/boards/"+w.B+"/sections", map[string]any{"name": "f"}).ID
			}
			return mreq{method: http.MethodDelete, path: "/v1/sections/" + sc}
		}, ok: 204, public: 403}},
		"GET /v1/sections/{id}/pins": {{build: sPath(func(w *world) string { return "/v1/sections/" + w.SC + "/pins" }), ok: 200, public: 200,
			shows: ids(func(w *world) []string { return []string{w.P} })}},

		"POST /v1/pins": {{build: func(w *world, _ who, _ bool) mreq {
			return mreq{method: http.MethodPost, path: "/v1/pins", body: map[string]any{"board_id": w.B}}
		}, ok: 201, public: 403}},
		"GET /v1/pins": {{build: sPath(func(w *world) string { return "/v1/pins?ids=" + w.P + "," + w.Q + "," + w.P3 }), ok: 200, public: 200,
			shows: ids(func(w *world) []string { return []string{w.P, w.P3} })}},
		"POST /v1/pins/owners": {{build: func(w *world, _ who, _ bool) mreq {
			return mreq{method: http.MethodPost, path: "/v1/pins/owners", body: map[string]any{"ids": []string{w.P, w.Q}}}
		}, ok: 200, public: 200, shows: ids(func(w *world) []string { return []string{w.P} })}},
		"GET /v1/pins/{id}": {{build: sPath(func(w *world) string { return "/v1/pins/" + w.P }), ok: 200, public: 200}},
		"PATCH /v1/pins/{id}": {{build: func(w *world, _ who, _ bool) mreq {
			return mreq{method: http.MethodPatch, path: "/v1/pins/" + w.P, body: map[string]any{"description": w.uniq("d")}}
		}, ok: 200, public: 403}},
		"DELETE /v1/pins/{id}": {{build: func(w *world, _ who, fresh bool) mreq {
			p := w.P
			if fresh {
				p = w.freshPin()
			}
			return mreq{method: http.MethodDelete, path: "/v1/pins/" + p}
		}, ok: 204, public: 403}},
		"PUT /v1/pins/{id}/section": {{build: func(w *world, _ who, fresh bool) mreq {
			p := w.P
			if fresh {
				p = w.freshPin()
			}
			return mreq{method: http.MethodPut, path: "/v1/pins/" + p + "/section", body: map[string]any{"section_id": w.SC2}}
		}, ok: 200, public: 403}},
		"GET /v1/pins/{id}/likers": {{build: sPath(func(w *world) string { return "/v1/pins/" + w.P + "/likers" }), ok: 200, public: 200}},
		"POST /v1/pins/{id}/saves": {{build: func(w *world, as who, _ bool) mreq {
			owner := w.actor(as)
			return mreq{method: http.MethodPost, path: "/v1/pins/" + w.P + "/saves", body: map[string]any{"board_id": w.freshBoard(owner, false)}}
		}, ok: 201, public: 201}},
		"GET /v1/pins/{id}/saves": {
			{build: sPath(func(w *world) string { return "/v1/pins/" + w.P + "/saves" }), ok: 200, public: 200},
			{build: sPath(func(w *world) string { return "/v1/pins/" + w.Q + "/saves" }), ok: 200, public: 200, // saves onto the secret board
				shows: ids(func(w *world) []string { return []string{w.P3} })},
		},
		"POST /v1/pins/{id}/comments": {{build: func(w *world, as who, _ bool) mreq {
			return mreq{method: http.MethodPost, path: "/v1/pins/" + w.P + "/comments", body: map[string]any{"author_id": w.actor(as), "text": "t"}}
		}, ok: 201, public: 201}},
		"GET /v1/pins/{id}/comments": {{build: sPath(func(w *world) string { return "/v1/pins/" + w.P + "/comments" }), ok: 200, public: 200,
			shows: ids(func(w *world) []string { return []string{w.CS} })}},

		"GET /v1/comments/{id}": {
			{build: sPath(func(w *world) string { return "/v1/comments/" + w.CS }), ok: 200, public: 200},
			{build: sPath(func(w *world) string { return "/v1/comments/" + w.CO }), ok: 200, public: 200, onlyIfOther: func(w *world) bool { return w.CO != "" }},
		},
		"PATCH /v1/comments/{id}": {
			{build: func(w *world, _ who, _ bool) mreq {
				return mreq{method: http.MethodPatch, path: "/v1/comments/" + w.CS, body: map[string]any{"text": w.uniq("t")}}
			}, ok: 200, svc: 200, public: 403},
			// The other user's own comment, made while the board was public.
			{build: func(w *world, _ who, _ bool) mreq {
				return mreq{method: http.MethodPatch, path: "/v1/comments/" + w.CO, body: map[string]any{"text": w.uniq("t")}}
			}, ok: 403, svc: 200, public: 200, onlyIfOther: func(w *world) bool { return w.CO != "" }},
		},
		"DELETE /v1/comments/{id}": {
			{build: func(w *world, _ who, fresh bool) mreq {
				c := w.CS
				if fresh {
					c = w.freshComment(w.S.ID)
				}
				return mreq{method: http.MethodDelete, path: "/v1/comments/" + c}
			}, ok: 204, public: 403},
			{build: func(w *world, as who, fresh bool) mreq {
				c := w.CO
				if fresh && !w.secret { // on a secret pin O can comment no more: the service token, last, deletes CO itself
					c = w.freshComment(w.O.ID)
				}
				return mreq{method: http.MethodDelete, path: "/v1/comments/" + c}
			}, ok: 403, svc: 204, public: 204, onlyIfOther: func(w *world) bool { return w.CO != "" }},
		},
	}
}

// namesSecret reports whether r names a secret object of w in its path
// (not its query) or body.
func (w *world) namesSecret(r mreq) bool {
	path, _, _ := strings.Cut(r.path, "?")
	body, _ := json.Marshal(r.body)
	for _, id := range w.secretIDs {
		if strings.Contains(path+"/", "/"+id+"/") || strings.Contains(string(body), `"`+id+`"`) {
			return true
		}
	}
	return false
}

// twin is r naming, instead of each secret object of w, an id of the same
// shard and type that no object has.
func (w *world) twin(r mreq) mreq {
	rep := make([]string, 0, 2*len(w.secretIDs))
	for _, id := range w.secretIDs {
		rep = append(rep, id, unknownSibling(w.s.t, id))
	}
	repl := strings.NewReplacer(rep...)
	out := r
	out.path = repl.Replace(r.path)
	if r.body != nil {
		b, _ := json.Marshal(r.body)
		out.body = repl.Replace(string(b))
	}
	return out
}

// send sends r as as (the service token: the client's default).
func (w *world) send(as who, r mreq) *response {
	tok := r.tok
	if tok == "" {
		tok = map[who]string{asOwner: w.sTok, asOther: w.oTok, asService: e2eAdminToken}[as]
	}
	return w.s.req(r.method, r.path, r.body, bearerHdr(tok)...)
}

// userCounts is what S's boards and pins are, all and visible to others.
type userCounts struct{ boards, pins, visibleBoards, visiblePins int64 }

func (w *world) counts() userCounts {
	var c userCounts
	for _, l := range []struct {
		path      string
		all, seen *int64
	}{{"/v1/users/" + w.S.ID + "/boards?limit=250", &c.boards, &c.visibleBoards}, {"/v1/users/" + w.S.ID + "/pins?limit=250", &c.pins, &c.visiblePins}} {
		var page list
		w.s.must(http.StatusOK, http.MethodGet, l.path, nil).decode(w.s.t, &page)
		if page.NextCursor != nil {
			w.s.t.Fatalf("%s: more than one page", l.path)
		}
		*l.all = int64(len(page.Items))
		for _, o := range page.Items {
			if !o.Secret {
				*l.seen++
			}
		}
	}
	return c
}

// seenIn walks a JSON answer and reports what it shows: the ids of the
// objects it renders (members with "id" and "created_at"), the keys of an
// "owners" map, the ids a contains answer says are liked; and calls user
// for each rendered user with its counts, list with a list's count.
func seenIn(body []byte, user func(id string, counts map[string]int64), list func(count int64)) map[string]bool {
	var v any
	seen := map[string]bool{}
	if json.Unmarshal(body, &v) != nil {
		return seen
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			id, _ := v["id"].(string)
			if _, ok := v["created_at"]; ok && id != "" {
				seen[id] = true
				if v["type"] == "user" {
					counts := map[string]int64{}
					if c, ok := v["counts"].(map[string]any); ok {
						for k, n := range c {
							f, _ := n.(float64)
							counts[k] = int64(f)
						}
					}
					user(id, counts)
				}
			}
			if liked, ok := v["liked"].(bool); ok && liked && id != "" {
				seen[id] = true
			}
			if owners, ok := v["owners"].(map[string]any); ok {
				for k := range owners {
					seen[k] = true
				}
			}
			if n, ok := v["count"].(float64); ok {
				list(int64(n))
			}
			for _, m := range v {
				walk(m)
			}
		case []any:
			for _, m := range v {
				walk(m)
			}
		}
	}
	walk(v)
	return seen
}

func TestSecrecyMatrixE2E(t *testing.T) {
	s := startServer(t)
	cases := matrixCases()
	rules := api.RouteRules()
	for _, r := range rules {
		if len(cases[r.Method+" "+r.Pattern]) == 0 {
			t.Errorf("%s %s is in the route table but not in the secrecy matrix", r.Method, r.Pattern)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	worlds := []struct {
		name   string
		secret bool
		flips  int
	}{{"public", false, 0}, {"secret", true, 0}, {"flipped", false, 3}}
	total := 0
	for _, wd := range worlds {
		w := newWorld(t, s, wd.name, wd.secret, wd.flips)
		// The other user first: none of their requests that must be the
		// missing object's 404 may change a row.
		var refused []func()
		for _, r := range rules {
			key := r.Method + " " + r.Pattern
			hides := slices.Contains(r.Visibility, "pathObjects") || slices.Contains(r.Visibility, "bodyObjects")
			for i, c := range cases[key] {
				if c.onlyIfOther != nil && !c.onlyIfOther(w) {
					continue
				}
				name := fmt.Sprintf("%s: %s #%d as %s", w.name, key, i, asOther)
				req := c.build(w, asOther, !w.secret) // against a public board, the other user's writes take objects of their own
				if w.secret && hides && w.namesSecret(req) {
					refused = append(refused, func() { w.checkMissing(name, req) })
					continue
				}
				total++
				w.checkOther(name, req, c.public)
			}
		}
		if len(refused) > 0 {
			before := s.settledDB()
			for _, check := range refused {
				check()
			}
			s.requireSameDB(before, s.dbState())
			total += len(refused)
		}
		// The owner and the service token see and do everything.
		for _, as := range []who{asOwner, asService} {
			for _, r := range rules {
				key := r.Method + " " + r.Pattern
				for i, c := range cases[key] {
					if c.onlyIfOther != nil && !c.onlyIfOther(w) {
						continue
					}
					name := fmt.Sprintf("%s: %s #%d as %s", w.name, key, i, as)
					req := c.build(w, as, true)
					want := c.ok
					if as == asService && c.svc != 0 {
						want = c.svc
					}
					w.checkSees(name, as, req, want, c.shows)
					total++
				}
			}
		}
	}
	t.Logf("%d requests over %d routes in 3 worlds", total, len(rules))
}

// checkMissing: the other user sending req (naming a secret object) gets
// exactly the problem of the same request naming missing objects.
func (w *world) checkMissing(name string, req mreq) {
	t := w.s.t
	t.Helper()
	got, want := w.send(asOther, req), w.send(asOther, w.twin(req))
	if got.Status != http.StatusNotFound || want.Status != http.StatusNotFound {
		t.Errorf("%s: %s %s answers %d %s; the same request naming missing objects %d %s", name, req.method, req.path, got.Status, truncate(got.Body), want.Status, truncate(want.Body))
		return
	}
	a, b := got.problem(t), want.problem(t)
	norm := func(s string) string { return digits.ReplaceAllString(s, "N") }
	if a.Code != b.Code || a.Title != b.Title || a.Type != b.Type || norm(a.Detail) != norm(b.Detail) || norm(a.Instance) != norm(b.Instance) {
		t.Errorf("%s: %s %s answers %+v; naming missing objects %+v", name, req.method, req.path, a, b)
	}
}

// checkOther: the other user sending req (naming no secret object, or on
// a route that does not hide by what it names) gets the status of a
// public board, and an answer that shows nothing secret.
func (w *world) checkOther(name string, req mreq, want int) {
	t := w.s.t
	t.Helper()
	r := w.send(asOther, req)
	if r.Status != want {
		t.Errorf("%s: %s %s: %d, want %d: %s", name, req.method, req.path, r.Status, want, truncate(r.Body))
		return
	}
	c := w.counts()
	listPath, _, _ := strings.Cut(req.path, "?")
	seen := seenIn(r.Body, func(id string, counts map[string]int64) {
		if id == w.S.ID && (counts["boards"] != c.visibleBoards || counts["pins"] != c.visiblePins) {
			t.Errorf("%s: %s %s shows the owner's counts %v; others see %d boards and %d pins", name, req.method, req.path, counts, c.visibleBoards, c.visiblePins)
		}
	}, func(n int64) {
		want := map[string]int64{"/v1/users/" + w.S.ID + "/boards": c.visibleBoards, "/v1/users/" + w.S.ID + "/pins": c.visiblePins}
		if v, ok := want[listPath]; ok && n != v {
			t.Errorf("%s: %s counts %d; others see %d", name, req.path, n, v)
		}
	})
	for _, id := range w.secretIDs {
		if seen[id] {
			t.Errorf("%s: %s %s shows secret %s: %s", name, req.method, req.path, id, truncate(r.Body))
		}
	}
}

// checkSees: the owner or the service token gets want, sees every object
// shows lists, and the owner's exact counts.
func (w *world) checkSees(name string, as who, req mreq, want int, shows func(*world) []string) {
	t := w.s.t
	t.Helper()
	r := w.send(as, req)
	if r.Status != want {
		t.Errorf("%s: %s %s: %d, want %d: %s", name, req.method, req.path, r.Status, want, truncate(r.Body))
		return
	}
	if shows == nil && !strings.Contains(string(r.Body), w.S.ID) {
		return
	}
	c := w.counts()
	seen := seenIn(r.Body, func(id string, counts map[string]int64) {
		if id == w.S.ID && (counts["boards"] != c.boards || counts["pins"] != c.pins) {
			t.Errorf("%s: %s %s shows the owner's counts %v; want %d boards and %d pins", name, req.method, req.path, counts, c.boards, c.pins)
		}
	}, func(int64) {})
	if shows != nil {
		for _, id := range shows(w) {
			if !seen[id] {
				t.Errorf("%s: %s %s does not show %s: %s", name, req.method, req.path, id, truncate(r.Body))
			}
		}
	}
}

// settledDB is dbState once background work (feed fan-out, cache and
// pair outboxes) has finished: two reads 200 ms apart that agree.
func (s *server) settledDB() map[string]tableState {
	s.t.Helper()
	prev := s.dbState()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		cur := s.dbState()
		if fmt.Sprint(cur) == fmt.Sprint(prev) {
			return cur
		}
		prev = cur
	}
	s.t.Fatal("the shard databases kept changing for 20s")
	return nil
}
