package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

func (v *verifier) checkFollows() {
	all := func(*pair) bool { return true }
	for _, u := range v.users {
		fw := v.list("/v1/users/" + u.ids() + "/following")
		v.checkPairs("follow", "following of "+u.ids(), fw, v.fByFrom[u.id], func(p *pair) *object { return p.to }, all)
		v.checkCount("/v1/users/"+u.ids()+"/following", fw, nil)
		fr := v.list("/v1/users/" + u.ids() + "/followers")
		v.checkPairs("follow", "followers of "+u.ids(), fr, v.fByTo[u.id], func(p *pair) *object { return p.from }, all)
		v.checkCount("/v1/users/"+u.ids()+"/followers", fr, nil)
	}
	// Both sides of every pair agree, whatever its last write was (repair
	// made them agree).
	for _, p := range v.follows {
		fw, fr := v.list("/v1/users/"+p.from.ids()+"/following"), v.list("/v1/users/"+p.to.ids()+"/followers")
		if fw == nil || fr == nil || fw.err != nil || fr.err != nil {
			continue
		}
		if fw.set[p.to.id] != fr.set[p.from.id] {
			v.res.bad("one-sided pair after repair", "follow %d → %d: in following %v, in followers %v", p.from.id, p.to.id, fw.set[p.to.id], fr.set[p.from.id])
		} else {
			v.res.ok("pairs symmetric (both sides agree)")
		}
	}
}

func (v *verifier) checkLikes() {
	pinLive := func(p *pair) bool { return v.got[p.to.id] == http.StatusOK }
	for _, u := range v.users {
		path := "/v1/users/" + u.ids() + "/likes"
		l := v.list(path)
		v.checkPairs("like", "likes of "+u.ids(), l, v.lByFrom[u.id], func(p *pair) *object { return p.to }, pinLive)
		v.checkCount(path, l, func(extra []uint64) (string, bool) { return v.explainLikes(u, extra) })
	}
	for _, p := range v.pins {
		if v.got[p.id] != http.StatusOK {
			continue
		}
		path := "/v1/pins/" + p.ids() + "/likers"
		l := v.list(path)
		v.checkPairs("like", "likers of "+p.ids(), l, v.lByTo[p.id], func(p *pair) *object { return p.from }, func(*pair) bool { return true })
		v.checkCount(path, l, nil)
	}
	for _, p := range v.likes {
		if v.got[p.to.id] != http.StatusOK {
			continue
		}
		l, k := v.list("/v1/users/"+p.from.ids()+"/likes"), v.list("/v1/pins/"+p.to.ids()+"/likers")
		if l == nil || k == nil || l.err != nil || k.err != nil {
			continue
		}
		if l.set[p.to.id] != k.set[p.from.id] {
			v.res.bad("one-sided pair after repair", "like %d → %d: in likes %v, in likers %v", p.from.id, p.to.id, l.set[p.to.id], k.set[p.from.id])
		} else {
			v.res.ok("pairs symmetric (both sides agree)")
		}
	}
}

// explainLikes says why a user's likes count holds rows that the list
// does not show: rows to deleted pins. Only a delete whose outcome is
// unknown (the server died during it) explains one.
func (v *verifier) explainLikes(u *object, extra []uint64) (string, bool) {
	var why []string
	ok := len(extra) > 0
	for _, id := range extra {
		p := v.byID[id]
		if p == nil {
			why = append(why, fmt.Sprintf("%d: not a pin this run created", id))
			ok = false
			continue
		}
		pr := v.lByFrom[u.id]
		var lp *pair
		for _, x := range pr {
			if x.to.id == id {
				lp = x
			}
		}
		desc := fmt.Sprintf("pin %d GET %d, delete %s", id, v.got[id], p.delOutcome)
		if p.deleteTried {
			desc += fmt.Sprintf(" [%s … %s]", p.delStart.Format("15:04:05.000"), p.delEnd.Format("15:04:05.000"))
		}
		if lp != nil {
			desc += fmt.Sprintf(", like membership possible %v", lp.member.possible)
			if !lp.addEnd.IsZero() {
				desc += fmt.Sprintf(", last acknowledged like [%s … %s]", lp.addStart.Format("15:04:05.000"), lp.addEnd.Format("15:04:05.000"))
				if p.deleteTried && lp.addStart.Before(p.delEnd) && lp.addEnd.After(p.delStart) {
					desc += " OVERLAPS the delete"
				}
			}
		}
		if inv, err := v.rawHas("pin_likers", id, u.id); err == nil {
			desc += fmt.Sprintf(", inverse pin_likers row present: %v", inv)
		}
		why = append(why, desc)
		if !(v.got[id] == http.StatusNotFound && p.deleteTried && p.delOutcome != acked) {
			ok = false
		}
	}
	return "rows to deleted pins: " + strings.Join(why, "; "), ok
}

