//go:build !linux

package crashtest

import "os/exec"

// setDeathSignal is a no-op where the kernel has no parent-death signal.
func setDeathSignal(cmd *exec.Cmd) {}
