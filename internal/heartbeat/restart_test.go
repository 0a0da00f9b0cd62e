package heartbeat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// chattyScript writes to stdout and stderr before and after the file
// release-<runId> appears, then exits 3. It exits 1 once its directory is
// gone (a run a test left running).
const chattyScript = `#!/bin/sh
env | grep -E '^(CLASP|PAPERCLIP)_' > "$DIR/env-$CLASP_RUN_ID"
echo "before $CLASP_RUN_ID"
echo "before on stderr" >&2
while [ ! -e "$DIR/release-$CLASP_RUN_ID" ]; do [ -d "$DIR" ] || exit 1; sleep 0.05; done
i=0
while [ $i -lt 20 ]; do echo "after $i"; echo "after $i on stderr" >&2; i=$((i+1)); done
exit 3
`

// A server stops abruptly (its scheduler stops as a SIGKILLed server's
// would, leaving the process running) and a new instance on the same
// machine and log directory takes the run over. The process keeps
// writing: what it writes after the take-over is in the run's log after
// what it wrote before, and the run ends by its real exit status (failed,
// exitCode 3, attempt 1, no retry), not as a lost process. On a server
// whose run output went through a pipe to the server, the output after
// the take-over was lost and the run ended failed/process_lost with a
// retry.
func TestTakenOverRunKeepsOutputAndExitStatus(t *testing.T) {
	stores(t, func(t *testing.T, open func() store.HeartbeatStore) {
		st := open()
		f := newFixture(t, st, chattyScript, 0)
		logs := filepath.Join(t.TempDir(), "logs")
		cfg := Config{HostID: "host-a", Interval: 50 * time.Millisecond, LogDir: logs, KillGrace: 300 * time.Millisecond}
		s1 := New(st, cfg)
		if err := s1.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		r := f.runningWithPID(t, f.wake(t).Run.ID)
		logText := func() string {
			b, _ := os.ReadFile(LogPath(logs, r.ID))
			return string(b)
		}
		eventually(t, "output before the stop in the log", func() bool { return strings.Contains(logText(), "before on stderr\n") })
		s1.Stop() // as a SIGKILLed server: nothing ends the run

		cfg.HostID = "host-b"
		s2 := New(st, cfg)
		if err := s2.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s2.Stop)
		eventually(t, "run re-adopted by host-b", func() bool {
			s2.mu.Lock()
			_, watched := s2.procs[r.ID]
			s2.mu.Unlock()
			return watched
		})
		if got := f.run(t, r.ID); got.Status != clasp.RunRunning || deref(got.HostID) != "host-b" {
			t.Fatalf("run after the take-over: %s on %q, want running on host-b", got.Status, deref(got.HostID))
		}
		if err := os.WriteFile(filepath.Join(f.dir, "release-"+r.ID), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		eventually(t, "taken-over run ended", func() bool { return f.run(t, r.ID).Status.Terminal() })

		got := f.run(t, r.ID)
		if got.Status != clasp.RunFailed || got.ExitCode == nil || *got.ExitCode != 3 || got.ErrorCode != nil || got.Attempt != 1 {
			t.Errorf("taken-over run: %s exit %v errorCode %q attempt %d (%q), want failed exit 3, no errorCode, attempt 1",
				got.Status, got.ExitCode, deref(got.ErrorCode), got.Attempt, deref(got.Error))
		}
		if rt := f.retryOf(t, r.ID); rt != nil {
			t.Errorf("the taken-over run was retried (run %s)", rt.ID)
		}
		text := logText()
		for _, want := range []string{"before " + r.ID, "before on stderr", "after 0", "after 19", "after 19 on stderr"} {
			if !containsLine(text, want) {
				t.Errorf("run log lacks %q:\n%s", want, text)
			}
		}
		if i, j := strings.Index(text, "before "+r.ID), strings.Index(text, "after 0\n"); i >= 0 && j >= 0 && j < i {
			t.Errorf("run log out of order:\n%s", text)
		}
		eventually(t, "status file of the ended run removed", func() bool {
			_, err := os.Stat(StatusPath(logs, r.ID))
			return os.IsNotExist(err)
		})
	})
}