// checkContainers checks board pin lists and users' board and pin lists:
// every acknowledged live member is listed, nothing else unless a create
// under the owner had an unknown outcome, and count = length.
func (v *verifier) checkContainers() {
	boardPins := map[uint64][]*object{}
	userPins := map[uint64][]*object{}
	userBoards := map[uint64][]*object{}
	for _, p := range v.pins {
		b, _ := strconv.ParseUint(p.fixed["board_id"], 10, 64)
		u, _ := strconv.ParseUint(p.fixed["owner_id"], 10, 64)
		boardPins[b] = append(boardPins[b], p)
		userPins[u] = append(userPins[u], p)
	}
	for _, b := range v.boards {
		u, _ := strconv.ParseUint(b.fixed["owner_id"], 10, 64)
		userBoards[u] = append(userBoards[u], b)
	}
	check := func(kind, path string, members []*object, unknown int) {
		w := v.list(path)
		if w == nil || w.err != nil {
			return
		}
		known := map[uint64]bool{}
		for _, m := range members {
			known[m.id] = true
			live := v.got[m.id] == http.StatusOK
			switch {
			case live && !w.set[m.id]:
				v.res.bad("live object missing from its list", "%s: %s %d is live but not listed", path, m.typ, m.id)
			case !live && w.set[m.id]:
				v.res.bad("deleted object listed", "%s: %s %d", path, m.typ, m.id)
			default:
				v.res.ok(kind)
			}
		}
		for _, id := range w.ids {
			if !known[id] {
				if unknown > 0 {
					v.res.skip(kind + ": members from creates with an unknown outcome")
				} else {
					v.res.bad("phantom list member", "%s lists %d, which no acknowledged create made", path, id)
				}
			}
		}
		v.checkCount(path, w, nil)
	}
	for _, b := range v.boards {
		check("board pin lists hold every live pin", "/v1/boards/"+b.ids()+"/pins", boardPins[b.id], b.unknownPins)
	}
	for _, u := range v.users {
		check("user pin lists hold every live pin", "/v1/users/"+u.ids()+"/pins", userPins[u.id], u.unknownPins)
		check("user board lists hold every board", "/v1/users/"+u.ids()+"/boards", userBoards[u.id], u.unknownBoards)
	}
}

// checkOwners asks POST /v1/pins/owners for every pin: a live pin's owner
// is its board's owner; a deleted pin is not_found (the owner cache never
// vouches for it).
func (v *verifier) checkOwners() {
	for i := 0; i < len(v.pins); i += 1000 {
		batch := v.pins[i:min(i+1000, len(v.pins))]
		ids := make([]string, len(batch))
		for j, p := range batch {
			ids[j] = p.ids()
		}
		var a answer
		for try := 0; try < 10; try++ {
			a = v.c.do(context.Background(), http.MethodPost, "/v1/pins/owners", map[string][]string{"ids": ids}, "")
			if a.status == http.StatusOK {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		var resp struct {
			Owners map[string]string `json:"owners"`
		}
		if a.status != http.StatusOK || json.Unmarshal(a.body, &resp) != nil {
			v.res.bad("owners unreadable", "%s %.200s", a.kind, a.body)
			continue
		}
		for _, p := range batch {
			owner, found := resp.Owners[p.ids()]
			switch live := v.got[p.id] == http.StatusOK; {
			case live && owner != p.fixed["owner_id"]:
				v.res.bad("wrong owner", "pin %d: owner %q, want %s", p.id, owner, p.fixed["owner_id"])
			case !live && found && p.delOutcome == acked:
				v.res.bad("owner cache vouches for a deleted pin", "pin %d (delete acknowledged) has owner %s", p.id, owner)
			case !live && found:
				v.res.explain("owner cache vouches for a deleted pin", "pin %d (delete outcome %s) has owner %s", p.id, p.delOutcome, owner)
			default:
				v.res.ok("pin owners (live: owner; deleted: not_found)")
			}
		}
	}
}
