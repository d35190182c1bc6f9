package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Fresh reads: the object cache must never answer an older version than
// one a write acknowledged before the read began, nor a deleted object,
// except in the window a fault opens (a Redis pause or restart, a server
// killed with invalidations it had not sent). Every object remembers its
// last acknowledged version and, once acknowledged, its delete; reads of
// pins and boards compare their answer with what was acknowledged when
// they began. A stale answer is measured against the last fault before
// it: a stale read within staleBound of a fault's end is the window the
// design allows (docs/caching.md, "The object cache"); any other is a
// mismatch.

// staleBound is the longest a stale entry may be read after a fault ends:
// the pair/cache sweep (2 s) plus the age a cache_outbox row must reach
// before another server sends it (1 s), plus one second of slack for a
// loaded machine.
const staleBound = 4 * time.Second

// freshness is an object's acknowledged state, read by every worker.
type freshness struct {
	version   atomic.Int64 // highest version a 2xx answer carried
	deletedAt atomic.Int64 // Unix ns of an acknowledged delete's answer, 0 while live
}

// ack records the version of a 2xx answer about the object.
func (f *freshness) ack(body []byte) {
	var o struct {
		Version int64 `json:"version"`
	}
	if json.Unmarshal(body, &o) != nil {
		return
	}
	for {
		old := f.version.Load()
		if o.Version <= old || f.version.CompareAndSwap(old, o.Version) {
			return
		}
	}
}

// faults is the timeline of faults the run injected.
type faults struct {
	mu   sync.Mutex
	ends []time.Time // when each fault ended (Redis back, server restarted); a fault in progress ends at the far future
	open int         // faults in progress
}

// begin records a fault starting; end(i) its end.
func (f *faults) begin() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ends = append(f.ends, time.Now().Add(100*365*24*time.Hour))
	f.open++
	return len(f.ends) - 1
}

func (f *faults) end(i int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ends[i] = time.Now()
	f.open--
}

// sinceLast is how long before t the last fault ended (0 while one is in
// progress), and false when none had happened.
func (f *faults) sinceLast(t time.Time) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	best, found := time.Duration(-1), false
	for _, e := range f.ends {
		d := t.Sub(e)
		if d < 0 {
			d = 0 // in progress at t
		}
		if !found || d < best {
			best, found = d, true
		}
	}
	return best, found
}

// staleness collects stale answers.
type staleness struct {
	mu      sync.Mutex
	checked atomic.Int64
	windows []time.Duration // stale reads within the bound: time since the last fault's end
	bad     []string        // stale reads outside it
}

// check compares a read's answer with what was acknowledged before the
// read began (version, deletedAt taken then) and records a stale answer.
func (s *staleness) check(f *faults, what string, id uint64, version int64, deletedAt int64, a answer) {
	if a.outcome != acked && a.status != http.StatusNotFound {
		return
	}
	s.checked.Add(1)
	stale := ""
	switch {
	case a.status == http.StatusOK && deletedAt != 0:
		stale = "a deleted object answered"
	case a.status == http.StatusOK:
		var o struct {
			Version int64 `json:"version"`
		}
		if json.Unmarshal(a.body, &o) == nil && o.Version < version {
			stale = fmt.Sprintf("version %d, %d acknowledged before the read", o.Version, version)
		}
	}
	if stale == "" {
		return
	}
	d, any := f.sinceLast(a.start)
	s.mu.Lock()
	defer s.mu.Unlock()
	if any && d <= staleBound {
		s.windows = append(s.windows, d)
		return
	}
	s.bad = append(s.bad, fmt.Sprintf("%s %d at %s: %s (last fault ended %v before)", what, id, a.start.Format("15:04:05.000"), stale, d))
}

// summary says how many reads were checked, the stale ones within the
// bound (and the longest), and those outside it.
func (s *staleness) summary() (checked int64, within int, longest time.Duration, bad []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.windows {
		longest = max(longest, w)
	}
	sort.Strings(s.bad)
	return s.checked.Load(), len(s.windows), longest, s.bad
}
