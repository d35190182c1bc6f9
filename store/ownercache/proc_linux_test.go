package ownercache_test

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes a child redis-server get SIGKILL if the test binary
// dies before its cleanup runs.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
