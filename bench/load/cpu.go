package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CPU accounting: on a shared machine throughput drifts with other tenants
// and CPU steal, but the CPU time each process spends per operation does
// not. Each measurement reads utime+stime from /proc for the load generator
// itself and for the processes the run depends on (matched by command name
// prefix), so a report can say where the time of one operation goes.

// cpuProcs are the command-name prefixes counted, in report order; "load"
// is this process.
var cpuProcs = []string{"load", "pinstore", "mariadbd", "redis-server"}

const clockTick = 10 * time.Millisecond // USER_HZ is 100 on Linux

type cpuTimes map[string]time.Duration

// readCPU sums utime+stime per prefix over the matching processes.
func readCPU() cpuTimes {
	out := cpuTimes{"load": procCPU("/proc/self/stat")}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil {
			continue
		}
		name := strings.TrimSpace(string(comm))
		for _, p := range cpuProcs[1:] {
			if strings.HasPrefix(name, p) {
				out[p] += procCPU(filepath.Join(d, "stat"))
			}
		}
	}
	return out
}

// procCPU parses utime and stime (fields 14 and 15) of a /proc stat file.
func procCPU(path string) time.Duration {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')') // the command may hold spaces
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * clockTick
}

func (c cpuTimes) sub(o cpuTimes) cpuTimes {
	out := cpuTimes{}
	for k, v := range c {
		out[k] = v - o[k]
	}
	return out
}

func (c cpuTimes) add(o cpuTimes) cpuTimes {
	out := cpuTimes{}
	for k, v := range c {
		out[k] = v
	}
	for k, v := range o {
		out[k] += v
	}
	return out
}

func (c cpuTimes) total() time.Duration {
	var t time.Duration
	for _, v := range c {
		t += v
	}
	return t
}
