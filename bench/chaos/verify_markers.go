package main

import (
	"fmt"
	"sort"
	"strings"
)

// checkMarkers proves that no create was made twice: every pin and board
// carries its create's unique marker (create.go), so two objects with one
// marker are a create that a retry repeated. It counts the objects per
// marker in every board's pins and every user's boards (live objects,
// through the API), and, with -dsn, in the pins and boards tables of
// every shard that holds a tracked user (deleted objects too).
func (v *verifier) checkMarkers() {
	byMarker := map[string]map[uint64]bool{}
	for path, w := range v.lists {
		if !(strings.HasPrefix(path, "/v1/boards/") && strings.HasSuffix(path, "/pins")) && !strings.HasSuffix(path, "/boards") {
			continue
		}
		for id, m := range w.markers {
			if byMarker[m] == nil {
				byMarker[m] = map[uint64]bool{}
			}
			byMarker[m][id] = true
		}
	}
	for m, ids := range byMarker {
		if len(ids) > 1 {
			v.res.bad("object created twice", "marker %s is on %d live objects: %v", m, len(ids), ids)
		} else {
			v.res.ok("creates made once (live objects per marker, API)")
		}
	}
	if v.db == nil {
		return
	}
	shards := map[uint64]bool{}
	for _, u := range v.users {
		shards[(u.id>>46)&0xffff] = true
	}
	order := make([]uint64, 0, len(shards))
	for sh := range shards {
		order = append(order, sh)
	}
	sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
	for _, sh := range order {
		for _, table := range []string{"pins", "boards"} {
			q := fmt.Sprintf("SELECT JSON_UNQUOTE(JSON_EXTRACT(doc, '$.data.marker')) AS m, COUNT(*) FROM %s%05d.%s GROUP BY m", v.prefix, sh, table)
			rows, err := v.db.Query(q)
			if err != nil {
				v.res.bad("object created twice", "shard %d %s: %v", sh, table, err)
				continue
			}
			for rows.Next() {
				var m *string
				var n int
				if err := rows.Scan(&m, &n); err != nil {
					v.res.bad("object created twice", "shard %d %s: %v", sh, table, err)
					break
				}
				switch {
				case m == nil: // no marker: not a create of this run
				case n > 1:
					v.res.bad("object created twice", "shard %d: marker %s is on %d %s rows (deleted ones included)", sh, *m, n, table)
				default:
					v.res.ok("creates made once (rows per marker, MySQL)")
				}
			}
			rows.Close()
		}
	}
}
