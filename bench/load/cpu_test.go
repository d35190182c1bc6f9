package main

import (
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// burn spins until this process has used d more CPU time by its own
// account (getrusage), however busy the machine is, and returns it.
func burn(t *testing.T, d time.Duration) time.Duration {
	t.Helper()
	used := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := used()
	for deadline := time.Now().Add(30 * time.Second); used()-start < d; {
		if time.Now().After(deadline) {
			t.Fatalf("could not use %v of CPU in 30s", d)
		}
	}
	return used() - start
}

// The load generator's own CPU time grows while it burns CPU.
func TestReadCPUCountsThisProcess(t *testing.T) {
	before := readCPU(nil)
	spent := burn(t, 300*time.Millisecond)
	if d := readCPU(nil).sub(before); d["load"] < spent-50*time.Millisecond {
		t.Fatalf("%v of CPU spent, %v counted", spent, d["load"])
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
	spent := burn(t, 300*time.Millisecond)
	if d := readCPU(pids).sub(before); d["pinstore"] < spent-50*time.Millisecond {
		t.Fatalf("the listener spent %v of CPU, %v counted", spent, d["pinstore"])
	}
}
