package heartbeat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// ProcStart returns the start time of process pid in clock ticks since
// boot (field 22 of /proc/<pid>/stat), so that a pid reused by another
// process is told apart from the run's. ok is false when there is no such
// process or it is a zombie (dead, not yet reaped).
func ProcStart(pid int) (start int64, ok bool) {
	if pid <= 0 {
		return 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces and
	// parentheses: the fields after it start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 || string(f[0]) == "Z" || string(f[0]) == "X" {
		return 0, false
	}
	v, err := strconv.ParseInt(string(f[19]), 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// Alive reports whether process pid is running and started at procStart
// (clock ticks since boot, as ProcStart returns): a dead process, a zombie,
// or another process that reused the pid is not alive. procStart 0
// (unknown) is never alive.
func Alive(pid int, procStart int64) bool {
	if procStart == 0 {
		return false
	}
	got, ok := ProcStart(pid)
	return ok && got == procStart
}

// signalGroup sends sig to the process group pgid; a group that no longer
// exists is not an error.
func signalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 0 {
		return nil
	}
	err := syscall.Kill(-pgid, sig)
	if err == syscall.ESRCH {
		return nil
	}
	return err
}

// signalGroupExcept sends sig to every live member of process group pgid
// but process except.
func signalGroupExcept(pgid, except int, sig syscall.Signal) {
	if pgid <= 0 {
		return
	}
	for _, p := range readProcs() {
		if p.pgrp == pgid && p.pid != except && !p.dead {
			_ = syscall.Kill(p.pid, sig)
		}
	}
}

// groupAlive reports whether any process of group pgid is still running: a
// member that has exited but is not yet reaped (a zombie) does not count,
// so a group whose processes have all exited is not waited for. It reads
// the state and process group (fields 3 and 5) of every /proc/<pid>/stat.
func groupAlive(pgid int) bool {
	if pgid <= 0 || syscall.Kill(-pgid, 0) != nil {
		return false // no member at all, zombies included
	}
	ps, ok := listProcs()
	if !ok {
		return true // no /proc to tell zombies apart: the signal check stands
	}
	for _, p := range ps {
		if p.pgrp == pgid && !p.dead {
			return true
		}
	}
	return false
}
