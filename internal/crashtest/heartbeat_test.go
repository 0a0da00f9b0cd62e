package crashtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// managedAgentScript is the process of a server-managed agent: it waits
// until the file $GATE exists (so that it outlives a server crash), then
// finishes its run as succeeded with its run token and exits 0.
const managedAgentScript = `while [ ! -f "$GATE" ]; do sleep 0.05; done
curl -sf -X POST -H "Authorization: Bearer $CLASP_API_KEY" -H 'Content-Type: application/json' \
  -d '{"status":"succeeded"}' "$CLASP_API_URL/api/runs/$CLASP_RUN_ID/finish" >/dev/null || exit 3
exit 0`

// TestHeartbeat_KillServerWhileAgentsRun: a real `clasp serve` runs four
// server-managed agents, each woken for its own issue; the
// server is SIGKILLed while their processes run, two of the processes are
// SIGKILLed while it is down, and it restarts on the same data. Every live
// run must be re-adopted and finish succeeded (attempt 1, no retry); every
// dead one must be recovered exactly once: failed with process_lost, one
// run.lost row, one retry (attempt 2) that finishes succeeded; no lock is
// left and no run is queued or running at the end.
func TestHeartbeat_KillServerWhileAgentsRun(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			testKillServerWhileAgentsRun(t, backend)
		})
	}
}

func testKillServerWhileAgentsRun(t *testing.T, backend string) {
	log := &syncBuffer{}
	srv := startServer(t, serveArgs(t, backend, "hbcrash"), log)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	hc := newHTTPClient()
	board := client.New(srv.URL(), client.WithToken(srv.BoardToken()), client.WithHTTPClient(hc))
	gate := filepath.Join(t.TempDir(), "gate")

	const n = 4
	f := setUp(t, ctx, board, srv.URL(), hc, n, n)
	for i, a := range f.agents {
		// setUp opened a run per agent; end it, it plays no part here.
		ac := client.New(srv.URL(), client.WithToken(f.keys[i]), client.WithHTTPClient(hc))
		if _, err := ac.RunFinish(ctx, f.runs[i].ID, client.RunFinishRequest{Status: clasp.RunSucceeded}); err != nil {
			t.Fatalf("finish setup run: %v", err)
		}
		cfg := &clasp.AdapterConfig{Type: clasp.AdapterProcess, Command: "/bin/sh", Args: []string{"-c", managedAgentScript},
			Env: map[string]string{"GATE": gate}, Heartbeat: clasp.HeartbeatConfig{Enabled: true, MaxConcurrentRuns: 1}}
		if _, err := board.AgentSetAdapter(ctx, a.ID, cfg); err != nil {
			t.Fatalf("set adapter: %v", err)
		}
		w, err := board.AgentWake(ctx, a.ID, client.WakeRequest{IssueID: f.issues[i].ID})
		if err != nil || w.Status != "queued" {
			t.Fatalf("wake agent %d = %+v, %v; want queued", i, w, err)
		}
	}
	// Wait until the four runs' processes run (their pids recorded).
	var running []*clasp.Run
	for {
		p, err := board.RunList(ctx, f.company.ID, client.RunListParams{Statuses: []clasp.RunStatus{clasp.RunRunning}, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		running = running[:0]
		for _, r := range p.Items {
			if r.PID != nil && r.InvocationSource == clasp.InvocationOnDemand {
				running = append(running, r)
			}
		}
		if len(running) == n {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d managed runs running", len(running), n)
		}
		time.Sleep(20 * time.Millisecond)
	}

	srv.Kill()
	dead, live := running[:2], running[2:]
	for _, r := range dead {
		// Each process leads its own group.
		if err := syscall.Kill(-*r.PID, syscall.SIGKILL); err != nil {
			t.Fatalf("kill agent process %d: %v", *r.PID, err)
		}
	}
	for _, r := range dead { // reaped by init once it is gone
		for syscall.Kill(*r.PID, 0) == nil && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, r := range live {
		if err := syscall.Kill(*r.PID, 0); err != nil {
			t.Fatalf("agent process %d of run %s died with the server: %v", *r.PID, r.ID, err)
		}
	}
	if err := srv.Restart(ctx); err != nil {
		t.Fatalf("restart: %v\n%s", err, log.tail(40))
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	// Wait for every run to end.
	var all []*clasp.Run
	for {
		p, err := board.RunList(ctx, f.company.ID, client.RunListParams{Limit: 1000})
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		all = p.Items
		ended := true
		for _, r := range all {
			if r.Status == clasp.RunQueued || r.Status == clasp.RunRunning {
				ended = false
			}
		}
		if ended {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("runs still live: %+v", all)
		}
		time.Sleep(20 * time.Millisecond)
	}
	retries := map[string][]*clasp.Run{}
	byID := map[string]*clasp.Run{}
	for _, r := range all {
		byID[r.ID] = r
		if r.RetryOfRunID != nil {
			retries[*r.RetryOfRunID] = append(retries[*r.RetryOfRunID], r)
		}
	}
	for _, r := range live {
		got := byID[r.ID]
		if got.Status != clasp.RunSucceeded || len(retries[r.ID]) != 0 {
			t.Errorf("live run %s: status %s, %d retries; want re-adopted: succeeded, no retry", r.ID, got.Status, len(retries[r.ID]))
		}
	}
	lost, err := allActivity(ctx, board, f.company.ID, clasp.ActionRunLost)
	if err != nil {
		t.Fatal(err)
	}
	lostRows := map[string]int{}
	for _, a := range lost {
		lostRows[a.EntityID]++
	}
	for _, r := range dead {
		got := byID[r.ID]
		if got.Status != clasp.RunFailed || str(got.ErrorCode) != "process_lost" {
			t.Errorf("dead run %s: status %s, errorCode %q; want failed, process_lost", r.ID, got.Status, str(got.ErrorCode))
		}
		if lostRows[r.ID] != 1 {
			t.Errorf("dead run %s: %d run.lost rows, want 1", r.ID, lostRows[r.ID])
		}
		rs := retries[r.ID]
		if len(rs) != 1 {
			t.Errorf("dead run %s: %d retries, want exactly 1", r.ID, len(rs))
			continue
		}
		if rs[0].Attempt != 2 || rs[0].Status != clasp.RunSucceeded {
			t.Errorf("retry %s of %s: attempt %d, status %s; want 2, succeeded", rs[0].ID, r.ID, rs[0].Attempt, rs[0].Status)
		}
	}
	if len(all) != n+len(dead)+len(f.runs) {
		t.Errorf("%d runs, want %d (setup runs, managed runs and one retry per dead one)", len(all), n+len(dead)+len(f.runs))
	}
	issues, err := allIssues(ctx, board, f.company.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, iss := range issues {
		if iss.CheckoutRunID != nil || iss.ExecutionRunID != nil {
			t.Errorf("issue %s: locks left (checkout %s, execution %s)", iss.Identifier, str(iss.CheckoutRunID), str(iss.ExecutionRunID))
		}
	}
}
