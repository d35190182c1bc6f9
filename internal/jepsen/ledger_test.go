package jepsen

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// verdict is what the ledger says after a scenario.
type verdict struct {
	sent, acked, ackedCreates, ackedEdits int
	refused                               map[int]int // by status
	doubt                                 int         // no answer: timeouts, connections lost
	ackedBy                               map[string]int

	lost        int // acknowledged writes whose effect is gone
	lostCreates int // of which creates: the object is missing or another
	idsReused   int // IDs answered to two creates (two keys)
	keysTwice   int // keys answered with two IDs
	otherBody   int // acknowledged objects read back with a body never sent for them
	forked      int // versions of one object acknowledged with two bodies
	examples    []string
}

func (v *verdict) example(format string, args ...any) {
	if len(v.examples) < 8 {
		v.examples = append(v.examples, fmt.Sprintf(format, args...))
	}
}

// bad reports whether the ledger found a write lost or an ID reused.
func (v *verdict) bad() bool {
	return v.lost+v.idsReused+v.keysTwice+v.otherBody+v.forked > 0
}

// String is the line BENCHMARKS.md quotes.
func (v *verdict) String() string {
	var refused []string
	for _, s := range slices.Sorted(maps.Keys(v.refused)) {
		refused = append(refused, fmt.Sprintf("%d×%d", v.refused[s], s))
	}
	if len(refused) == 0 {
		refused = []string{"none"}
	}
	return fmt.Sprintf("sent %d, acknowledged %d (%d creates, %d edits; by server %v), refused %s, in doubt %d, lost %d (%d creates), IDs reused %d, keys answered with two IDs %d, read back with a body never sent %d, versions forked %d",
		v.sent, v.acked, v.ackedCreates, v.ackedEdits, v.ackedBy, strings.Join(refused, " "), v.doubt, v.lost, v.lostCreates, v.idsReused, v.keysTwice, v.otherBody, v.forked)
}

// readBack reads every pin an acknowledged create named, through s:
// multi-gets of 100; a pin not found is absent from the result.
func readBack(t *testing.T, s *server, ops []*op) map[string]pin {
	t.Helper()
	var ids []string
	seen := map[string]bool{}
	for _, o := range ops {
		if o.kind == "create" && o.acked() && o.id != "" && !seen[o.id] {
			seen[o.id] = true
			ids = append(ids, o.id)
		}
	}
	c := newClient()
	out := map[string]pin{}
	for i := 0; i < len(ids); i += 100 {
		batch := ids[i:min(i+100, len(ids))]
		var a answer
		for range 5 {
			a = c.do(context.Background(), http.MethodGet, s.base+"/v1/pins?ids="+strings.Join(batch, ","), nil)
			if a.status == http.StatusOK {
				break
			}
			time.Sleep(time.Second)
		}
		var page struct {
			Items    []pin    `json:"items"`
			NotFound []string `json:"not_found"`
		}
		if a.status != http.StatusOK || json.Unmarshal(a.body, &page) != nil {
			t.Fatalf("reading back through %s: %d %s %v", s.name, a.status, truncate(a.body), a.err)
		}
		for _, p := range page.Items {
			out[p.ID] = p
		}
	}
	return out
}

