package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// results is what verification found.
type results struct {
	mu         sync.Mutex
	checks     map[string]int // checks passed, by kind
	mismatches map[string]int // checks failed, by kind
	details    []string       // one line per mismatch
	excluded   map[string]int // things whose final state is unknown (unacknowledged writes)
	explained  map[string]int // count ≠ list length, explained by an unacknowledged delete
	explDetail []string
}

func newResults() *results {
	return &results{checks: map[string]int{}, mismatches: map[string]int{}, excluded: map[string]int{}, explained: map[string]int{}}
}

func (r *results) ok(kind string) { r.mu.Lock(); r.checks[kind]++; r.mu.Unlock() }
func (r *results) bad(kind, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mismatches[kind]++
	r.details = append(r.details, kind+": "+fmt.Sprintf(format, args...))
}
func (r *results) skip(kind string) { r.mu.Lock(); r.excluded[kind]++; r.mu.Unlock() }
func (r *results) explain(kind, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.explained[kind]++
	r.explDetail = append(r.explDetail, kind+": "+fmt.Sprintf(format, args...))
}

type verifier struct {
	c      *client
	conns  int
	res    *results
	db     *sql.DB // optional: raw rows for diagnosing a wrong count
	prefix string

	users, boards, pins []*object
	follows, likes      []*pair
	fByFrom, fByTo      map[uint64][]*pair
	lByFrom, lByTo      map[uint64][]*pair
	byID                map[uint64]*object

	got   map[uint64]int // GET status of every object
	lists map[string]*walked
}

type walked struct {
	ids   []uint64
	set   map[uint64]bool
	count int64
	err   error
}

func newVerifier(c *client, conns int, workers []*worker, db *sql.DB, prefix string) *verifier {
	v := &verifier{c: c, conns: conns, res: newResults(), db: db, prefix: prefix,
		fByFrom: map[uint64][]*pair{}, fByTo: map[uint64][]*pair{}, lByFrom: map[uint64][]*pair{}, lByTo: map[uint64][]*pair{},
		byID: map[uint64]*object{}, got: map[uint64]int{}, lists: map[string]*walked{}}
	for _, w := range workers {
		v.users = append(v.users, w.users...)
		v.boards = append(v.boards, w.boards...)
		v.pins = append(v.pins, w.allPins...)
		for _, p := range w.follows {
			v.follows = append(v.follows, p)
			v.fByFrom[p.from.id] = append(v.fByFrom[p.from.id], p)
			v.fByTo[p.to.id] = append(v.fByTo[p.to.id], p)
		}
		for _, p := range w.likes {
			v.likes = append(v.likes, p)
			v.lByFrom[p.from.id] = append(v.lByFrom[p.from.id], p)
			v.lByTo[p.to.id] = append(v.lByTo[p.to.id], p)
		}
	}
	for _, list := range [][]*object{v.users, v.boards, v.pins} {
		for _, o := range list {
			v.byID[o.id] = o
		}
	}
	return v
}

// get GETs path, retrying transport errors and 5xx answers (the server
// must be up and settled now; a persistent failure is a failed check).
func (v *verifier) get(path string) answer {
	var a answer
	for i := 0; i < 10; i++ {
		a = v.c.do(context.Background(), http.MethodGet, path, nil, "")
		if a.err == nil && a.status < 500 {
			return a
		}
		time.Sleep(time.Duration(100*(i+1)) * time.Millisecond)
	}
	return a
}

func (v *verifier) parallel(jobs []func()) {
	ch := make(chan func())
	var wg sync.WaitGroup
	for range v.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				j()
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
}

var collection = map[string]string{"user": "users", "board": "boards", "pin": "pins"}

func (v *verifier) run() {
	// 1. Every object: readable unless deleted, with its last values.
	var mu sync.Mutex
	var jobs []func()
	for _, list := range [][]*object{v.users, v.boards, v.pins} {
		for _, o := range list {
			jobs = append(jobs, func() {
				a := v.get("/v1/" + collection[o.typ] + "/" + o.ids())
				mu.Lock()
				v.got[o.id] = a.status
				mu.Unlock()
				v.checkObject(o, a)
			})
		}
	}
	v.parallel(jobs)

	// 2. Walk every list of every object that is live now.
	jobs = jobs[:0]
	walk := func(path string) {
		jobs = append(jobs, func() {
			w := v.walk(path)
			mu.Lock()
			v.lists[path] = w
			mu.Unlock()
		})
	}
	for _, u := range v.users {
		for _, l := range []string{"following", "followers", "likes", "boards", "pins"} {
			walk("/v1/users/" + u.ids() + "/" + l)
		}
	}
	for _, b := range v.boards {
		walk("/v1/boards/" + b.ids() + "/pins")
	}
	for _, p := range v.pins {
		if v.got[p.id] == http.StatusOK {
			walk("/v1/pins/" + p.ids() + "/likers")
		}
	}
	for _, u := range v.users {
		jobs = append(jobs, func() {
			w := v.walkList("/v1/users/"+u.ids()+"/feed", false)
			mu.Lock()
			v.lists["/v1/users/"+u.ids()+"/feed"] = w
			mu.Unlock()
		})
	}
	v.parallel(jobs)
	for path, w := range v.lists {
		if w.err != nil {
			v.res.bad("list unreadable", "%s: %v", path, w.err)
		}
	}
	v.checkFollows()
	v.checkLikes()
	v.checkContainers()
	v.checkOwners()
	v.checkFeeds()
}

