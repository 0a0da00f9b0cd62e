package crashtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// Two server-managed agents that write output while the server is down.
// writerScript goes on after the restart (more output, then exit 3);
// quitterScript exits 0 before the server is back.
const (
	writerScript = `echo "before $CLASP_RUN_ID"
while [ ! -f "$DIR/down" ]; do sleep 0.05; done
echo "while the server is down"
echo "while the server is down, on stderr" >&2
: > "$DIR/wrote-$CLASP_RUN_ID"
while [ ! -f "$DIR/back" ]; do sleep 0.05; done
echo "after the restart"
exit 3`
	quitterScript = `echo "before $CLASP_RUN_ID"
while [ ! -f "$DIR/down" ]; do sleep 0.05; done
echo "exiting while the server is down"
exit 0`
)

// TestHeartbeat_AgentOutputSurvivesServerKill: a real `clasp serve` runs
// two managed agents and is SIGKILLed while they run; both write to
// stdout and stderr while it is down, one exits 0 then, and the server
// restarts on the same data. Neither process dies of its writes: the one
// still running is re-adopted and ends failed with its real exit code 3,
// the one that exited while the server was down succeeded with exit
// code 0; neither is lost or retried, and each run's log holds what its
// process wrote before, during and after the server's absence. On a
// server that read its agents' output through a pipe, the first write
// after the kill killed the process (SIGPIPE), and both runs were lost
// and retried.
func TestHeartbeat_AgentOutputSurvivesServerKill(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			testAgentOutputSurvivesServerKill(t, backend)
		})
	}
}

func testAgentOutputSurvivesServerKill(t *testing.T, backend string) {
	log := &syncBuffer{}
	srv := startServer(t, serveArgs(t, backend, "hbout"), log)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hc := newHTTPClient()
	board := client.New(srv.URL(), client.WithToken(srv.BoardToken()), client.WithHTTPClient(hc))
	dir := t.TempDir()

	f := setUp(t, ctx, board, srv.URL(), hc, 2, 2)
	var runIDs []string
	for i, script := range []string{writerScript, quitterScript} {
		ac := client.New(srv.URL(), client.WithToken(f.keys[i]), client.WithHTTPClient(hc))
		if _, err := ac.RunFinish(ctx, f.runs[i].ID, client.RunFinishRequest{Status: clasp.RunSucceeded}); err != nil {
			t.Fatalf("finish setup run: %v", err)
		}
		cfg := &clasp.AdapterConfig{Type: clasp.AdapterProcess, Command: "/bin/sh", Args: []string{"-c", script},
			Env: map[string]string{"DIR": dir}, Heartbeat: clasp.HeartbeatConfig{Enabled: true, MaxConcurrentRuns: 1}}
		if _, err := board.AgentSetAdapter(ctx, f.agents[i].ID, cfg); err != nil {
			t.Fatalf("set adapter: %v", err)
		}
		w, err := board.AgentWake(ctx, f.agents[i].ID, client.WakeRequest{IssueID: f.issues[i].ID})
		if err != nil || w.Status != "queued" {
			t.Fatalf("wake agent %d = %+v, %v; want queued", i, w, err)
		}
		runIDs = append(runIDs, str(w.RunID))
	}
	logOf := func(id string) string {
		c, err := board.RunLog(ctx, id, 0)
		if err != nil {
			return ""
		}
		return string(c.Data)
	}
	// Wait until both processes run and have written their first line.
	pids, hosts := map[string]int{}, map[string]string{}
	for _, id := range runIDs {
		for {
			r, err := board.RunGet(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if r.PID != nil && r.HostID != nil && strings.Contains(logOf(id), "before "+id+"\n") {
				pids[id], hosts[id] = *r.PID, *r.HostID
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("run %s: no process with output (%s)", id, r.Status)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	srv.Kill()
	if err := os.WriteFile(filepath.Join(dir, "down"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	writer, quitter := runIDs[0], runIDs[1]
	// The writer writes, then records that it did; a process killed by
	// its write never records it.
	for {
		if _, err := os.Stat(filepath.Join(dir, "wrote-"+writer)); err == nil {
			break
		}
		if syscall.Kill(pids[writer], 0) != nil {
			t.Fatalf("the agent process of run %s died at its write while the server was down", writer)
		}
		if ctx.Err() != nil {
			t.Fatal("the writer never wrote")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for syscall.Kill(pids[quitter], 0) == nil && ctx.Err() == nil { // reaped by init once it exits
		time.Sleep(10 * time.Millisecond)
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatalf("restart: %v\n%s", err, log.tail(40))
	}
	// The writer is still running: re-adopted by the new server (the run
	// is on its instance) before it is let go.
	for {
		r, err := board.RunGet(ctx, writer)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != clasp.RunRunning || str(r.HostID) != hosts[writer] {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the writer's run was never re-adopted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(dir, "back"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	want := map[string]struct {
		status clasp.RunStatus
		code   int
		lines  []string
	}{
		writer:  {clasp.RunFailed, 3, []string{"before " + writer, "while the server is down", "while the server is down, on stderr", "after the restart"}},
		quitter: {clasp.RunSucceeded, 0, []string{"before " + quitter, "exiting while the server is down"}},
	}
	for id, w := range want {
		var r *clasp.Run
		for {
			var err error
			if r, err = board.RunGet(ctx, id); err != nil {
				t.Fatal(err)
			}
			if r.Status.Terminal() {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("run %s still %s", id, r.Status)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if r.Status != w.status || r.ExitCode == nil || *r.ExitCode != w.code || r.ErrorCode != nil || r.Attempt != 1 {
			t.Errorf("run %s: %s exit %v errorCode %q (%q), want %s exit %d, no errorCode", id, r.Status, r.ExitCode, str(r.ErrorCode),
				str(r.Error), w.status, w.code)
		}
		text := logOf(id)
		for _, line := range w.lines {
			if !strings.Contains(text, line+"\n") {
				t.Errorf("run %s: log lacks %q:\n%s", id, line, text)
			}
		}
	}
	all, err := board.RunList(ctx, f.company.ID, client.RunListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all.Items {
		if r.RetryOfRunID != nil {
			t.Errorf("run %s is a retry of %s: no run was lost", r.ID, *r.RetryOfRunID)
		}
	}
}
