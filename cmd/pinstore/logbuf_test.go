package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer records each Write separately.
type lockedBuffer struct {
	mu     sync.Mutex
	writes []string
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, string(p))
	return len(p), nil
}

func (l *lockedBuffer) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.writes...)
}

func TestLineBufferBatchesWholeLines(t *testing.T) {
	var out lockedBuffer
	b := newLineBuffer(&out, time.Hour, 100)
	for i := 0; i < 3; i++ {
		b.Write([]byte("0123456789012345678901234567890123456789\n")) // 41 bytes
	}
	// The third line took it past 100 bytes: one write of three lines.
	if w := out.all(); len(w) != 1 || strings.Count(w[0], "\n") != 3 {
		t.Fatalf("writes after 123 bytes: %q", w)
	}
	b.Write([]byte("tail\n"))
	if w := out.all(); len(w) != 1 {
		t.Fatalf("a short line was written at once: %q", w)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if w := out.all(); len(w) != 2 || w[1] != "tail\n" {
		t.Fatalf("Close did not write the rest: %q", w)
	}
}

func TestLineBufferFlushesOnTime(t *testing.T) {
	var out lockedBuffer
	b := newLineBuffer(&out, 10*time.Millisecond, 1<<20)
	defer b.Close()
	b.Write([]byte("one\n"))
	deadline := time.Now().Add(5 * time.Second)
	for len(out.all()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a buffered line was not written within 5s of a 10ms interval")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := bytes.Join([][]byte{[]byte(out.all()[0])}, nil); string(got) != "one\n" {
		t.Fatalf("wrote %q", got)
	}
}