// judge compares the ledger with what was read back. A write counts as
// kept when the object reads back with its version and body, or with a
// later version of a line of writes it belongs to (a version
// acknowledged with two bodies keeps only the later-acknowledged one, or
// the one read back). An object missing, or holding a body that was never
// sent for it (another object's, under a reused ID), loses every write
// acknowledged for it.
func judge(ops []*op, final map[string]pin) *verdict {
	v := &verdict{refused: map[int]int{}, ackedBy: map[string]int{}}
	type objKey struct{ key, id string }
	writes := map[objKey][]*op{} // acknowledged, in order of acknowledgement
	sentFor := map[string]map[string]bool{}
	keysOf := map[string]map[string]bool{} // id → keys answered with it
	idsOf := map[string]map[string]bool{}  // key → ids answered for it
	slices.SortStableFunc(ops, func(a, b *op) int { return a.end.Compare(b.end) })
	for _, o := range ops {
		v.sent++
		if sentFor[o.key] == nil {
			sentFor[o.key] = map[string]bool{}
		}
		sentFor[o.key][o.desc] = true
		switch {
		case o.status == 0:
			v.doubt++
			continue
		case !o.acked():
			v.refused[o.status]++
			continue
		}
		v.acked++
		v.ackedBy[o.server]++
		if o.kind == "create" {
			v.ackedCreates++
			if keysOf[o.id] == nil {
				keysOf[o.id] = map[string]bool{}
			}
			keysOf[o.id][o.key] = true
			if idsOf[o.key] == nil {
				idsOf[o.key] = map[string]bool{}
			}
			idsOf[o.key][o.id] = true
		} else {
			v.ackedEdits++
		}
		k := objKey{o.key, o.id}
		writes[k] = append(writes[k], o)
	}
	for id, keys := range keysOf {
		if len(keys) > 1 {
			v.idsReused++
			v.example("ID %s answered to %d creates: %v", id, len(keys), slices.Sorted(maps.Keys(keys)))
		}
	}
	for key, ids := range idsOf {
		if len(ids) > 1 {
			v.keysTwice++
			v.example("key %s answered with %d IDs: %v", key, len(ids), slices.Sorted(maps.Keys(ids)))
		}
	}
	for _, k := range slices.SortedFunc(maps.Keys(writes), func(a, b objKey) int { return strings.Compare(a.key+a.id, b.key+b.id) }) {
		ws := writes[k]
		if !slices.ContainsFunc(ws, func(o *op) bool { return o.kind == "create" }) {
			continue // edits of an object whose create was not acknowledged here: none by construction
		}
		got, found := final[k.id]
		switch {
		case !found:
			v.lost += len(ws)
			v.lostCreates++
			v.example("pin %s (key %s): %d acknowledged writes, the first by %s at %s; not found", k.id, k.key, len(ws), ws[0].server, ws[0].end.Format("15:04:05.000"))
			continue
		case !sentFor[k.key][got.Description]:
			v.lost += len(ws)
			v.lostCreates++
			v.otherBody++
			v.example("pin %s (key %s) reads back %q at version %d: a body never sent for it", k.id, k.key, got.Description, got.Version)
			continue
		}
		byVersion := map[int64][]*op{}
		for _, o := range ws {
			byVersion[o.version] = append(byVersion[o.version], o)
		}
		for ver, same := range byVersion {
			if bodies := distinct(same); bodies > 1 {
				v.forked++
				v.example("pin %s acknowledged at version %d with %d bodies", k.id, ver, bodies)
			}
		}
		for _, o := range ws {
			same := byVersion[o.version]
			switch {
			case got.Version < o.version:
				v.lost++
				v.example("pin %s: %s acknowledged by %s at version %d (%q), reads back at version %d", k.id, o.kind, o.server, o.version, o.desc, got.Version)
			case got.Version == o.version && got.Description != o.desc:
				v.lost++
				v.example("pin %s: %s acknowledged by %s at version %d (%q), reads back %q at that version", k.id, o.kind, o.server, o.version, o.desc, got.Description)
			case got.Version > o.version && distinct(same) > 1 && o != same[len(same)-1]:
				v.lost++
			}
		}
	}
	return v
}

// distinct counts the bodies among ops.
func distinct(ops []*op) int {
	m := map[string]bool{}
	for _, o := range ops {
		m[o.desc] = true
	}
	return len(m)
}

// ackedWhile counts the writes through server that started after from
// and were acknowledged before to.
func ackedWhile(ops []*op, server string, from, to time.Time) int {
	n := 0
	for _, o := range ops {
		if o.server == server && o.acked() && o.start.After(from) && o.end.Before(to) {
			n++
		}
	}
	return n
}

// firstAck is how long after from the first write through one of
// servers that started after from was acknowledged (-1: none was).
func firstAck(ops []*op, from time.Time, servers ...string) time.Duration {
	best := time.Duration(-1)
	for _, o := range ops {
		if o.acked() && o.start.After(from) && slices.Contains(servers, o.server) {
			if d := o.end.Sub(from); best < 0 || d < best {
				best = d
			}
		}
	}
	return best
}

func truncate(b []byte) string {
	if len(b) > 500 {
		return string(b[:500]) + "…"
	}
	return string(b)
}
