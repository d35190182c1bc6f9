package main

import (
	"bytes"
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pinstore/pinstore/internal/testenv"
)

// TestMigrateAndRepairThrottle: `migrate` and `repair` hold their work
// back while the host runs more statements than --max-threads-running, and
// say so ("migrate: throttled: threads_running N > 6 on default"); each
// wait is bounded by --throttle-max-wait, so both still finish. On the
// same host at rest they say nothing of the kind.
func TestMigrateAndRepairThrottle(t *testing.T) {
	h := testenv.StartHost(t, "cmd-throttle")
	env := map[string]string{"PINSTORE_MYSQL_DSN": h.DSN(), "PINSTORE_SHARDS": "4", "PINSTORE_DB_PREFIX": testenv.UniquePrefix(t, "thr")}
	cmd := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(context.Background(), args, func(k string) string { return env[k] }, &out, &out); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	limits := []string{"--max-threads-running", "6", "--max-redo-log-percent", "-1", "--throttle-max-wait", "200ms"}

	if out := cmd(append([]string{"migrate"}, limits...)...); strings.Contains(out, "throttle") {
		t.Fatalf("migrate on a host at rest was throttled:\n%s", out)
	}

	db, err := sql.Open("mysql", h.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	for range 8 {
		wg.Go(func() { db.ExecContext(ctx, "DO SLEEP(600)") })
	}
	defer func() { cancel(); wg.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var name string
		var n int
		if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Threads_running'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		if n > 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Threads_running is %d with eight sleeping statements", n)
		}
	}
	for _, c := range []string{"migrate", "repair"} {
		out := cmd(append([]string{c}, limits...)...)
		if !strings.Contains(out, c+": throttled: threads_running ") || !strings.Contains(out, " > 6 on default") {
			t.Errorf("%s on a busy host did not say it was throttled:\n%s", c, out)
		}
	}
}
