//go:build !linux

package swarm

import "os/exec"

// setDeathSignal is a no-op where the kernel has no parent-death signal
// (darwin): there an agent outlives a swarm that is SIGKILLed, though not
// one that stops normally, which kills its agents itself.
func setDeathSignal(cmd *exec.Cmd) {}
