package reshard

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/pinstore/pinstore/model"
	"github.com/pinstore/pinstore/store/shardmap"
)

// Lock-file steps. The map decides where a move stands; the step in the
// file is informational, except that "aborted" records why a verification
// failed.
const (
	stepCopy     = "copy"
	stepHold     = "hold"
	stepSwitched = "switched"
	stepAborted  = "aborted"
)

// moveState is the lock file, <map file>.move:
//
//	range: 0-255            # the shards being moved
//	to: mysql-b             # target host
//	from:                   # where the range was when the move began
//	  - {shards: 0-127, host: mysql-a}
//	  - {shards: 128-255, host: mysql-c}
//	step: hold              # copy | hold | switched | aborted
//	pid: 4242               # last process that ran it
//	started: 2025-01-02T03:04:05Z
//	note: ""                # why it was aborted
//	digests: {0: 9f…}       # per shard: source content at the final verify
type moveState struct {
	Range   string         `yaml:"range"`
	To      string         `yaml:"to"`
	From    []moveFrom     `yaml:"from"`
	Step    string         `yaml:"step"`
	PID     int            `yaml:"pid"`
	Started time.Time      `yaml:"started"`
	Note    string         `yaml:"note,omitempty"`
	Digests map[int]string `yaml:"digests,omitempty"`

	first, last int
	src         []string // index shard-first: source host
}

type moveFrom struct {
	Shards string `yaml:"shards"`
	Host   string `yaml:"host"`
}

// LockPath is the lock file of the moves of the map at mapFile. It exists
// while a move of that map is in progress (see the package comment).
func LockPath(mapFile string) string { return mapFile + ".move" }

// moveLock is the open, flocked lock file.
type moveLock struct {
	f     *os.File
	path  string
	state *moveState // nil: no move in progress
}

// openMoveLock opens (creating it empty) and flocks the lock file at path,
// and reads the move it records. Another process holding it is EConflict;
// a file that does not parse is an error for a person to look at.
func openMoveLock(path string) (*moveLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, model.Errorf(model.EConflict, "another pinstore move-shards is running (it holds %s)", path)
		}
		return nil, err
	}
	l := &moveLock{f: f, path: path}
	data, err := io.ReadAll(f)
	if err != nil {
		l.close()
		return nil, err
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		return l, nil
	}
	var st moveState
	if err := yaml.Unmarshal(data, &st); err != nil {
		l.close()
		return nil, fmt.Errorf("move lock %s does not parse (fix or delete it by hand): %w", path, err)
	}
	if err := st.index(); err != nil {
		l.close()
		return nil, fmt.Errorf("move lock %s: %w", path, err)
	}
	l.state = &st
	return l, nil
}

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

// save rewrites the lock file in place (it must keep its inode: the flock
// is on it) and syncs it.
func (l *moveLock) save() error {
	l.state.PID = os.Getpid()
	b, err := yaml.Marshal(l.state)
	if err != nil {
		return err
	}
	b = append([]byte("# pinstore move-shards in progress: run the same command again to finish it,\n# or with --abort to roll it back. Do not delete this file while the map\n# shows the range read-only or on the target.\n"), b...)
	if err := l.f.Truncate(0); err != nil {
		return err
	}
	if _, err := l.f.WriteAt(b, 0); err != nil {
		return err
	}
	return l.f.Sync()
}

// remove deletes the lock file (the move is over) while still holding it.
func (l *moveLock) remove() error {
	err := os.Remove(l.path)
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	if err == nil {
		err = syncDir(filepath.Dir(l.path))
	}
	return err
}

func (l *moveLock) close() {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
}

// where reads from the map where the move st stands: the whole range on
// its sources writable (copy) or read-only (hold), or on the target
// writable (switched). Anything else means the map was edited during the
// move, which only a person can sort out (EConflict).
func where(m *shardmap.Map, st *moveState) (string, error) {
	var src, srcRO, dst int
	for sh := st.first; sh <= st.last; sh++ {
		r, ok := m.RangeOf(sh)
		switch {
		case !ok:
			return "", fmt.Errorf("shard %d is not in the map", sh)
		case r.Host == st.To && !r.ReadOnly:
			dst++
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
	}
	return "", model.Errorf(model.EConflict, "the map has the range %s partly moved (%d writable on the source, %d read-only, %d on the target); fix the map by hand", st.Range, src, srcRO, dst)
}
