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
	ids     []uint64
	set     map[uint64]bool
	markers map[uint64]string // each item's data.marker, when it has one
	count   int64
	err     error
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
	v.checkMarkers()
}

// checkFeeds: after repair, every live user's feed holds exactly the pins
// of the users they follow, whether each followee is pushed or pulled
// (-pull-threshold): a pushed followee's pins reach the feed by the
// follow's copy of their newest 1,000 (each has far fewer) and by fan-out,
// a pulled followee's by the read-time merge of all their pins, so either
// way the expected part is every live pin of theirs. Feeds that merge
// pulled followees are counted apart.
func (v *verifier) checkFeeds() {
	pulled := v.pulledAuthors()
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
		nPulled := 0
		for _, f := range following.ids {
			if pulled[f] {
				nPulled++
			}
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
		} else if nPulled > 0 {
			v.res.ok("feed with pulled followees holds exactly the followees' pins")
		} else {
			v.res.ok("feed holds exactly the followees' pins")
		}
	}
}

// pulledAuthors reads, from the raw rows of every shard, which authors
// are pulled (feed_pull_authors); none without the database.
func (v *verifier) pulledAuthors() map[uint64]bool {
	out := map[uint64]bool{}
	if v.db == nil {
		return out
	}
	rows, err := v.db.Query("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?", v.prefix+"%")
	if err != nil {
		return out
	}
	var dbs []string
	for rows.Next() {
		var name string
		if rows.Scan(&name) == nil {
			dbs = append(dbs, name)
		}
	}
	rows.Close()
	for _, name := range dbs {
		var ids []uint64
		r, err := v.db.Query("SELECT author_id FROM " + name + ".feed_pull_authors")
		if err != nil {
			continue // a database of another version: no pulled authors
		}
		for r.Next() {
			var id uint64
			if r.Scan(&id) == nil {
				ids = append(ids, id)
			}
		}
		r.Close()
		for _, id := range ids {
			out[id] = true
		}
	}
	return out
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
	w := &walked{set: map[uint64]bool{}, markers: map[uint64]string{}, count: -1}
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
			if it.Data.Marker != "" {
				w.markers[id] = it.Data.Marker
			}
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
