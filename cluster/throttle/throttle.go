// Package throttle holds background work back while the MySQL hosts it
// touches are busy, by the hosts' own signals: Threads_running and how
// full the redo log is (Innodb_checkpoint_age against
// Innodb_checkpoint_max_age, SHOW GLOBAL STATUS) on the masters, and
// Seconds_Behind_Master (SHOW ALL SLAVES STATUS) on their replicas. A
// redo log that fills up makes InnoDB flush pages synchronously, and
// every write on the host waits for it: the work must leave that room
// to the host's own writes. A step of the work (a copy chunk, a
// batch of the change log) calls Wait first; Wait returns at once while
// every host is below its limits, and otherwise waits, saying why, until
// they are, or until MaxWait has passed (then the work carries on: a
// throttle slows background work down, it never stops it).
package throttle

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
)

// Defaults of Limits.
const (
	DefaultThreadsRunning = 16
	DefaultRedoLogPercent = 90
	DefaultReplicaLag     = 5 * time.Second
	DefaultMaxWait        = 30 * time.Second
	DefaultPoll           = 250 * time.Millisecond
)

// Limits are a throttler's thresholds. Zero fields take the defaults; a
// negative ThreadsRunning, RedoLogPercent or ReplicaLag turns that signal
// off.
type Limits struct {
	ThreadsRunning int           // a master's Threads_running above this holds the work back
	RedoLogPercent int           // a master's checkpoint age above this percentage of its maximum holds the work back
	ReplicaLag     time.Duration // a replica's Seconds_Behind_Master above this holds the work back
	MaxWait        time.Duration // the longest one Wait waits before the work carries on anyway
	Poll           time.Duration // how often the hosts are asked; a reading this recent is reused
}

func (l Limits) withDefaults() Limits {
	if l.ThreadsRunning == 0 {
		l.ThreadsRunning = DefaultThreadsRunning
	}
	if l.RedoLogPercent == 0 {
		l.RedoLogPercent = DefaultRedoLogPercent
	}
	if l.ReplicaLag == 0 {
		l.ReplicaLag = DefaultReplicaLag
	}
	if l.MaxWait <= 0 {
		l.MaxWait = DefaultMaxWait
	}
	if l.Poll <= 0 {
		l.Poll = DefaultPoll
	}
	return l
}

// Host is one host the work touches: a master (its Threads_running and
// redo log are read) or a replica (its lag is read). Name is how
// progress lines name it.
type Host struct {
	Name    string
	DB      *sqlx.DB
	Replica bool
}

// Throttler is safe for concurrent use: the work's goroutines share its
// readings, so the hosts are asked at most once per Poll however many
// goroutines wait.
type Throttler struct {
	lim  Limits
	logf func(format string, args ...any)

	mu      sync.Mutex
	reading map[*sqlx.DB]reading
	said    map[string]time.Time // reason → when it was last printed
	waited  time.Duration        // total time Wait held the work back
	waits   int                  // Waits that held the work back
}

type reading struct {
	at     time.Time
	reason string // "" when below the limits
}

// New returns a throttler with limits lim (defaults filled in) that says
// why it waits with logf (nil: silently).
func New(lim Limits, logf func(format string, args ...any)) *Throttler {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	return &Throttler{lim: lim.withDefaults(), logf: logf, reading: map[*sqlx.DB]reading{}, said: map[string]time.Time{}}
}

// Limits returns the thresholds in force.
func (t *Throttler) Limits() Limits { return t.lim }

// Waited is how long Wait has held the work back in all, and how many
// times it did.
func (t *Throttler) Waited() (time.Duration, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.waited, t.waits
}

// Wait returns once every host is below the limits, after MaxWait, or
// with ctx's error. While it waits it prints, at most once a second per
// reason, "throttled: threads_running 42 > 16 on mysql-a". A host that
// cannot be read does not hold the work back (the work's own statements
// will fail on it if it is down).
func (t *Throttler) Wait(ctx context.Context, hosts []Host) error {
	var start time.Time
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		reason := t.check(ctx, hosts)
		if reason == "" {
			if !start.IsZero() {
				t.mu.Lock()
				t.waited += time.Since(start)
				t.waits++
				t.mu.Unlock()
			}
			return nil
		}
		if start.IsZero() {
			start = time.Now()
		}
		if time.Since(start) >= t.lim.MaxWait {
			t.say("throttle: %s still after %v; carrying on", reason, t.lim.MaxWait)
			t.mu.Lock()
			t.waited += time.Since(start)
			t.waits++
			t.mu.Unlock()
			return nil
		}
		t.say("throttled: %s", reason)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(t.lim.Poll):
		}
	}
}

// say prints a line, once a second at most for the same line.
func (t *Throttler) say(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	t.mu.Lock()
	last, ok := t.said[line]
	now := time.Now()
	if ok && now.Sub(last) < time.Second {
		t.mu.Unlock()
		return
	}
	t.said[line] = now
	t.mu.Unlock()
	t.logf("%s", line)
}

