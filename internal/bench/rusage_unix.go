//go:build unix

package bench

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// processCPU returns the CPU time (user + system) of this process so far,
// all threads (getrusage RUSAGE_SELF).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeakRSS resets the process's peak resident set to its current one
// (Linux: "5" to /proc/self/clear_refs), so that peakRSS measures a phase.
// Elsewhere it does nothing and peakRSS is the peak since the start.
func resetPeakRSS() {
	if runtime.GOOS == "linux" {
		_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	}
}

// peakRSS returns the process's peak resident set in bytes: VmHWM of
// /proc/self/status on Linux, else getrusage's ru_maxrss.
func peakRSS() int64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmHWM:")); ok {
				f := bytes.Fields(rest)
				if len(f) >= 1 {
					if kb, err := strconv.ParseInt(string(f[0]), 10, 64); err == nil {
						return kb << 10
					}
				}
			}
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return int64(ru.Maxrss) // bytes on macOS
	}
	return int64(ru.Maxrss) << 10 // KiB elsewhere
}
