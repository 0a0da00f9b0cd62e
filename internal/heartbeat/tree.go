package heartbeat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// procEntry is what /proc/<pid>/stat says of a process: its parent, its
// process group and whether it is dead (a zombie, waiting to be reaped).
type procEntry struct {
	pid, ppid, pgrp int
	dead            bool
}

// readProcs lists every process of /proc with its parent and group; a
// process that exits during the listing is left out. Nil when /proc
// cannot be read.
func readProcs() []procEntry {
	ps, _ := listProcs()
	return ps
}

// listProcs is readProcs, with ok false when /proc cannot be read (so
// that no process is known, rather than none running).
func listProcs() (ps []procEntry, ok bool) {
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return nil, false
	}
	out := make([]procEntry, 0, len(dir))
	for _, e := range dir {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:]) // f[0] field 3 (state), f[1] field 4 (ppid), f[2] field 5 (pgrp)
		if len(f) < 3 {
			continue
		}
		ppid, err1 := strconv.Atoi(string(f[1]))
		pgrp, err2 := strconv.Atoi(string(f[2]))
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, procEntry{pid: pid, ppid: ppid, pgrp: pgrp, dead: string(f[0]) == "Z" || string(f[0]) == "X"})
	}
	return out, true
}

// descendants returns the live (not zombie) descendants of process root,
// whatever their session or process group.
func descendants(root int) []procEntry {
	ps := readProcs()
	children := make(map[int][]procEntry, len(ps))
	for _, p := range ps {
		children[p.ppid] = append(children[p.ppid], p)
	}
	var out []procEntry
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if !c.dead {
				out = append(out, c)
			}
			queue = append(queue, c.pid) // a zombie's children are orphans already, listed under us
		}
	}
	return out
}

// becomeSubreaper makes the calling process a child subreaper: every
// descendant orphaned by its parent's exit (a double fork, a daemon that
// detached with setsid, a nohup'd child whose shell exited) is re-parented
// to it instead of to init, so it stays a descendant that endTree finds.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// reapZombies reaps every child of the caller that has exited, without
// waiting for the others.
func reapZombies() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// signalDescendants sends sig to every live descendant of the caller that
// is not in process group skipGroup (0: none skipped). It returns how many
// it signalled.
func signalDescendants(sig syscall.Signal, skipGroup int) int {
	n := 0
	for _, d := range descendants(os.Getpid()) {
		if skipGroup != 0 && d.pgrp == skipGroup {
			continue
		}
		if syscall.Kill(d.pid, sig) == nil {
			n++
		}
	}
	return n
}

// endTree ends every descendant of the calling subreaper: SIGTERM, then,
// after grace or once none is left, SIGKILL to whatever still runs,
// scanned again until no descendant is left (one forked between a scan
// and its kill is re-parented to the caller and found by the next scan),
// reaping them all. It gives up after grace plus giveUp (a descendant it
// may not signal, such as a setuid program, stays), and reports whether
// the tree is empty.
func endTree(grace, giveUp time.Duration) bool {
	self := os.Getpid()
	if len(descendants(self)) == 0 {
		reapZombies()
		return true
	}
	signalDescendants(syscall.SIGTERM, 0)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		reapZombies()
		if len(descendants(self)) == 0 {
			reapZombies()
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	deadline = time.Now().Add(giveUp)
	for {
		n := signalDescendants(syscall.SIGKILL, 0)
		reapZombies()
		if n == 0 && len(descendants(self)) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// clockTicks is USER_HZ, the unit of process start times in
// /proc/<pid>/stat: 100 on every Linux architecture.
const clockTicks = 100

// bootTicks is the time since boot in clock ticks, on the clock process
// start times are measured with (CLOCK_BOOTTIME), rounded down: a process
// whose start time is below it started before this call.
func bootTicks() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return ts.Sec*clockTicks + ts.Nsec/(1e9/clockTicks)
}

// uidProcs returns the pids of the live processes whose real, effective
// or saved uid is uid and that started before tick before (clock ticks
// since boot; see bootTicks), read from /proc/<pid>/status and stat. The
// owner of /proc/<pid> is not used: a process that makes itself
// non-dumpable shows as root's there.
func uidProcs(uid uint32, before int64) []int {
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := strconv.FormatUint(uint64(uid), 10)
	var out []int
	for _, e := range dir {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		_, rest, ok := bytes.Cut(b, []byte("\nUid:"))
		if !ok {
			continue
		}
		line, _, _ := bytes.Cut(rest, []byte("\n"))
		f := bytes.Fields(line) // real, effective, saved, filesystem
		match := false
		for i := 0; i < len(f) && i < 3; i++ {
			match = match || string(f[i]) == want
		}
		if !match {
			continue
		}
		if start, ok := ProcStart(pid); ok && start < before {
			out = append(out, pid)
		}
	}
	return out
}
