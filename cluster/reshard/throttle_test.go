package reshard_test

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinstore/pinstore/cluster/reshard"
	"github.com/pinstore/pinstore/cluster/throttle"
	"github.com/pinstore/pinstore/store/topology"
)

// TestMoveThrottlesOnBusyTarget: while statements pile up on the target
// host (connections held in SELECT SLEEP), the copy waits and its
// progress says so ("throttled: threads_running N > 3 on h1"); once they
// end, the move carries on and switches.
func TestMoveThrottlesOnBusyTarget(t *testing.T) {
	e := newMoveEnv(t, 0, 0)
	probe, err := topology.Dial(e.b, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	var out syncBuffer
	var ids []int64
	var wg sync.WaitGroup
	started := false
	opt := reshard.Options{First: 0, Last: 0, To: "h1", Parallel: 1, Progress: &out,
		Throttle: throttle.Limits{ThreadsRunning: 3, MaxWait: 2 * time.Second, Poll: 50 * time.Millisecond},
		Confirm:  func(context.Context, string) error { return nil }, ConfirmDrains: true}
	opt = reshard.WithHook(opt, func(step string) error {
		if step != "logging" || started {
			return nil
		}
		started = true
		for range 5 {
			conn, err := e.dbB.Conn(context.Background())
			if err != nil {
				return err
			}
			var id int64
			if err := conn.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				return err
			}
			ids = append(ids, id)
			wg.Add(1)
			go func(conn *sql.Conn) {
				defer wg.Done()
				defer conn.Close()
				var r int
				_ = conn.QueryRowContext(context.Background(), "SELECT SLEEP(600)").Scan(&r)
			}(conn)
		}
		for {
			n, err := throttle.ThreadsRunning(context.Background(), probe)
			if err != nil {
				return err
			}
			if n > 5 {
				return nil
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	// Once the move says it waits for h1, the sleepers end.
	// (or, if it never says so, once it ends).
	saw, moved := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(saw)
	wait:
		for !strings.Contains(out.String(), " on h1") {
			select {
			case <-moved:
				break wait
			case <-time.After(20 * time.Millisecond):
			}
		}
		for _, id := range ids {
			if _, err := e.dbB.Exec("KILL QUERY ?", id); err != nil {
				t.Errorf("kill %d: %v", id, err)
			}
		}
	}()
	rep, err := e.move(opt)
	close(moved)
	<-saw
	wg.Wait()
	if err != nil {
		t.Fatalf("move: %v\n%s", err, out.String())
	}
	if !rep.Switched {
		t.Fatalf("the move did not switch: %+v", rep)
	}
	var line string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "threads_running") && strings.HasSuffix(l, " > 3 on h1") {
			line = l
			break
		}
	}
	if !strings.Contains(line, "move-shards: throttled: threads_running ") {
		t.Fatalf("no progress line says the copy waited for h1:\n%s", out.String())
	}
	t.Logf("%s", line)
}
