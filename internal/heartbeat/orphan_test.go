package heartbeat

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// orphanScript forks a long-lived child that keeps the run log's pipe
// open, records its pid, then waits for release-<runId> and exits 0.
const orphanScript = `#!/bin/sh
sleep 1017 &
echo $! > "$DIR/child-$CLASP_RUN_ID"
env | grep -E '^(CLASP|PAPERCLIP)_' > "$DIR/env-$CLASP_RUN_ID"
while [ ! -e "$DIR/release-$CLASP_RUN_ID" ]; do [ -d "$DIR" ] || exit 1; sleep 0.05; done
echo "done $CLASP_RUN_ID"
`

// childOf returns the pid and start time of the child run r's script
// forked; the child is killed when the test ends if it still runs.
func (f *fixture) childOf(t *testing.T, r *clasp.Run) (int, int64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, "child-"+r.ID))
	if err != nil {
		t.Fatalf("child pid of run %s: %v", r.ID, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("child pid of run %s: %v", r.ID, err)
	}
	start, ok := ProcStart(pid)
	if !ok {
		t.Fatalf("child %d of run %s is not running", pid, r.ID)
	}
	t.Cleanup(func() {
		if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && Alive(pid, start) &&
			strings.Contains(string(cmdline), "1017") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return pid, start
}

// The main process of a run is SIGKILLed while a child of it (holding
// the run log's output) lives on: the run is lost at once, not when the
// child ends: failed/process_lost, its locks handed to one retry, and the
// orphaned child stopped. The retry's main process exits 0 while its own
// child lives on: the run succeeded and that child is stopped too.
func TestMainProcessExitEndsRunDespiteChildren(t *testing.T) {
	stores(t, func(t *testing.T, open func() store.HeartbeatStore) {
		st := open()
		f := newFixture(t, st, orphanScript, 0)
		newScheduler(t, st, "host-a")
		r1 := f.runningWithPID(t, f.wake(t).Run.ID)
		child1, start1 := f.childOf(t, r1)
		f.checkoutAs(t, r1, clasp.IssueTodo)
		if err := syscall.Kill(*r1.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var retry *clasp.Run
		eventually(t, "a retry of the killed run", func() bool { retry = f.retryOf(t, r1.ID); return retry != nil })
		if got := f.run(t, r1.ID); got.Status != clasp.RunFailed || deref(got.ErrorCode) != clasp.RunErrorProcessLost ||
			!strings.Contains(deref(got.Error), "killed by signal") {
			t.Errorf("killed run: got %s/%s %q, want failed/process_lost, killed by signal", got.Status, deref(got.ErrorCode), deref(got.Error))
		}
		if Alive(child1, start1) {
			t.Errorf("the killed run's child %d still runs after the run ended", child1)
		}
		iss, _ := st.IssueGet(t.Context(), "", f.issue.ID)
		if deref(iss.ExecutionRunID) != retry.ID || iss.CheckoutRunID != nil {
			t.Errorf("issue locks: execution %q checkout %q, want execution on the retry %s and no checkout",
				deref(iss.ExecutionRunID), deref(iss.CheckoutRunID), retry.ID)
		}

		r2 := f.runningWithPID(t, retry.ID)
		child2, start2 := f.childOf(t, r2)
		os.WriteFile(filepath.Join(f.dir, "release-"+r2.ID), nil, 0o600)
		eventually(t, "retry ended", func() bool { return f.run(t, r2.ID).Status.Terminal() })
		if got := f.run(t, r2.ID); got.Status != clasp.RunSucceeded || got.ExitCode == nil || *got.ExitCode != 0 {
			t.Errorf("retry whose main process exited 0: got %s exit %v %q, want succeeded exit 0", got.Status, got.ExitCode, deref(got.Error))
		}
		if Alive(child2, start2) {
			t.Errorf("the retry's child %d still runs after the run ended", child2)
		}
	})
}
