package failover

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pinstore/pinstore/store/replicas"
)

// TestGTIDSniffer feeds a dump through the sniffer in chunks of every
// size: the position line is found wherever the chunks cut it, and long
// lines cost nothing.
func TestGTIDSniffer(t *testing.T) {
	dump := "-- MariaDB dump\n-- CHANGE MASTER TO MASTER_USE_GTID=slave_pos;\nINSERT INTO `pins` VALUES " + strings.Repeat("(1,'-- SET GLOBAL gtid_slave_pos=''9-9-9'';'),", 2000) + "(2,'x');\n" +
		"-- The deferred gtid setting\n-- SET GLOBAL gtid_slave_pos='0-1-812,1-1-4';\n-- Dump completed\n"
	for _, size := range []int{1, 2, 7, 64, 4096, len(dump)} {
		s := &gtidSniffer{}
		for i := 0; i < len(dump); i += size {
			if _, err := s.Write([]byte(dump[i:min(i+size, len(dump))])); err != nil {
				t.Fatal(err)
			}
		}
		if s.pos == nil || s.pos.String() != "0-1-812,1-1-4" {
			t.Fatalf("chunks of %d: position %v", size, s.pos)
		}
	}
	s := &gtidSniffer{}
	_, _ = s.Write([]byte("-- no position here\n"))
	if s.pos != nil {
		t.Fatal("a dump without the line has a position")
	}
}

func TestNotIn(t *testing.T) {
	state := func(s string) []replicas.GTID {
		var out []replicas.GTID
		for _, part := range strings.Split(s, ",") {
			if part == "" {
				continue
			}
			p, err := replicas.ParsePos(part)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		name           string
		server, master string // binlog states
		applied        string
		errant         string
		count          uint64
	}{
		{"a prefix", "0-1-90", "0-1-100", "", "", 0},
		{"equal", "0-1-100", "0-1-100", "", "", 0},
		{"old master kept two unacknowledged", "0-1-102", "0-1-100,0-2-130", "", "0-1-102", 2},
		{"written on the replica", "0-1-100,0-3-101", "0-1-100", "0-1-100", "0-3-101", 1},
		{"applied beyond the master", "", "0-1-100", "0-1-104", "0-1-104", 4},
		{"a new domain", "0-1-100,5-3-2", "0-1-100", "", "5-3-2", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			applied, _ := replicas.ParsePos(tt.applied)
			mpos, _ := replicas.ParsePos(tt.master)
			s := replicas.Server{BinlogState: state(tt.server), Applied: applied}
			m := replicas.Server{BinlogState: state(tt.master), Binlog: mpos}
			got := notIn(s, m)
			if replicas.Pos(got).String() != tt.errant {
				t.Fatalf("notIn = %q, want %q", replicas.Pos(got).String(), tt.errant)
			}
			if n := countGTIDs(got, m); n != tt.count {
				t.Fatalf("countGTIDs = %d, want %d", n, tt.count)
			}
		})
	}
}

// slowReader gives size bytes, chunk at a time, one chunk every tick.
type slowReader struct {
	left, chunk int
	tick        time.Duration
}

func (r *slowReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	time.Sleep(r.tick)
	n := min(r.chunk, r.left, len(p))
	for i := range p[:n] {
		p[i] = '-'
	}
	r.left -= n
	return n, nil
}

// TestCopyDumpShowsProgress: while a replica's copy streams, its progress
// lines say the bytes so far, the rate and the time left against the
// databases' size.
func TestCopyDumpShowsProgress(t *testing.T) {
	var lines []string
	var dst bytes.Buffer
	n, err := copyDump(&dst, &slowReader{left: 400_000, chunk: 10_000, tick: 10 * time.Millisecond}, func() int64 { return 400_000 }, 50*time.Millisecond, func(l string) { lines = append(lines, l) })
	if err != nil || n != 400_000 || dst.Len() != 400_000 {
		t.Fatalf("copied %d (%d): %v", n, dst.Len(), err)
	}
	re := regexp.MustCompile(`^copy: [0-9.]+ KB of the dump, [0-9.]+ [KM]?B/s; the databases hold about 400\.0 KB: (about \S+ left|almost done)$`)
	seen := 0
	for _, l := range lines {
		if re.MatchString(l) {
			seen++
		}
	}
	if seen < 2 {
		t.Fatalf("progress lines:\n%s", strings.Join(lines, "\n"))
	}
}
