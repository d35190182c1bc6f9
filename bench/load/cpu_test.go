package main

import (
	"net"
	"os"
	"testing"
	"time"
)

// The load generator's own CPU time grows while it burns CPU.
func TestReadCPUCountsThisProcess(t *testing.T) {
	before := readCPU(nil)
	x := 0
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		x++
	}
	d := readCPU(nil).sub(before)
	if d["load"] < 100*time.Millisecond {
		t.Fatalf("300ms of busy loop counted as %v of CPU (%d)", d["load"], x)
	}
}

// The process listening on an address is found by its port, and only it
// is counted under that name.
func TestFindCPUPIDsFindsTheListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pids := findCPUPIDs(map[string]string{"pinstore": ln.Addr().String(), "redis-server": "127.0.0.1:1"})
	if pids["pinstore"] != os.Getpid() {
		t.Fatalf("listener of %s: pid %d, want this process %d", ln.Addr(), pids["pinstore"], os.Getpid())
	}
	if _, ok := pids["redis-server"]; ok {
		t.Fatalf("a pid for a port nobody listens on: %v", pids)
	}
	before := readCPU(pids)
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
	}
	if d := readCPU(pids).sub(before); d["pinstore"] < 100*time.Millisecond {
		t.Fatalf("the listener's 300ms of busy loop counted as %v", d["pinstore"])
	}
}
