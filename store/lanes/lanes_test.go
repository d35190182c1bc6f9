package lanes

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// job is a test job: its id, and what ran it.
type job struct {
	id      int
	alone   bool
	batched int // the size of the statement that ran it
	err     error
}

// recorder runs jobs in memory, each statement taking a moment, and counts.
type recorder struct {
	statements, jobs atomic.Int64
	batchErr         error
}

func (r *recorder) ops() Ops[*job] {
	return Ops[*job]{
		Alone: func(ctx context.Context, j *job) {
			time.Sleep(time.Millisecond)
			j.alone, j.batched = true, 1
		},
		Batch: func(ctx context.Context, js []*job) error {
			if r.batchErr != nil {
				return r.batchErr
			}
			time.Sleep(time.Millisecond)
			for _, j := range js {
				j.batched = len(js)
			}
			return nil
		},
		Fail:  func(j *job, err error) { j.err = err },
		Count: func(n int) { r.statements.Add(1); r.jobs.Add(int64(n)) },
	}
}

// Jobs that arrive while the lane is busy share statements; every job is
// run exactly once and counted.
func TestJobsShareStatements(t *testing.T) {
	var r recorder
	q := New(Config{Lanes: 1}, r.ops())
	const n = 200
	jobs := make([]*job, n)
	var wg sync.WaitGroup
	for i := range jobs {
		jobs[i] = &job{id: i}
		wg.Go(func() {
			if err := q.Do(context.Background(), jobs[i]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, j := range jobs {
		if j.batched == 0 || j.err != nil {
			t.Fatalf("job %d: not run (%v)", j.id, j.err)
		}
	}
	if r.jobs.Load() != n || r.statements.Load() >= n {
		t.Fatalf("%d jobs in %d statements", r.jobs.Load(), r.statements.Load())
	}
	if q.busy != 0 || len(q.queue) != 0 {
		t.Fatalf("left %d lanes busy, %d queued", q.busy, len(q.queue))
	}
}

// A batch whose statement fails fails every job of it; one the server
// refuses runs each job alone.
func TestBatchErrors(t *testing.T) {
	boom := errors.New("connection lost")
	r := recorder{batchErr: boom}
	q := New(Config{}, r.ops())
	a, b := &job{id: 1}, &job{id: 2}
	q.Run([]*job{a, b})
	if a.err != boom || b.err != boom {
		t.Fatalf("a failed batch: %v, %v", a.err, b.err)
	}
	r.batchErr = &mysql.MySQLError{Number: 1146, Message: "table missing"}
	c, d := &job{id: 3}, &job{id: 4}
	q.Run([]*job{c, d})
	if !c.alone || !d.alone || c.err != nil || d.err != nil {
		t.Fatalf("a refused batch: %+v, %+v", c, d)
	}
}

// A queued job whose caller gives up leaves the queue at once, and the
// lane works afterwards.
func TestJobLeavesTheQueueWhenCancelled(t *testing.T) {
	var r recorder
	q := New(Config{Lanes: 2}, r.ops())
	q.mu.Lock()
	q.busy = q.cfg.Lanes // every lane taken by statements that never end
	q.mu.Unlock()
	c, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := q.Do(c, &job{id: 1}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Do with every lane busy: %v", err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("the cancelled job returned after %v", el)
	}
	q.mu.Lock()
	left := len(q.queue)
	q.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d jobs left in the queue", left)
	}
	q.next() // one of the lanes comes free
	j := &job{id: 2}
	if err := q.Do(context.Background(), j); err != nil || !j.alone {
		t.Fatalf("Do after a lane came free: %+v, %v", j, err)
	}
	q.mu.Lock()
	busy := q.busy
	q.mu.Unlock()
	if busy != q.cfg.Lanes-1 {
		t.Fatalf("%d lanes busy, want %d", busy, q.cfg.Lanes-1)
	}
}

// A queue made from a Tuning left at zero takes the default lanes and the
// batch bound it is given, and counts every statement on the Tuning's
// counters, which the kind's own Count cannot bypass.
func TestTunedQueueDefaultsAndCounts(t *testing.T) {
	var r recorder
	st := NewStats(nil, "pinstore_test_job", "Test jobs")
	q := NewTuned(Tuning{Stats: st}, 3, r.ops())
	if q.cfg.Lanes != DefaultLanes || q.cfg.MaxBatch != 3 || q.cfg.Timeout <= 0 {
		t.Fatalf("a zero Tuning: %+v", q.cfg)
	}
	q.Run([]*job{{id: 1}, {id: 2}})
	if err := q.Do(context.Background(), &job{id: 3}); err != nil {
		t.Fatal(err)
	}
	if jobs, stmts := testutil.ToFloat64(st.Jobs), testutil.ToFloat64(st.Statements); jobs != 3 || stmts != 2 {
		t.Fatalf("%v jobs in %v statements counted, want 3 in 2", jobs, stmts)
	}
	if r.statements.Load() != 0 {
		t.Fatalf("the kind's own Count ran %d times beside the Tuning's", r.statements.Load())
	}
	NewTuned(Tuning{Lanes: 1}, 3, r.ops()).Run([]*job{{id: 4}}) // nil Stats counts nothing
}