// check returns why the work must wait now, or "".
func (t *Throttler) check(ctx context.Context, hosts []Host) string {
	var reasons []string
	for _, h := range hosts {
		if r := t.read(ctx, h); r != "" {
			reasons = append(reasons, r)
		}
	}
	return strings.Join(reasons, ", ")
}

// read returns the host's reason to wait, reusing a reading younger than
// Poll.
func (t *Throttler) read(ctx context.Context, h Host) string {
	t.mu.Lock()
	r, ok := t.reading[h.DB]
	t.mu.Unlock()
	if ok && time.Since(r.at) < t.lim.Poll {
		return r.reason
	}
	var reason string
	if h.Replica {
		reason = t.lag(ctx, h)
	} else {
		reason = t.master(ctx, h)
	}
	t.mu.Lock()
	t.reading[h.DB] = reading{at: time.Now(), reason: reason}
	t.mu.Unlock()
	return reason
}

func (t *Throttler) master(ctx context.Context, h Host) string {
	if t.lim.ThreadsRunning < 0 && t.lim.RedoLogPercent < 0 {
		return ""
	}
	st, err := ReadMaster(ctx, h.DB)
	if err != nil {
		return ""
	}
	var reasons []string
	if t.lim.ThreadsRunning >= 0 && st.ThreadsRunning > t.lim.ThreadsRunning {
		reasons = append(reasons, fmt.Sprintf("threads_running %d > %d on %s", st.ThreadsRunning, t.lim.ThreadsRunning, h.Name))
	}
	if p := st.RedoLogPercent(); t.lim.RedoLogPercent >= 0 && p > t.lim.RedoLogPercent {
		reasons = append(reasons, fmt.Sprintf("redo log %d%% full > %d%% on %s", p, t.lim.RedoLogPercent, h.Name))
	}
	return strings.Join(reasons, ", ")
}

func (t *Throttler) lag(ctx context.Context, h Host) string {
	if t.lim.ReplicaLag < 0 {
		return ""
	}
	lag, ok, err := ReplicaLag(ctx, h.DB)
	if err != nil || !ok || lag <= t.lim.ReplicaLag {
		return ""
	}
	return fmt.Sprintf("replica lag %v > %v on %s", lag, t.lim.ReplicaLag, h.Name)
}

// ThreadsRunning is the server's Threads_running: the statements running
// now, this one included.
func ThreadsRunning(ctx context.Context, db *sqlx.DB) (int, error) {
	var name string
	var n int
	err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Threads_running'").Scan(&name, &n)
	return n, err
}

// MasterStatus is what the throttle reads of a master.
type MasterStatus struct {
	ThreadsRunning int
	// CheckpointAge is the redo log written since the last checkpoint;
	// at CheckpointMaxAge InnoDB flushes synchronously and writes wait.
	CheckpointAge, CheckpointMaxAge int64
}

// RedoLogPercent is how full the redo log is, in percent of the
// checkpoint age at which writes wait; 0 when the server does not say.
func (s MasterStatus) RedoLogPercent() int {
	if s.CheckpointMaxAge <= 0 {
		return 0
	}
	return int(100 * s.CheckpointAge / s.CheckpointMaxAge)
}

// ReadMaster reads a master's signals in one round trip.
func ReadMaster(ctx context.Context, db *sqlx.DB) (MasterStatus, error) {
	rows, err := db.QueryContext(ctx, `SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS
		WHERE VARIABLE_NAME IN ('THREADS_RUNNING', 'INNODB_CHECKPOINT_AGE', 'INNODB_CHECKPOINT_MAX_AGE')`)
	if err != nil {
		return MasterStatus{}, err
	}
	defer rows.Close()
	var st MasterStatus
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return MasterStatus{}, err
		}
		switch strings.ToUpper(name) {
		case "THREADS_RUNNING":
			st.ThreadsRunning = int(n)
		case "INNODB_CHECKPOINT_AGE":
			st.CheckpointAge = n
		case "INNODB_CHECKPOINT_MAX_AGE":
			st.CheckpointMaxAge = n
		}
	}
	return st, rows.Err()
}

// ReplicaLag is the largest Seconds_Behind_Master of the server's
// replication connections; ok is false when the server replicates from
// nothing or no connection knows its lag (stopped).
func ReplicaLag(ctx context.Context, db *sqlx.DB) (lag time.Duration, ok bool, err error) {
	rows, err := db.QueryxContext(ctx, "SHOW ALL SLAVES STATUS")
	if err != nil {
		return 0, false, err
	}
	defer rows.Close()
	for rows.Next() {
		m := map[string]any{}
		if err := rows.MapScan(m); err != nil {
			return 0, false, err
		}
		var s sql.NullInt64
		if err := s.Scan(m["Seconds_Behind_Master"]); err != nil || !s.Valid {
			continue
		}
		if d := time.Duration(s.Int64) * time.Second; !ok || d > lag {
			lag, ok = d, true
		}
	}
	return lag, ok, rows.Err()
}
