package main

import (
	"testing"
	"time"
)

// The load generator's own CPU time grows while it burns CPU.
func TestReadCPUCountsThisProcess(t *testing.T) {
	before := readCPU()
	x := 0
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		x++
	}
	d := readCPU().sub(before)
	if d["load"] < 100*time.Millisecond {
		t.Fatalf("300ms of busy loop counted as %v of CPU (%d)", d["load"], x)
	}
}
