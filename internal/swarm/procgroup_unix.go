//go:build unix

package swarm

import (
	"os/exec"
	"syscall"
)

// setOwnGroup puts the agent process (not started yet) in a process group
// of its own, so that killGroup reaches the children it starts (`clasp
// mcp` of an MCP agent) in the same instant. It keeps the attributes
// setDeathSignal set.
func setOwnGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// killGroup SIGKILLs every process of the group that cmd's started
// process leads (setOwnGroup); errors (the group is gone) are ignored.
func killGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
