package serveproc

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel SIGKILL the child when the process that
// started it dies, so that no server outlives a crashed test or swarm.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
