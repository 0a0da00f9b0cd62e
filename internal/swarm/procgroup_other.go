//go:build !unix

package swarm

import "os/exec"

// setOwnGroup does nothing where there are no process groups to kill.
func setOwnGroup(cmd *exec.Cmd) {}

// killGroup SIGKILLs cmd's started process alone (its children live on).
func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
