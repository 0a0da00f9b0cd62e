package heartbeat

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// escapeScript starts three descendants that leave the command's control
// in the three usual ways, each recording its pid (the sleep it execs
// keeps it): one in a session of its own (setsid) that ignores SIGTERM
// and SIGHUP, one double-forked (its parent subshell exits at once, so
// it is orphaned), and one under nohup. Once the three pids are written
// it records its environment, then waits for release-<runId> and exits 0.
const escapeScript = `#!/bin/sh
setsid sh -c 'trap "" TERM HUP; echo $$ > "$DIR/setsid-$CLASP_RUN_ID"; exec sleep 1019' </dev/null >/dev/null 2>&1 &
( sh -c 'echo $$ > "$DIR/fork2-$CLASP_RUN_ID"; exec sleep 1019' </dev/null >/dev/null 2>&1 & ) &
nohup sh -c 'echo $$ > "$DIR/nohup-$CLASP_RUN_ID"; exec sleep 1019' </dev/null >/dev/null 2>&1 &
for f in setsid fork2 nohup; do
  while [ ! -s "$DIR/$f-$CLASP_RUN_ID" ]; do [ -d "$DIR" ] || exit 1; sleep 0.02; done
done
env | grep -E '^(CLASP|PAPERCLIP)_' > "$DIR/env-$CLASP_RUN_ID"
while [ ! -e "$DIR/release-$CLASP_RUN_ID" ]; do [ -d "$DIR" ] || exit 1; sleep 0.05; done
echo "done $CLASP_RUN_ID"
`

// escaped is a descendant of a run that escapeScript started.
type escaped struct {
	kind  string
	pid   int
	start int64
}

// escapees returns the three descendants escapeScript started for run r,
// each checked to be running; those still running when the test ends are
// killed.
func (f *fixture) escapees(t *testing.T, r *clasp.Run) []escaped {
	t.Helper()
	var out []escaped
	for _, kind := range []string{"setsid", "fork2", "nohup"} {
		b, err := os.ReadFile(filepath.Join(f.dir, kind+"-"+r.ID))
		if err != nil {
			t.Fatalf("%s pid of run %s: %v", kind, r.ID, err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("%s pid of run %s: %v", kind, r.ID, err)
		}
		start, ok := ProcStart(pid)
		if !ok {
			t.Fatalf("the %s descendant %d of run %s is not running", kind, pid, r.ID)
		}
		t.Cleanup(func() {
			if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && Alive(pid, start) &&
				strings.Contains(string(cmdline), "1019") {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		})
		out = append(out, escaped{kind: kind, pid: pid, start: start})
	}
	// The setsid one really left the run's session and group, which is
	// what a group signal misses.
	if sid, err := unix.Getsid(out[0].pid); err != nil || sid == *r.PID {
		t.Fatalf("the setsid descendant %d: session %d (%v), want one of its own, not the run's %d", out[0].pid, sid, err, *r.PID)
	}
	return out
}

// TestProcessTreeEndsWithRun: a run's command starts a setsid descendant
// that ignores SIGTERM, a double-forked one and a nohup one. When the
// command exits 0, the run succeeds and none of the three runs any more
// (the shim, a subreaper, ends its whole tree before it records the exit
// status). A second run, cancelled while its
// three descendants run, ends cancelled with all three gone as well.
// Before the shim was a subreaper only the process group was signalled:
// the setsid descendant, in a session of its own, outlived both runs.
func TestProcessTreeEndsWithRun(t *testing.T) {
	stores(t, func(t *testing.T, open func() store.HeartbeatStore) {
		st := open()
		f := newFixture(t, st, escapeScript, 0)
		s := newScheduler(t, st, "host-a")

		// Polled with a deadline of a few scheduler passes (the shim has
		// normally ended them before the run ends; a shim slower than the
		// kill grace is killed, and the scheduler then ends them by uid and
		// environment, within a pass).
		gone := func(what string, r *clasp.Run, es []escaped) {
			t.Helper()
			deadline := time.Now().Add(5 * time.Second)
			for _, e := range es {
				for Alive(e.pid, e.start) && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				if Alive(e.pid, e.start) {
					t.Errorf("%s: the %s descendant %d still runs 5 s after run %s ended %s", what, e.kind, e.pid, r.ID, f.run(t, r.ID).Status)
				}
			}
		}

		r1 := f.runningWithPID(t, f.wake(t).Run.ID)
		es1 := f.escapees(t, r1)
		os.WriteFile(filepath.Join(f.dir, "release-"+r1.ID), nil, 0o600)
		eventually(t, "run ended", func() bool { return f.run(t, r1.ID).Status.Terminal() })
		if got := f.run(t, r1.ID); got.Status != clasp.RunSucceeded {
			t.Errorf("run whose command exited 0: got %s %q, want succeeded", got.Status, deref(got.Error))
		}
		gone("exit 0", r1, es1)

		r2 := f.runningWithPID(t, f.wake(t).Run.ID)
		es2 := f.escapees(t, r2)
		if !s.Cancel(r2.ID) {
			t.Fatalf("cancel run %s: not watched by the scheduler", r2.ID)
		}
		eventually(t, "cancelled run ended", func() bool { return f.run(t, r2.ID).Status.Terminal() })
		if got := f.run(t, r2.ID); got.Status != clasp.RunCancelled {
			t.Errorf("cancelled run: got %s %q, want cancelled", got.Status, deref(got.Error))
		}
		gone("cancel", r2, es2)
	})
}

// TestStraysOfKilledShimEnd: the watcher of a run (its shim) is SIGKILLed
// while the command's setsid, double-forked and nohup descendants run, so
// no subreaper is left to end them. The run is lost, and within a
// scheduler pass or two none of the three runs any more: the group is
// stopped, and the server kills the processes of the run's uid whose
// environment names the run. Before, the setsid descendant outlived the
// run. Its retry is released and succeeds.
func TestStraysOfKilledShimEnd(t *testing.T) {
	stores(t, func(t *testing.T, open func() store.HeartbeatStore) {
		st := open()
		f := newFixture(t, st, escapeScript, 0)
		newScheduler(t, st, "host-a")
		r := f.runningWithPID(t, f.wake(t).Run.ID)
		es := f.escapees(t, r)
		if err := syscall.Kill(*r.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the run whose shim was killed ended", func() bool { return f.run(t, r.ID).Status.Terminal() })
		if got := f.run(t, r.ID); got.Status != clasp.RunFailed || deref(got.ErrorCode) != clasp.RunErrorProcessLost {
			t.Errorf("run whose shim was killed: got %s/%s, want failed/process_lost", got.Status, deref(got.ErrorCode))
		}
		for _, e := range es {
			eventually(t, fmt.Sprintf("the %s descendant %d gone", e.kind, e.pid), func() bool { return !Alive(e.pid, e.start) })
		}
		var retry *clasp.Run
		eventually(t, "a retry", func() bool { retry = f.retryOf(t, r.ID); return retry != nil })
		retry = f.runningWithPID(t, retry.ID)
		f.escapees(t, retry)
		os.WriteFile(filepath.Join(f.dir, "release-"+retry.ID), nil, 0o600)
		eventually(t, "retry ended", func() bool { return f.run(t, retry.ID).Status.Terminal() })
		if got := f.run(t, retry.ID); got.Status != clasp.RunSucceeded {
			t.Errorf("retry: got %s %q, want succeeded", got.Status, deref(got.Error))
		}
	})
}
