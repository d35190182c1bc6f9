package reshard

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pinstore/pinstore/cluster/fleet"
	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

// Steps recorded in the move's state. The map decides where a move
// stands; the recorded step adds what the map cannot say: that a revert
// (reverting) or the end of the move (finishing) has begun, and that a
// verification failed (aborted, with a note).
const (
	stepCopy      = "copy"
	stepHold      = "hold"
	stepSwitched  = "switched"
	stepAborted   = "aborted"
	stepReverting = "reverting"
	stepFinishing = "finishing"
)

// stepRevertHold is where the map stands while a revert holds writes: the
// range read-only on the target. It is never recorded.
const stepRevertHold = "revert-hold"

// moveState is the state of the move in progress, kept by the Home's lock
// (the file <map file>.move, or a key in etcd):
//
//	range: 0-255            # the shards being moved
//	to: mysql-b             # target host
//	from:                   # where the range was when the move began
//	  - {shards: 0-127, host: mysql-a}
//	  - {shards: 128-255, host: mysql-c}
//	step: hold              # copy | hold | switched | aborted | reverting | finishing
//	pid: 4242               # last process that ran it
//	started: 2025-01-02T03:04:05Z
//	note: ""                # why a verification failed
//	copied: true            # the first pass is done: every change since is in the logs
//	progress: {pass: copy, shards_done: 1, shards: 4, rows: 12345, ...}
//	                        # the current or last pass, recorded every second (MoveStatus)
type moveState struct {
	Range   string     `yaml:"range"`
	To      string     `yaml:"to"`
	From    []moveFrom `yaml:"from"`
	Step    string     `yaml:"step"`
	PID     int        `yaml:"pid"`
	Started time.Time  `yaml:"started"`
	Note    string     `yaml:"note,omitempty"`
	Copied  bool       `yaml:"copied,omitempty"`
	// Progress is the pass in progress, saved every second so that
	// servers can show it (the fleet page), or the last pass when it ended.
	Progress *moveProgress `yaml:"progress,omitempty"`

	first, last int
	src         []string // index shard-first: source host
}

type moveProgress struct {
	Pass        string    `yaml:"pass"`
	ShardsDone  int64     `yaml:"shards_done"`
	Shards      int64     `yaml:"shards"`
	Rows        int64     `yaml:"rows"`
	RowsTotal   int64     `yaml:"rows_total,omitempty"`
	RowsPerSec  float64   `yaml:"rows_per_second"`
	SecondsLeft *float64  `yaml:"seconds_left,omitempty"`
	Updated     time.Time `yaml:"updated"`
}

// MoveStatus reads a move's recorded state (the content of the Home's
// lock: the file <map file>.move or the etcd key <prefix>/move) for
// display, without taking the lock. Empty data is no move (nil, nil); a
// state that does not parse is an error.
func MoveStatus(data []byte) (*fleet.MoveStatus, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, nil
	}
	var st moveState
	if err := yaml.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("reshard.MoveStatus: %w", err)
	}
	out := &fleet.MoveStatus{Range: st.Range, To: st.To, From: []string{}, Phase: st.Step, Started: st.Started, Note: st.Note, Copied: st.Copied}
	for _, f := range st.From {
		out.From = append(out.From, f.Shards+" on "+f.Host)
	}
	if p := st.Progress; p != nil {
		out.Progress = &fleet.MoveProgress{Pass: p.Pass, ShardsDone: p.ShardsDone, Shards: p.Shards, Rows: p.Rows, RowsTotal: p.RowsTotal,
			RowsPerSec: p.RowsPerSec, SecondsLeft: p.SecondsLeft, Updated: p.Updated}
	}
	return out, nil
}

type moveFrom struct {
	Shards string `yaml:"shards"`
	Host   string `yaml:"host"`
}

// moveLock is the held lock of moves with the parsed state of the move
// in progress (nil: none).
type moveLock struct {
	l     MoveLock
	state *moveState
}

// openMoveLock takes the lock of moves of home and reads the move it
// records. A state that does not parse is an error for a person to look at.
func openMoveLock(ctx context.Context, home Home) (*moveLock, error) {
	l, err := home.LockMoves(ctx)
	if err != nil {
		return nil, err
	}
	ml := &moveLock{l: l}
	data := l.State()
	if len(strings.TrimSpace(string(data))) == 0 {
		return ml, nil
	}
	var st moveState
	if err := yaml.Unmarshal(data, &st); err != nil {
		l.Unlock()
		return nil, fmt.Errorf("move state %s does not parse (fix or delete it by hand): %w", l, err)
	}
	if err := st.index(); err != nil {
		l.Unlock()
		return nil, fmt.Errorf("move state %s: %w", l, err)
	}
	ml.state = &st
	return ml, nil
}

// where names the state, for messages.
func (l *moveLock) where() string { return l.l.String() }

// save records the state.
func (l *moveLock) save(ctx context.Context) error {
	l.state.PID = os.Getpid()
	b, err := yaml.Marshal(l.state)
	if err != nil {
		return err
	}
	return l.l.Save(ctx, b)
}

// remove deletes the state (the move is over) while still holding the lock.
func (l *moveLock) remove(ctx context.Context) error { return l.l.Remove(ctx) }

func (l *moveLock) close() { l.l.Unlock() }

// index fills first, last and src from Range and From.
func (st *moveState) index() error {
	var err error
	if st.first, st.last, err = shardmap.ParseRange(st.Range); err != nil {
		return err
	}
	st.src = make([]string, st.last-st.first+1)
	for _, f := range st.From {
		a, b, err := shardmap.ParseRange(f.Shards)
		if err != nil {
			return err
		}
		for sh := a; sh <= b; sh++ {
			if sh < st.first || sh > st.last {
				return fmt.Errorf("from %q is outside the range %s", f.Shards, st.Range)
			}
			st.src[sh-st.first] = f.Host
		}
	}
	for i, h := range st.src {
		if h == "" {
			return fmt.Errorf("no source host for shard %d", st.first+i)
		}
	}
	return nil
}

func (st *moveState) source(sh int) string { return st.src[sh-st.first] }

// where reads from the map where the move st stands: the whole range on
// its sources writable (copy) or read-only (hold), or on the target
// writable (switched) or read-only (revert-hold: a revert holds writes).
// Anything else means the map was edited during the move, which only a
// person can sort out (EConflict).
func where(m *shardmap.Map, st *moveState) (string, error) {
	var src, srcRO, dst, dstRO int
	for sh := st.first; sh <= st.last; sh++ {
		r, ok := m.RangeOf(sh)
		switch {
		case !ok:
			return "", fmt.Errorf("shard %d is not in the map", sh)
		case r.Host == st.To && !r.ReadOnly:
			dst++
		case r.Host == st.To:
			dstRO++
		case r.Host == st.source(sh) && r.ReadOnly:
			srcRO++
		case r.Host == st.source(sh):
			src++
		default:
			return "", model.Errorf(model.EConflict, "the map places shard %d on %q (read_only %v), which fits neither the source %q nor the target %q of the move in progress; fix the map by hand",
				sh, r.Host, r.ReadOnly, st.source(sh), st.To)
		}
	}
	n := st.last - st.first + 1
	switch n {
	case src:
		return stepCopy, nil
	case srcRO:
		return stepHold, nil
	case dst:
		return stepSwitched, nil
	case dstRO:
		return stepRevertHold, nil
	}
	return "", model.Errorf(model.EConflict, "the map has the range %s partly moved (%d writable on the source, %d read-only, %d on the target, %d read-only there); fix the map by hand", st.Range, src, srcRO, dst, dstRO)
}
