package reshard_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/reshard"
)

// syncBuffer is a progress writer read while the move writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMoveShowsCopyProgress: while a shard copies, the move's progress
// lines count the rows written so far (not only when a shard ends), with
// bytes, the rate and the time left from the source's estimate of the
// rows to copy.
func TestMoveShowsCopyProgress(t *testing.T) {
	e := newMoveEnv(t, 0, 0)
	const rows = 30000
	name := e.f.prefix + "00000"
	if _, err := e.dbA.Exec(fmt.Sprintf("INSERT INTO %[1]s.pins (doc, version, created_at, updated_at) SELECT JSON_OBJECT('link', CONCAT('https://example.com/p/', seq), 'description', REPEAT('pin ', 40)), 1, NOW(6), NOW(6) FROM %[1]s.seq_1_to_%[2]d", name, rows)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.dbA.Exec("ANALYZE TABLE " + name + ".pins"); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	stop := errors.New("stopped after the copy")
	opt := reshard.Options{First: 0, Last: 0, To: "h1", Parallel: 1, Batch: 100, Progress: &out,
		Confirm: func(context.Context, string) error { return nil }, ConfirmDrains: true}
	opt = reshard.WithHook(reshard.WithProgressEvery(opt, 100*time.Millisecond), func(step string) error {
		if step == "copied" {
			return stop
		}
		return nil
	})
	begin := time.Now()
	if _, err := e.move(opt); !errors.Is(err, stop) {
		t.Fatalf("move: %v\n%s", err, out.String())
	}
	t.Logf("copied %d rows in %v", rows, time.Since(begin).Round(time.Millisecond))
	// A line while the one shard is still copying: rows counted, bytes,
	// the rate and the time left against the estimate.
	re := regexp.MustCompile(`copy: 0/1 shards, ([0-9,]+) of about ([0-9,]+) rows \(([0-9.]+ [KMG]?B)\), ([0-9,]+) rows/s, (about \S+ left|almost done)`)
	var seen []string
	for _, l := range strings.Split(out.String(), "\n") {
		m := re.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
		if n > 0 && n < rows {
			seen = append(seen, l)
		}
	}
	if len(seen) == 0 {
		t.Fatalf("no progress line counted rows while the shard copied:\n%s", out.String())
	}
	t.Logf("e.g. %s", seen[len(seen)/2])

	// The move's state, which servers read for the fleet page, holds the
	// copy pass as it ended: every row (the pins and what the shard held
	// before), its one shard done.
	b, err := os.ReadFile(reshard.LockPath(e.f.path))
	if err != nil {
		t.Fatal(err)
	}
	st, err := reshard.MoveStatus(b)
	if err != nil || st == nil || st.Progress == nil {
		t.Fatalf("move state: %v %+v\n%s", err, st, b)
	}
	if p := st.Progress; p.Pass != "copy" || p.Rows < rows || p.ShardsDone != 1 || p.Shards != 1 || p.RowsPerSec <= 0 || st.Range != "0-0" || st.To != "h1" {
		t.Fatalf("recorded progress: %+v of %+v", p, st)
	}
}

// TestMoveShowsCutoverPhases: a move's report and its progress line at the
// switch break the time writes were held down by phase of the cut-over,
// and the phases after the read-only map fit inside that time.
func TestMoveShowsCutoverPhases(t *testing.T) {
	e := newMoveEnv(t, 0, 0)
	var out syncBuffer
	opt := reshard.Options{First: 0, Last: 0, To: "h1", Parallel: 1, Batch: 100, Progress: &out,
		Confirm: func(context.Context, string) error { return nil }, ConfirmDrains: true}
	rep, err := e.move(opt)
	if err != nil {
		t.Fatalf("move: %v\n%s", err, out.String())
	}
	p := rep.Phases
	if p.Hold <= 0 || p.Final <= 0 || p.Switch <= 0 {
		t.Fatalf("phases not timed: %+v", p)
	}
	if in := p.Settle + p.Final + p.Arrival + p.Switch; in > rep.Held {
		t.Fatalf("phases after the hold took %v, more than the %v writes were held", in, rep.Held)
	}
	re := regexp.MustCompile(`switched: shards 0-0 writable on h1 .*writes were held off for \S+ \(hold \S+, settle \S+, final pass \S+, arrival \S+, switch \S+\)`)
	if !re.MatchString(out.String()) {
		t.Fatalf("no cut-over breakdown in the progress:\n%s", out.String())
	}
	t.Logf("held %v: %v", rep.Held, p)
}
