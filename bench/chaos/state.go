package main

import (
	"bufio"
	"encoding/json"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"
)

// The expected state. Every object and every follow/like pair is owned by
// one worker (the worker that created the object; the worker owning the
// pair's user), and only its owner writes it, so the writes to any one
// thing are sequential and "the last acknowledged write wins" is well
// defined. What an unacknowledged write did is unknown: the state keeps,
// per thing, the set of final values that are still possible.
//
//   - an acknowledged write makes its value the only possible one, plus the
//     values of earlier writes that timed out (they may still land later);
//   - a write whose answer was a 5xx or whose connection died adds its
//     value to the possible ones;
//   - a write that was refused before being sent, or answered 4xx, changes
//     nothing.

// set is a small set of possible final values.
type set []string

func (s set) has(v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func (s set) add(v string) set {
	if s.has(v) {
		return s
	}
	return append(s, v)
}

// value tracks one field (or a pair's membership, or an object's
// liveness): possible final values, and values of writes still pending.
type value struct {
	possible set
	pending  set
	acks     int // acknowledged writes of this value-holder
}

func newValue(v string) *value { return &value{possible: set{v}} }

func (v *value) apply(x string, o outcome) {
	switch o {
	case acked:
		v.possible = append(set{x}, v.pending...)
		v.acks++
	case unknownSettled:
		v.possible = v.possible.add(x)
	case unknownPending:
		v.possible = v.possible.add(x)
		v.pending = v.pending.add(x)
	}
}

// exact reports whether the final value is known, and which.
func (v *value) exact() (string, bool) {
	if len(v.possible) == 1 {
		return v.possible[0], true
	}
	return "", false
}

const (
	alive   = "alive"
	dead    = "dead"
	present = "present"
	absent  = "absent"
)

// object is an object whose create was acknowledged (only those have an
// ID the harness knows).
type object struct {
	id     uint64
	typ    string // user, board, pin
	worker int
	fixed  map[string]string // fields no write changes: username, owner_id, board_id
	fields map[string]*value // editable fields
	live   *value            // alive / dead
	// unknownBoards and unknownPins count creates under this object (a
	// user's boards, a user's or board's pins) whose outcome is unknown: its
	// lists may hold objects the harness never learnt of.
	unknownBoards, unknownPins int
	// times of the last delete attempt (for diagnostics)
	delStart, delEnd time.Time
	delOutcome       outcome
	deleteTried      bool
	fresh            freshness // what reads must not go behind (fresh.go)
}

func (o *object) ids() string { return strconv.FormatUint(o.id, 10) }

// pair is a follow (user → user) or like (user → pin) pair.
type pair struct {
	from, to *object
	member   *value // present / absent
	// interval of the last acknowledged add (for diagnostics)
	addStart, addEnd time.Time
}

// stats counts operations. Safe for concurrent use.
type stats struct {
	mu        sync.Mutex
	attempted map[string]int
	acked     map[string]int
	kinds     map[string]int // error kinds over every request
	outcomes  map[string]int // write outcomes
	anomalies []string       // runtime violations (a known-live object answered 404, …)
	latency   map[string]time.Duration
}

func newStats() *stats {
	return &stats{attempted: map[string]int{}, acked: map[string]int{}, kinds: map[string]int{}, outcomes: map[string]int{}, latency: map[string]time.Duration{}}
}

func (s *stats) record(op string, a answer, write bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempted[op]++
	s.latency[op] += a.end.Sub(a.start)
	if a.outcome == acked {
		s.acked[op]++
	} else {
		s.kinds[a.kind]++
	}
	if write {
		s.outcomes[a.outcome.String()]++
	}
}

func (s *stats) anomaly(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.anomalies = append(s.anomalies, msg)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func sortedKeys[V any](m map[string]V) []string {
	k := make([]string, 0, len(m))
	for x := range m {
		k = append(k, x)
	}
	sort.Strings(k)
	return k
}

// journal writes one JSON line per write attempt (acknowledged or not),
// when -journal names a file.
type journal struct {
	ch   chan journalEntry
	done chan struct{}
}

type journalEntry struct {
	T       time.Time `json:"t"`
	Ms      int64     `json:"ms"`
	Worker  int       `json:"worker"`
	Op      string    `json:"op"`
	ID      string    `json:"id,omitempty"`
	Target  string    `json:"target,omitempty"`
	Field   string    `json:"field,omitempty"`
	Value   string    `json:"value,omitempty"`
	Outcome string    `json:"outcome"`
	Kind    string    `json:"kind,omitempty"`
}

func openJournal(path string) (*journal, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	j := &journal{ch: make(chan journalEntry, 4096), done: make(chan struct{})}
	go func() {
		defer close(j.done)
		w := bufio.NewWriter(f)
		enc := json.NewEncoder(w)
		for e := range j.ch {
			_ = enc.Encode(e)
		}
		_ = w.Flush()
		_ = f.Close()
	}()
	return j, nil
}

func (j *journal) log(e journalEntry) {
	if j != nil {
		j.ch <- e
	}
}

func (j *journal) close() {
	if j != nil {
		close(j.ch)
		<-j.done
	}
}
