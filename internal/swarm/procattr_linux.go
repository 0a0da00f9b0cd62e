package swarm

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the kernel SIGKILL the agent process when the swarm
// that started it dies, even by SIGKILL.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
