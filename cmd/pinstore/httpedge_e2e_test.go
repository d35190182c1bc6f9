package main

// The HTTP edge end to end: what the connection loop refuses is answered
// as the API answers, and a request's work stops in MariaDB when its
// client leaves or its server's shutdown grace ends.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/pinstore/pinstore/api"
	"github.com/pinstore/pinstore/internal/testenv"
)

// rawProblem reads a response from br and checks it is the API's problem
// document of status and code: its type, title, request id (the header's)
// and, when path is not "", its instance.
func rawProblem(t *testing.T, br *bufio.Reader, status int, code, path string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var p struct {
		Type, Title, Detail, Code, Instance string
		Status                              int
		RequestID                           string `json:"request_id"`
	}
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("answered %d %q %s, want %d application/problem+json", resp.StatusCode, resp.Header.Get("Content-Type"), b, status)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if p.Status != status || p.Code != code || p.Type != api.ProblemType(code) || p.Title == "" || p.Detail == "" ||
		p.RequestID == "" || p.RequestID != resp.Header.Get(api.RequestIDHeader) || p.Instance != path {
		t.Errorf("problem %s, want status %d, code %s, instance %q, a title, a detail and the request id", b, status, code, path)
	}
}

// A body over the API's 64 KiB is refused while it arrives: the 413
// too_large problem, the API's own, comes back while the client is still
// sending its 2 MiB. A request line that is not HTTP and a target that
// is no URI are 400 malformed_request problems.
func TestEdgeRefusalsAreTheAPIsProblems(t *testing.T) {
	s := startServer(t)
	addr := strings.TrimPrefix(s.base, "http://")

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const total = 2 << 20
	fmt.Fprintf(conn, "POST /v1/pins HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", e2eAdminToken, total)
	var sent atomic.Int64
	stop := make(chan struct{})
	go func() {
		chunk := []byte(strings.Repeat(" ", 16<<10))
		for sent.Load() < total {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			n, err := conn.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	rawProblem(t, bufio.NewReader(conn), http.StatusRequestEntityTooLarge, "too_large", "/v1/pins")
	close(stop)
	if n := sent.Load(); n >= total {
		t.Errorf("the 413 came after the client had sent the whole body (%d bytes)", n)
	}

	for _, req := range []string{"HELLO\r\n\r\n", "GET %zz HTTP/1.1\r\nHost: x\r\n\r\n"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(c, req)
		rawProblem(t, bufio.NewReader(c), http.StatusBadRequest, "malformed_request", "")
		c.Close()
	}
}

// lockedPin creates a pin and holds its row's lock from a transaction of
// the test's own until the test ends; it returns the pin's id, a pool to
// watch the server with, and the pin table's name.
func lockedPin(t *testing.T, s *server) (string, *sqlx.DB, string) {
	t.Helper()
	f := newFixture(t, s, 1)
	var id struct {
		Shard   uint32 `json:"shard"`
		LocalID uint64 `json:"local_id"`
	}
	s.must(http.StatusOK, http.MethodGet, "/v1/ids/"+f.pins[0], nil).decode(t, &id)
	db, err := sqlx.Open("mysql", testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	table := fmt.Sprintf("%s%05d.pins", s.prefix, id.Shard)
	tx, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	var n int
	if err := tx.Get(&n, "SELECT COUNT(*) FROM "+table+" WHERE local_id = ? FOR UPDATE", id.LocalID); err != nil || n != 1 {
		t.Fatalf("locking the pin's row: %d, %v", n, err)
	}
	return f.pins[0], db, table
}

// waiting lists the statements naming table that run in MariaDB, other
// than the caller's.
func waiting(t *testing.T, db *sqlx.DB, table string) []string {
	t.Helper()
	var infos []string
	if err := db.Select(&infos, "SELECT INFO FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()"+
		" AND COMMAND = 'Query' AND INFO LIKE CONCAT('%', ?, '%')", table); err != nil {
		t.Fatal(err)
	}
	return infos
}

// patchWaiting sends a PATCH of pin on a connection of its own and
// returns it once its statement waits in MariaDB for the row's lock.
func patchWaiting(t *testing.T, s *server, pin string, db *sqlx.DB, table string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"description":"changed"}`
	fmt.Fprintf(conn, "PATCH /v1/pins/%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/merge-patch+json\r\nContent-Length: %d\r\n\r\n%s",
		pin, e2eAdminToken, len(body), body)
	for start := time.Now(); len(waiting(t, db, table)) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 4*time.Second {
			conn.Close()
			t.Fatal("the PATCH's statement never showed in MariaDB's process list")
		}
	}
	time.Sleep(200 * time.Millisecond)
	if w := waiting(t, db, table); len(w) != 1 {
		t.Fatalf("%d statements waiting for the row, want the PATCH's: %q", len(w), w)
	}
	return conn
}

// leaves waits for the statements naming table to leave the process list
// and fails the test unless they do within within (the store's own
// deadline for a write is 5 s, the lock wait 50 s).
func leaves(t *testing.T, db *sqlx.DB, table string, within time.Duration, what string) {
	t.Helper()
	start := time.Now()
	for len(waiting(t, db, table)) > 0 {
		if time.Since(start) > within {
			t.Fatalf("the PATCH's statement was still in MariaDB's process list %v after %s: %q", within, what, waiting(t, db, table))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the statement left the process list %v after %s", time.Since(start).Round(time.Millisecond), what)
}

// A request whose client leaves stops its statement in MariaDB: a PATCH
// waiting for a row lock leaves the process list within 2 s of its client
// closing the connection, before the store's 5 s deadline would end it.
func TestEdgeClientGoneStopsTheStatement(t *testing.T) {
	s := startServer(t)
	pin, db, table := lockedPin(t, s)
	conn := patchWaiting(t, s, pin, db, table)
	conn.Close()
	leaves(t, db, table, 2*time.Second, "its client left")
}

// A request still running when its server's shutdown grace ends stops its
// statement in MariaDB: with a grace of 500 ms, a PATCH waiting for a row
// lock leaves the process list within 2.5 s of the shutdown's start, and
// its client gets an answer.
func TestEdgeShutdownStopsTheStatement(t *testing.T) {
	s := startServerEnv(t, map[string]string{"PINSTORE_SHUTDOWN_TIMEOUT": "500ms"})
	pin, db, table := lockedPin(t, s)
	conn := patchWaiting(t, s, pin, db, table)
	defer conn.Close()
	stopped := make(chan error, 1)
	go func() { stopped <- s.stop() }()
	leaves(t, db, table, 2500*time.Millisecond, "the shutdown began")
	if err := <-stopped; err != nil {
		t.Errorf("serve: %v", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the PATCH got no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("the cancelled PATCH answered %d, want 503", resp.StatusCode)
	}
}
