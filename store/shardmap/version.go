package shardmap

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// Version is a short hash of the map's canonical form (Marshal): two maps
// with the same version route identically, however their files are
// formatted. It names a map in logs, in move-shards output and on admin
// endpoints.
func (m *Map) Version() string {
	b, err := m.Marshal()
	if err != nil {
		return "unknown"
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// Summary is "0-3@h0 4-7@h1(ro)": every range and its host, with
// (closed) and (ro) marks, for log lines.
func (m *Map) Summary() string {
	var b strings.Builder
	for i, r := range m.Ranges {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d-%d@%s", r.First, r.Last, r.Host)
		if !r.IsOpen() {
			b.WriteString("(closed)")
		}
		if r.ReadOnly {
			b.WriteString("(ro)")
		}
	}
	return b.String()
}

// Rewrite returns a copy of m in which every shard of first … last has had
// fn applied to its range, keeping every range boundary m had and adding
// boundaries at first and last+1; pieces of one original range that end up
// alike are merged again. The result is validated. A move uses it to mark
// a range read-only and then to put it on its new host.
func (m *Map) Rewrite(first, last int, fn func(*Range)) (*Map, error) {
	out := *m
	out.Ranges = nil
	var origin []int // per out range: index of the range of m it came from
	for i, r := range m.Ranges {
		cuts := []int{r.First}
		for _, c := range []int{first, last + 1} {
			if c > r.First && c <= r.Last {
				cuts = append(cuts, c)
			}
		}
		sort.Ints(cuts)
		for j, a := range cuts {
			p := r
			p.First, p.Last = a, r.Last
			if j+1 < len(cuts) {
				p.Last = cuts[j+1] - 1
			}
			if p.First >= first && p.Last <= last {
				fn(&p)
			}
			if n := len(out.Ranges); n > 0 && origin[n-1] == i {
				prev := &out.Ranges[n-1]
				if prev.Host == p.Host && prev.IsOpen() == p.IsOpen() && prev.ReadOnly == p.ReadOnly {
					prev.Last = p.Last
					continue
				}
			}
			out.Ranges = append(out.Ranges, p)
			origin = append(origin, i)
		}
	}
	for i := range out.Ranges {
		r := &out.Ranges[i]
		r.Shards = fmt.Sprintf("%d-%d", r.First, r.Last)
	}
	if err := out.Validate(); err != nil {
		return nil, err
	}
	return &out, nil
}
