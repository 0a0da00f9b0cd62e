package swarm_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
	"github.com/clasp-dev/clasp/internal/cli"
	"github.com/clasp-dev/clasp/internal/httpapi"
	"github.com/clasp-dev/clasp/internal/swarm"
)

// agentFixture is a company with one agent and one todo issue per name,
// each naming a file "content of <name>".
type agentFixture struct {
	board    *client.Client
	company  *clasp.Company
	key      string            // the agent's API key
	expected map[string]string // issue id -> sha256
	byIdent  map[string]string // identifier -> sha256
}

func newAgentFixture(t *testing.T, board *client.Client, prefix string, names ...string) *agentFixture {
	t.Helper()
	ctx := t.Context()
	co, err := board.CompanyCreate(ctx, client.CompanyCreateRequest{Name: prefix, IssuePrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := board.AgentCreate(ctx, co.ID, client.AgentCreateRequest{Name: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	key, err := board.AgentKeyCreate(ctx, ag.ID)
	if err != nil {
		t.Fatal(err)
	}
	f := &agentFixture{board: board, company: co, key: key.Token, expected: map[string]string{}, byIdent: map[string]string{}}
	dir := t.TempDir()
	for _, name := range names {
		abs := filepath.Join(dir, name)
		if err := os.WriteFile(abs, []byte("content of "+name), 0o644); err != nil {
			t.Fatal(err)
		}
		iss, err := board.IssueCreate(ctx, co.ID, client.IssueCreateRequest{Title: name, Description: abs, Status: clasp.IssueTodo})
		if err != nil {
			t.Fatal(err)
		}
		f.expected[iss.ID] = sum([]byte("content of " + name))
		f.byIdent[iss.Identifier] = f.expected[iss.ID]
	}
	return f
}

// startAgent starts `clasp agent work` with the fixture's key and extra
// args, and returns it with a channel of its event lines (closed at EOF).
func (f *agentFixture) startAgent(t *testing.T, args ...string) (*exec.Cmd, <-chan swarm.Event) {
	t.Helper()
	cmd := exec.Command(claspBin, append([]string{"agent", "work"}, args...)...)
	cmd.Env = append(os.Environ(), "CLASP_URL="+f.board.BaseURL(), "CLASP_TOKEN="+f.key)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	events := make(chan swarm.Event)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			ev, ok := swarm.ParseEvent(sc.Text())
			if !ok {
				t.Errorf("not an event line: %q", sc.Text())
				continue
			}
			events <- ev
		}
	}()
	return cmd, events
}

func eventNames(evs []swarm.Event) []string {
	var names []string
	for _, ev := range evs {
		names = append(names, ev.Name)
	}
	return names
}

// TestAgentWorkSIGTERM runs `clasp agent work` as a real process, sends it
// SIGTERM in the middle of its first issue, and checks that it completes
// that issue (result and status done), finishes its run, takes no other
// issue and exits 0.
func TestAgentWorkSIGTERM(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newAgentFixture(t, startServer(t, time.Minute, time.Hour), "TERM", "a", "b", "c")

	// --slow 1s: the work on the first issue lasts at least a second, so
	// the SIGTERM sent on its checked_out line lands during it.
	cmd, events := f.startAgent(t, "--slow", "1s")
	var evs []swarm.Event
	for ev := range events {
		evs = append(evs, ev)
		if ev.Name == swarm.EventCheckedOut {
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agent work: %v (events %v)", err, evs)
	}

	want := []string{swarm.EventStarted, swarm.EventRunOpened, swarm.EventCheckedOut, swarm.EventDone, swarm.EventRunClosed, swarm.EventExit}
	if diff := cmp.Diff(want, eventNames(evs)); diff != "" {
		t.Fatalf("events (-want +got):\n%s\n%v", diff, evs)
	}
	done := evs[3]
	issue := done.Fields["issue"]
	if got := done.Fields["sha256"]; got != f.byIdent[issue] {
		t.Errorf("done %s with sha256 %s, want %s", issue, got, f.byIdent[issue])
	}
	if got := evs[4].Fields["status"]; got != string(clasp.RunSucceeded) {
		t.Errorf("run closed %s, want succeeded", got)
	}
	if got := evs[5].Fields["reason"]; got != "signal" {
		t.Errorf("exit reason %q, want signal", got)
	}

	iss, err := f.board.IssueGet(ctx, issue)
	if err != nil {
		t.Fatal(err)
	}
	if iss.Status != clasp.IssueDone || iss.CheckoutRunID != nil {
		t.Errorf("issue %s: status %s, lock %v; want done, no lock", issue, iss.Status, iss.CheckoutRunID)
	}
	run, err := f.board.RunGet(ctx, done.Fields["run"])
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != clasp.RunSucceeded {
		t.Errorf("run %s is %s, want succeeded", run.ID, run.Status)
	}
	page, err := f.board.IssueList(ctx, f.company.ID, client.IssueListParams{Statuses: []clasp.IssueStatus{clasp.IssueTodo}})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 2 {
		t.Errorf("%d todo issues left, want 2 (no new issue after SIGTERM)", len(page.Items))
	}
}

// TestAgentWorkStalled stops `clasp agent work` (SIGSTOP) in the middle of
// its issue until the sweeper has failed its run, then lets it go on: the
// process must drop the work (its run is gone, its lock with it), adopt the
// issue again in a new run (rule L1/S08, it is still assigned to it), and
// leave a state that passes every check, with one result comment.
func TestAgentWorkStalled(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newAgentFixture(t, startServer(t, time.Second, 100*time.Millisecond), "STALL", "only")

	cmd, events := f.startAgent(t, "--slow", "3s")
	var evs []swarm.Event
	stalled := false
	for ev := range events {
		evs = append(evs, ev)
		if ev.Name != swarm.EventCheckedOut || stalled {
			continue
		}
		stalled = true
		if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		waitRunEnded(ctx, t, f.board, ev.Fields["run"])
		if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agent work: %v (events %v)", err, evs)
	}

	var checkouts, dropped, done []swarm.Event
	for _, ev := range evs {
		switch ev.Name {
		case swarm.EventCheckedOut:
			checkouts = append(checkouts, ev)
		case swarm.EventRunLost, swarm.EventLockLost:
			dropped = append(dropped, ev)
		case swarm.EventDone:
			done = append(done, ev)
		}
	}
	if len(checkouts) != 2 || len(dropped) != 1 || len(done) != 1 {
		t.Fatalf("events %v: want 2 checkouts, 1 run_lost or lock_lost, 1 done", evs)
	}
	if got := checkouts[1].Fields; got["from"] != "claim" || got["epoch"] != "2" {
		t.Errorf("second checkout %v, want from claim (the adoption, L1) with epoch 2", got)
	}
	if dropped[0].Fields["run"] != checkouts[0].Fields["run"] || done[0].Fields["run"] != checkouts[1].Fields["run"] {
		t.Errorf("the stalled run must drop the work and the new run finish it: %v", evs)
	}

	tally, vs := swarm.Check(ctx, f.board, f.company.ID, f.expected)
	for _, v := range vs {
		t.Errorf("violation: %s", v)
	}
	if tally.RunsLost != 1 || tally.CheckedOut != 2 || tally.Adoptions+tally.StaleLocksCleared != 1 {
		t.Errorf("tally %+v: want 1 run lost, 2 checkouts, 1 adoption or stale lock cleared", tally)
	}
}

// waitRunEnded polls the run until it is terminal (the sweeper failed it).
func waitRunEnded(ctx context.Context, t *testing.T, board *client.Client, runID string) {
	t.Helper()
	for {
		r, err := board.RunGet(ctx, runID)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status.Terminal() {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestAgentWorkFailedWork runs `clasp agent work` (and `--mcp`) on a
// backlog where one issue's description names no readable file. That issue
// must never be marked done: it ends blocked, unlocked and still assigned,
// with one comment saying why and no result comment, checked out once (no
// claim takes it again); its run ends failed (the MCP session's run is the
// session's); the other issues are done; the exit event says work_failed
// and the process exits 1.
func TestAgentWorkFailedWork(t *testing.T) {
	t.Parallel()
	srv := startServer(t, time.Minute, time.Hour)
	for _, mode := range []string{"api", "mcp"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			f := newAgentFixture(t, srv, "FAIL"+strings.ToUpper(mode), "a", "b")
			bad, err := f.board.IssueCreate(ctx, f.company.ID, client.IssueCreateRequest{Title: "Fix the build", Description: "/nonexistent/file", Status: clasp.IssueTodo})
			if err != nil {
				t.Fatal(err)
			}
			var args []string
			if mode == "mcp" {
				args = append(args, "--mcp")
			}
			cmd, events := f.startAgent(t, args...)
			var evs []swarm.Event
			for ev := range events {
				evs = append(evs, ev)
			}
			err = cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); code != 1 {
				t.Errorf("agent work exited %d (%v), want 1: some work failed (events %v)", code, err, evs)
			}

			var blocked, done []swarm.Event
			checkouts := map[string]int{}
			for _, ev := range evs {
				switch ev.Name {
				case swarm.EventBlocked:
					blocked = append(blocked, ev)
				case swarm.EventDone:
					done = append(done, ev)
				case swarm.EventCheckedOut:
					checkouts[ev.Fields["issue"]]++
				}
			}
			if len(blocked) != 1 || blocked[0].Fields["issue"] != bad.Identifier || len(done) != 2 {
				t.Fatalf("events %v: want 1 blocked (%s) and 2 done", evs, bad.Identifier)
			}
			if n := checkouts[bad.Identifier]; n != 1 {
				t.Errorf("%s checked out %d times, want once", bad.Identifier, n)
			}
			if last := evs[len(evs)-1]; last.Name != swarm.EventExit || last.Fields["reason"] != "work_failed" || last.Fields["blocked"] != "1" {
				t.Errorf("last event %v, want exit reason=work_failed blocked=1", last)
			}

			iss, err := f.board.IssueGet(ctx, bad.ID)
			if err != nil {
				t.Fatal(err)
			}
			if iss.Status != clasp.IssueBlocked || iss.CheckoutRunID != nil || iss.ExecutionRunID != nil || iss.AssigneeAgentID == nil {
				t.Errorf("%s: status %s, locks %v/%v, assignee %v; want blocked, no lock, assigned", bad.Identifier, iss.Status, iss.CheckoutRunID, iss.ExecutionRunID, iss.AssigneeAgentID)
			}
			cs, err := f.board.CommentList(ctx, bad.ID, client.CommentListParams{})
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) != 1 || !strings.HasPrefix(cs[0].Body, swarm.FailurePrefix) || !strings.Contains(cs[0].Body, "/nonexistent/file") {
				t.Fatalf("comments on %s: %v, want one %q comment naming the file", bad.Identifier, cs, swarm.FailurePrefix)
			}
			if mode == "api" {
				run, err := f.board.RunGet(ctx, blocked[0].Fields["run"])
				if err != nil {
					t.Fatal(err)
				}
				if run.Status != clasp.RunFailed || run.Error == nil || !strings.Contains(*run.Error, bad.Identifier) {
					t.Errorf("run of the failed work: %s, error %v; want failed naming %s", run.Status, run.Error, bad.Identifier)
				}
			}

			// The rest passes the swarm's checks; the blocked issue is
			// reported, as not done and without a result.
			delete(f.expected, bad.ID)
			_, vs := swarm.Check(ctx, f.board, f.company.ID, f.expected)
			var got []string
			for _, v := range vs {
				got = append(got, v.Issue+" "+v.Check)
			}
			want := []string{bad.Identifier + " " + swarm.CheckUnexpected, bad.Identifier + " " + swarm.CheckNotDone,
				bad.Identifier + " " + swarm.CheckResultCount, bad.Identifier + " " + swarm.CheckDoneCount}
			if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAgentWorkWaitsAtLiveRunLimit: an agent at its live-run limit
// (serve --max-live-runs-per-agent) because a killed process's run still
// holds its place is answered 429 with Retry-After when it opens a run;
// `clasp agent work` waits as told until that run's lease runs out, then
// works its issue and exits 0, instead of failing at the first 429.
func TestAgentWorkWaitsAtLiveRunLimit(t *testing.T) {
	t.Parallel()
	board := startServerWith(t, cli.ServeConfig{LeaseTTL: 2 * time.Second, SweepInterval: 200 * time.Millisecond,
		Net: cli.NetConfig{Limits: httpapi.Limits{LiveRunsPerAgent: 1}}})
	f := newAgentFixture(t, board, "LIVE", "only")
	// The run of a process that died: it keeps the agent's one place
	// until its lease runs out.
	agent := client.New(board.BaseURL(), client.WithToken(f.key))
	if _, err := agent.RunOpen(t.Context(), client.RunOpenRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err := agent.RunOpen(t.Context(), client.RunOpenRequest{})
	if clasp.ErrorCode(err) != clasp.CodeRateLimited {
		t.Fatalf("a second open at the limit: %v, want 429 rate_limited", err)
	}
	cmd, events := f.startAgent(t)
	var evs []swarm.Event
	for ev := range events {
		evs = append(evs, ev)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("agent work at its live-run limit: %v (events %v)", err, evs)
	}
	page, err := board.IssueList(t.Context(), f.company.ID, client.IssueListParams{})
	if err != nil || len(page.Items) != 1 || page.Items[0].Status != clasp.IssueDone {
		t.Fatalf("issues after the agent's work: %+v, %v; want the one issue done", page, err)
	}
}
