package main

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the spawned redis-server get SIGKILL if this process
// dies before it can stop it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
