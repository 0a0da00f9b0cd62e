//go:build !linux

package serveproc

import "os/exec"

// setDeathSignal is a no-op where the kernel has no parent-death signal.
func setDeathSignal(cmd *exec.Cmd) {}
