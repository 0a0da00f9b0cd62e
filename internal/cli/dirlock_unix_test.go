//go:build unix

package cli

import (
	"errors"
	"os/exec"
	"sync"
	"testing"
)

// TestServeLockFreeAfterReleaseWhileChildrenStart: the data directory's
// serve lock is free the moment its release returns, even while other
// goroutines of the process start child processes (each holds a copy of
// the lock's descriptor from its fork until its exec): a serve stopped
// and started again in one process is never refused by itself.
func TestServeLockFreeAfterReleaseWhileChildrenStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = exec.Command("true").Run() // the exit status does not matter, only the fork
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	unlock, err := lockServeDir(dir, true)
	if err != nil {
		t.Fatalf("first lock: %v", err)
	}
	for i := range 300 {
		unlock()
		if unlock, err = lockServeDir(dir, true); err != nil {
			if errors.Is(err, errDirLocked) {
				t.Fatalf("take %d: the released lock was still held (by a starting child's copy of it): %v", i, err)
			}
			t.Fatalf("take %d: %v", i, err)
		}
	}
	unlock()
}