// checkFeeds: after repair, every live user's feed holds exactly the pins
// of the users they follow (each has far fewer than the 1,000 a follow
// copies).
func (v *verifier) checkFeeds() {
	for _, u := range v.users {
		if v.got[u.id] != http.StatusOK {
			continue
		}
		feed, following := v.list("/v1/users/"+u.ids()+"/feed"), v.list("/v1/users/"+u.ids()+"/following")
		if feed == nil || following == nil || feed.err != nil || following.err != nil {
			continue // reported as unreadable
		}
		want := map[uint64]bool{}
		known := true
		for _, f := range following.ids {
			pins := v.list("/v1/users/" + strconv.FormatUint(f, 10) + "/pins")
			if pins == nil || pins.err != nil {
				known = false
				break
			}
			for _, p := range pins.ids {
				want[p] = true
			}
		}
		if !known {
			v.res.skip("feed")
			continue
		}
		var missing, extra []uint64
		for p := range want {
			if !feed.set[p] {
				missing = append(missing, p)
			}
		}
		for _, p := range feed.ids {
			if !want[p] {
				extra = append(extra, p)
			}
		}
		if len(missing)+len(extra) > 0 {
			v.res.bad("feed", "user %d: feed of %d pins lacks %v and holds %v not by a followee", u.id, len(feed.ids), missing, extra)
		} else {
			v.res.ok("feed holds exactly the followees' pins")
		}
	}
}

func (v *verifier) checkObject(o *object, a answer) {
	what := fmt.Sprintf("%s %d", o.typ, o.id)
	live, exact := o.live.exact()
	switch a.status {
	case http.StatusOK:
		if !o.live.possible.has(alive) {
			v.res.bad("acknowledged delete lost", "%s: GET 200 after an acknowledged DELETE", what)
			return
		}
		if exact {
			v.res.ok("objects readable")
		} else {
			v.res.skip("pins with an unacknowledged delete (found live)")
		}
		var wo wireObject
		if err := json.Unmarshal(a.body, &wo); err != nil {
			v.res.bad("unreadable object", "%s: %v", what, err)
			return
		}
		for f, want := range o.fixed {
			if got := wo.field(f); got != want {
				v.res.bad("wrong field", "%s: %s = %q, want %q", what, f, got, want)
			} else {
				v.res.ok("fixed fields")
			}
		}
		for _, f := range sortedKeys(o.fields) {
			fv := o.fields[f]
			got := wo.field(f)
			if want, ok := fv.exact(); ok {
				if got != want {
					v.res.bad("acknowledged edit lost", "%s: %s = %q, want the last acknowledged %q (%d acknowledged writes)", what, f, got, want, fv.acks)
				} else {
					v.res.ok("edits read back (last acknowledged value)")
				}
				continue
			}
			if !fv.possible.has(got) {
				v.res.bad("acknowledged edit lost", "%s: %s = %q, none of the possible values %q", what, f, got, fv.possible)
			} else {
				v.res.skip("fields with an unacknowledged edit (value among the possible ones)")
			}
		}
	case http.StatusNotFound:
		if !o.live.possible.has(dead) {
			v.res.bad("acknowledged create lost", "%s: GET 404, but its create was acknowledged and no delete was sent", what)
			return
		}
		if exact && live == dead {
			v.res.ok("deletes visible (GET 404)")
		} else {
			v.res.skip("pins with an unacknowledged delete (found deleted)")
		}
	default:
		v.res.bad("object unreadable", "%s: %s %s", what, a.kind, a.body)
	}
}

// walk reads every page of a list by cursor.
func (v *verifier) walk(path string) *walked { return v.walkList(path, true) }

// walkList pages through a list by cursor; counted lists must report the
// same count on every page.
func (v *verifier) walkList(path string, counted bool) *walked {
	w := &walked{set: map[uint64]bool{}, count: -1}
	cursor := ""
	for page := 0; ; page++ {
		q := path + "?limit=250"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		a := v.get(q)
		if a.status != http.StatusOK {
			w.err = fmt.Errorf("page %d: %s %.200s", page, a.kind, a.body)
			return w
		}
		var p listPage
		if err := json.Unmarshal(a.body, &p); err != nil {
			w.err = err
			return w
		}
		if !counted {
			// no count to check
		} else if p.Count == nil {
			w.err = fmt.Errorf("page %d has no count", page)
			return w
		} else if page == 0 {
			w.count = *p.Count
		} else if *p.Count != w.count {
			w.err = fmt.Errorf("count changed from %d to %d between pages", w.count, *p.Count)
			return w
		}
		for _, it := range p.Items {
			id, err := strconv.ParseUint(it.ID, 10, 64)
			if err != nil {
				w.err = err
				return w
			}
			if w.set[id] {
				w.err = fmt.Errorf("%d listed twice", id)
				return w
			}
			w.set[id] = true
			w.ids = append(w.ids, id)
		}
		if p.NextCursor == "" {
			return w
		}
		if page > 10000 {
			w.err = fmt.Errorf("more than 10000 pages")
			return w
		}
		cursor = p.NextCursor
	}
}

