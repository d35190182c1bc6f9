package main

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// CPU accounting: on a shared machine throughput drifts with other tenants
// and CPU steal, but the CPU time each process spends per operation does
// not. Each measurement reads utime+stime from /proc for the load generator
// itself and for the processes the run depends on: the one listening on the
// port the harness talks to (pinstore on -addr, mariadbd on -dsn,
// redis-server on -redis), or, when no listener is found, every process
// whose command name starts with the process's name. The listener is the
// exact figure on a machine where tests start other pinstores, mariadbds
// and redis-servers of their own.

// cpuProcs are the processes counted, in report order; "load" is this
// process.
var cpuProcs = []string{"load", "pinstore", "mariadbd", "redis-server"}

const clockTick = 10 * time.Millisecond // USER_HZ is 100 on Linux

type cpuTimes map[string]time.Duration

// cpuPIDs maps a name of cpuProcs to the pid counted for it; a name not
// in it is counted by command-name prefix.
type cpuPIDs map[string]int

// findCPUPIDs finds the pid listening on each address (name → host:port).
func findCPUPIDs(addrs map[string]string) cpuPIDs {
	out := cpuPIDs{}
	inodes := map[string]string{} // socket inode → name
	for name, addr := range addrs {
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			continue
		}
		port, err := strconv.Atoi(p)
		if err != nil {
			continue
		}
		for _, ino := range listenInodes(port) {
			inodes["socket:["+ino+"]"] = name
		}
	}
	if len(inodes) == 0 {
		return out
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		fds, _ := filepath.Glob(filepath.Join(d, "fd", "*"))
		for _, fd := range fds {
			link, err := os.Readlink(fd)
			if err != nil {
				continue
			}
			if name, ok := inodes[link]; ok {
				if pid, err := strconv.Atoi(filepath.Base(d)); err == nil {
					out[name] = pid
				}
			}
		}
	}
	return out
}

// listenInodes returns the inodes of the TCP sockets listening on port.
func listenInodes(port int) []string {
	var out []string
	want := strings.ToUpper(strconv.FormatInt(int64(port), 16))
	for len(want) < 4 {
		want = "0" + want
	}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			if len(fs) < 10 || fs[3] != "0A" || !strings.HasSuffix(fs[1], ":"+want) {
				continue
			}
			out = append(out, fs[9])
		}
		fh.Close()
	}
	return out
}

// readCPU sums utime+stime per name of cpuProcs: the pid pids names for
// it, else every process whose command name starts with the name.
func readCPU(pids cpuPIDs) cpuTimes {
	out := cpuTimes{"load": procCPU("/proc/self/stat")}
	byPrefix := false
	for _, p := range cpuProcs[1:] {
		if pid, ok := pids[p]; ok {
			out[p] = procCPU(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		} else {
			byPrefix = true
		}
	}
	if !byPrefix {
		return out
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil {
			continue
		}
		name := strings.TrimSpace(string(comm))
		for _, p := range cpuProcs[1:] {
			if _, exact := pids[p]; !exact && strings.HasPrefix(name, p) {
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
