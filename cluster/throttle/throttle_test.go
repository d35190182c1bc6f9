package throttle_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/cluster/throttle"
	"github.com/pinstore/pinstore/internal/testenv"
	"github.com/pinstore/pinstore/store/topology"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

// lines collects what the throttler says, and signals each line.
type lines struct {
	mu  sync.Mutex
	all []string
	new chan string
}

func (l *lines) logf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	l.mu.Lock()
	l.all = append(l.all, s)
	l.mu.Unlock()
	select {
	case l.new <- s:
	default:
	}
}

// busy holds n connections of db in SELECT SLEEP until the returned
// function kills them and waits for them to end.
func busy(t *testing.T, db *sqlx.DB, n int) (stop func()) {
	t.Helper()
	var ids []int64
	var wg sync.WaitGroup
	for range n {
		conn, err := db.Connx(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var id int64
		if err := conn.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			var r int
			_ = conn.QueryRowContext(context.Background(), "SELECT SLEEP(600)").Scan(&r)
		}()
	}
	// Threads_running counts them once they run.
	for {
		got, err := throttle.ThreadsRunning(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		if got > n {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return func() {
		for _, id := range ids {
			if _, err := db.Exec("KILL QUERY ?", id); err != nil {
				t.Errorf("kill %d: %v", id, err)
			}
		}
		wg.Wait()
	}
}

// TestWaitsWhileThreadsRunningHigh: while more statements run on a host
// than the limit, Wait does not return and says why ("throttled:
// threads_running N > 4 on a"); once they end it returns, and counts the
// wait. Without a cause to wait it returns at once, saying nothing.
func TestWaitsWhileThreadsRunningHigh(t *testing.T) {
	h := testenv.StartHost(t, "throttle-threads")
	db, err := topology.Dial(h.DSN(), 16)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := &lines{new: make(chan string, 1)}
	th := throttle.New(throttle.Limits{ThreadsRunning: 4, MaxWait: time.Hour, Poll: 50 * time.Millisecond}, out.logf)
	hosts := []throttle.Host{{Name: "a", DB: db}}
	ctx := context.Background()

	if err := th.Wait(ctx, hosts); err != nil {
		t.Fatal(err)
	}
	if d, n := th.Waited(); n != 0 || d != 0 || len(out.all) != 0 {
		t.Fatalf("an idle host held the work back: %v in %d waits, said %q", d, n, out.all)
	}

	// A new throttler: the first one's reading of the idle host is fresh.
	th = throttle.New(throttle.Limits{ThreadsRunning: 4, MaxWait: time.Hour, Poll: 50 * time.Millisecond}, out.logf)
	stop := busy(t, db, 6)
	done := make(chan error, 1)
	go func() { done <- th.Wait(ctx, hosts) }()
	line := <-out.new
	if !strings.HasPrefix(line, "throttled: threads_running ") || !strings.HasSuffix(line, " > 4 on a") {
		t.Fatalf("the throttler said %q, want throttled: threads_running N > 4 on a", line)
	}
	select {
	case err := <-done:
		t.Fatalf("Wait returned (%v) while 6 statements still ran", err)
	default:
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, n := th.Waited(); n != 1 {
		t.Fatalf("Waited counts %d waits, want 1", n)
	}
}

// TestWaitIsBounded: a host that stays busy holds the work back for
// MaxWait at most; then Wait returns and says it carries on.
func TestWaitIsBounded(t *testing.T) {
	h := testenv.StartHost(t, "throttle-bounded")
	db, err := topology.Dial(h.DSN(), 16)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stop := busy(t, db, 6)
	defer stop()
	out := &lines{new: make(chan string, 1)}
	th := throttle.New(throttle.Limits{ThreadsRunning: 4, MaxWait: 300 * time.Millisecond, Poll: 50 * time.Millisecond}, out.logf)
	if err := th.Wait(context.Background(), []throttle.Host{{Name: "a", DB: db}}); err != nil {
		t.Fatal(err)
	}
	out.mu.Lock()
	last := out.all[len(out.all)-1]
	out.mu.Unlock()
	if !strings.HasPrefix(last, "throttle: threads_running ") || !strings.HasSuffix(last, "; carrying on") {
		t.Fatalf("the last line is %q, want throttle: … carrying on", last)
	}
	// A cancelled context ends a wait at once.
	th = throttle.New(throttle.Limits{ThreadsRunning: 4, MaxWait: time.Hour}, nil)
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := th.Wait(cctx, []throttle.Host{{Name: "a", DB: db}}); err == nil {
		t.Fatal("Wait on a busy host with a cancelled context returned nil")
	}
}

// TestWaitsWhileReplicaLags: a real replica that applies its master's
// transactions late (MASTER_DELAY) holds the work back once its
// Seconds_Behind_Master passes the limit, and the throttler says so
// ("throttled: replica lag Ns > 1s on r"); once the replica catches up the
// wait returns.
func TestWaitsWhileReplicaLags(t *testing.T) {
	master := testenv.ReplicationHost(t, "throttle-master", 1)
	replica := testenv.ReplicationHost(t, "throttle-replica", 2, "--read-only=ON")
	replica.Exec(t, "SET GLOBAL gtid_slave_pos = ''",
		"CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = "+strconv.Itoa(master.Port())+", MASTER_USER = 'root', MASTER_USE_GTID = slave_pos, MASTER_DELAY = 60",
		"START SLAVE")
	db, err := topology.Dial(replica.DSN(), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	master.Exec(t, "CREATE DATABASE throttle_lag", "CREATE TABLE throttle_lag.t (n INT PRIMARY KEY)", "INSERT INTO throttle_lag.t VALUES (1)")

	// The replica received the transactions and holds them for a minute:
	// its lag grows past a second.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		lag, ok, err := throttle.ReplicaLag(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		if ok && lag > time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delayed replica's lag is %v (known: %v) after 30s", lag, ok)
		}
	}
	out := &lines{new: make(chan string, 1)}
	th := throttle.New(throttle.Limits{ReplicaLag: time.Second, ThreadsRunning: -1, MaxWait: time.Hour, Poll: 50 * time.Millisecond}, out.logf)
	done := make(chan error, 1)
	go func() { done <- th.Wait(context.Background(), []throttle.Host{{Name: "r", DB: db, Replica: true}}) }()
	select {
	case line := <-out.new:
		if !strings.HasPrefix(line, "throttled: replica lag ") || !strings.HasSuffix(line, " > 1s on r") {
			t.Fatalf("the throttler said %q, want throttled: replica lag N > 1s on r", line)
		}
	case err := <-done:
		t.Fatalf("Wait returned (%v) while the replica was a minute behind", err)
	case <-time.After(10 * time.Second):
		t.Fatal("a replica a minute behind did not hold the work back within 10s")
	}
	// The replica catches up: the work goes on.
	replica.Exec(t, "STOP SLAVE", "CHANGE MASTER TO MASTER_DELAY = 0", "START SLAVE")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not end within 30s of the replica catching up")
	}
	if _, n := th.Waited(); n != 1 {
		t.Fatalf("Waited counts %d waits, want 1", n)
	}
}

// TestWaitsWhileRedoLogFull: writes fill a real host's redo log past the
// limit, and Wait holds the work back, saying so ("throttled: redo log N%
// full > 1% on a"); once InnoDB has flushed the pages and checkpointed,
// the wait returns.
func TestWaitsWhileRedoLogFull(t *testing.T) {
	h := testenv.StartHost(t, "throttle-redo")
	db, err := topology.Dial(h.DSN(), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	for _, q := range []string{
		// The page cleaner keeps every dirty page it may: only the redo
		// log's own limit makes it flush.
		"SET GLOBAL innodb_max_dirty_pages_pct = 99",
		"CREATE DATABASE throttle_redo",
		"CREATE TABLE throttle_redo.t (n INT PRIMARY KEY AUTO_INCREMENT, b BLOB)",
		"INSERT INTO throttle_redo.t (b) SELECT RANDOM_BYTES(1024) FROM throttle_redo.seq_1_to_4000",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	st, err := throttle.ReadMaster(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if st.CheckpointMaxAge <= 0 || st.RedoLogPercent() < 2 {
		t.Fatalf("after 4 MB of writes the host reads %+v (%d%% full), want over 1%%", st, st.RedoLogPercent())
	}
	out := &lines{new: make(chan string, 1)}
	th := throttle.New(throttle.Limits{ThreadsRunning: -1, RedoLogPercent: 1, MaxWait: time.Hour, Poll: 50 * time.Millisecond}, out.logf)
	done := make(chan error, 1)
	go func() { done <- th.Wait(ctx, []throttle.Host{{Name: "a", DB: db}}) }()
	line := <-out.new
	if !strings.HasPrefix(line, "throttled: redo log ") || !strings.HasSuffix(line, "% full > 1% on a") {
		t.Fatalf("the throttler said %q, want throttled: redo log N%% full > 1%% on a", line)
	}
	select {
	case err := <-done:
		t.Fatalf("Wait returned (%v) while the redo log was full", err)
	default:
	}
	// Flush every dirty page: the checkpoint catches up.
	if _, err := db.ExecContext(ctx, "SET GLOBAL innodb_max_dirty_pages_pct = 0"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		st, _ := throttle.ReadMaster(ctx, db)
		t.Fatalf("Wait still holds the work back a minute after the pages were flushed: %+v", st)
	}
}