// checkPairs checks one list against the pairs that may be in it: exact
// membership for pairs whose last write is known, no member without a
// pair that may be present. other(p) is the list's member for pair p;
// usable(p) false excludes a pair (its target is deleted or unknown).
func (v *verifier) checkPairs(kind, path string, w *walked, pairs []*pair, other func(*pair) *object, usable func(*pair) bool) {
	if w == nil || w.err != nil {
		return
	}
	allowed := map[uint64]bool{}
	for _, p := range pairs {
		o := other(p)
		if p.member.possible.has(present) {
			allowed[o.id] = true
		}
		if !usable(p) {
			continue
		}
		m, exact := p.member.exact()
		if !exact {
			v.res.skip(kind + " pairs with an unacknowledged write")
			continue
		}
		in := w.set[o.id]
		switch {
		case m == present && !in:
			v.res.bad("acknowledged "+kind+" lost", "%s: %d missing (last acknowledged write added it at %s)", path, o.id, p.addEnd.Format(time.StampMilli))
		case m == absent && in:
			v.res.bad("acknowledged un"+kind+" lost", "%s: %d listed, but the last acknowledged write removed it (or none added it)", path, o.id)
		default:
			v.res.ok(kind + " pairs exact")
		}
	}
	for _, id := range w.ids {
		if !allowed[id] {
			v.res.bad("phantom "+kind, "%s: lists %d, which no write added", path, id)
		}
	}
}

// checkCount compares a list's count field with the list's length; a
// difference is explained (not a mismatch) when explainedBy says so.
func (v *verifier) checkCount(path string, w *walked, explainedBy func(extra []uint64) (string, bool)) {
	if w == nil || w.err != nil {
		return
	}
	if w.count == int64(len(w.ids)) {
		v.res.ok("counts = list length")
		return
	}
	raw, rawErr := v.rawList(path)
	var extra []uint64
	for _, id := range raw {
		if !w.set[id] {
			extra = append(extra, id)
		}
	}
	diag := ""
	if rawErr == nil {
		diag = fmt.Sprintf("; %d rows in MySQL, not listed: %v", len(raw), extra)
	}
	if explainedBy != nil && rawErr == nil && len(raw) == int(w.count) {
		if why, ok := explainedBy(extra); ok {
			v.res.explain("count ≠ list length", "%s: count %d, %d listed%s; %s", path, w.count, len(w.ids), diag, why)
			return
		}
	}
	why, kind := "", "count ≠ list length"
	if explainedBy != nil && rawErr == nil {
		why, _ = explainedBy(extra)
		if strings.Contains(why, "delete acked") {
			kind += " (a like row outlived its pin's acknowledged delete)"
		}
	}
	v.res.bad(kind, "%s: count %d, %d listed%s %s", path, w.count, len(w.ids), diag, why)
}

// rawList reads a list's rows straight from MySQL (diagnostics only).
func (v *verifier) rawList(path string) ([]uint64, error) {
	if v.db == nil {
		return nil, fmt.Errorf("no -dsn")
	}
	parts := strings.Split(strings.TrimPrefix(path, "/v1/"), "/") // users ID likes
	if len(parts) != 3 {
		return nil, fmt.Errorf("path %s", path)
	}
	from, _ := strconv.ParseUint(parts[1], 10, 64)
	table := map[string]string{"users/following": "user_following", "users/followers": "user_followers", "users/likes": "user_likes",
		"users/boards": "user_boards", "users/pins": "user_pins", "boards/pins": "board_pins", "pins/likers": "pin_likers"}[parts[0]+"/"+parts[2]]
	shard := (from >> 46) & 0xffff
	rows, err := v.db.Query(fmt.Sprintf("SELECT to_id FROM %s%05d.%s WHERE from_id = ?", v.prefix, shard, table), from)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []uint64
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// rawHas reports whether table holds the row from → to (diagnostics only).
func (v *verifier) rawHas(table string, from, to uint64) (bool, error) {
	if v.db == nil {
		return false, fmt.Errorf("no -dsn")
	}
	var n int
	err := v.db.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM %s%05d.%s WHERE from_id = ? AND to_id = ?", v.prefix, (from>>46)&0xffff, table), from, to).Scan(&n)
	return n > 0, err
}

func (v *verifier) list(path string) *walked { return v.lists[path] }

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
