package heartbeat

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/postgres"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
)

// stores runs fn on a fresh SQLite store and, with CLASP_TEST_POSTGRES_URL
// set, on a fresh PostgreSQL schema.
func stores(t *testing.T, fn func(t *testing.T, open func() store.HeartbeatStore)) {
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "clasp.db")
		fn(t, func() store.HeartbeatStore {
			sDrv, err := sqlite.Open(context.Background(), path, sqlite.Options{Synchronous: "NORMAL"})
			if err != nil {
				t.Fatalf("open sqlite: %v", err)
			}
			s := store.New(sDrv)
			t.Cleanup(func() { s.Close() })
			return s
		})
	})
	t.Run("postgres", func(t *testing.T) {
		url := os.Getenv("CLASP_TEST_POSTGRES_URL")
		if url == "" {
			t.Skip("CLASP_TEST_POSTGRES_URL is not set")
		}
		b := make([]byte, 6)
		rand.Read(b)
		schema := "clasp_hb_" + hex.EncodeToString(b)
		t.Cleanup(func() {
			conn, err := pgx.Connect(context.Background(), url)
			if err == nil {
				conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
				conn.Close(context.Background())
			}
		})
		fn(t, func() store.HeartbeatStore {
			sDrv, err := postgres.Open(context.Background(), url, postgres.Options{Schema: schema, MaxConns: 8})
			if err != nil {
				t.Fatalf("open postgres: %v", err)
			}
			s := store.New(sDrv)
			t.Cleanup(func() { s.Close() })
			return s
		})
	})
}

// fixture: a company, an agent with a process adapter running script, an issue.
type fixture struct {
	st    store.HeartbeatStore
	agent *clasp.Agent
	issue *clasp.Issue
	dir   string
}

var board = store.Actor{Type: clasp.ActorBoard}

// agentScript waits for the file release-<runId> in its directory (the
// test's signal to finish), then exits 0; it records its environment. It
// exits 1 once the directory is gone, so that a run a test left running
// (a retry no test releases) does not outlive the test.
const agentScript = `#!/bin/sh
env | grep -E '^(CLASP|PAPERCLIP)_' > "$DIR/env-$CLASP_RUN_ID"
while [ ! -e "$DIR/release-$CLASP_RUN_ID" ]; do [ -d "$DIR" ] || exit 1; sleep 0.05; done
echo "done $CLASP_RUN_ID"
`

func newFixture(t *testing.T, st store.HeartbeatStore, script string, timeoutSec int) *fixture {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	co, err := st.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Acme", IssuePrefix: "ACME", Actor: board})
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	a, err := st.AgentCreate(ctx, &store.AgentCreateParams{CompanyID: co.ID, Name: "alpha", Actor: board})
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	if _, err := st.AgentAdapterSet(ctx, &store.AgentAdapterSetParams{AgentID: a.ID, Actor: board, Config: &clasp.AdapterConfig{
		Type: clasp.AdapterProcess, Command: "/bin/sh", Args: []string{path}, Env: map[string]string{"DIR": dir},
		TimeoutSec: timeoutSec, Heartbeat: clasp.HeartbeatConfig{Enabled: true, MaxConcurrentRuns: 1}}}); err != nil {
		t.Fatalf("setup: %v", err)
	}
	iss, err := st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: "work", Status: clasp.IssueTodo,
		AssigneeAgentID: a.ID, Actor: board})
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	// The fixture's agent processes end with the test: a scheduler that
	// stops as a SIGKILLed server does leaves them running, and one waiting
	// for a file in the removed directory would run forever. Only a group
	// whose leader still runs this fixture's script is killed (a pid may
	// have been reused by then).
	t.Cleanup(func() {
		runs, _, err := st.RunList(context.Background(), &store.RunListParams{CompanyID: co.ID})
		if err != nil {
			return
		}
		for _, r := range runs {
			if r.PID == nil || *r.PID <= 0 {
				continue
			}
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", *r.PID))
			if err == nil && strings.Contains(string(cmdline), path) {
				_ = syscall.Kill(-*r.PID, syscall.SIGKILL)
			}
		}
	})
	return &fixture{st: st, agent: a, issue: iss, dir: dir}
}

func newScheduler(t *testing.T, st store.HeartbeatStore, host string) *Scheduler {
	s := New(st, Config{HostID: host, APIURL: "http://127.0.0.1:1", Interval: 50 * time.Millisecond, LeaseTTL: time.Minute,
		LogDir: filepath.Join(t.TempDir(), "logs"), KillGrace: 300 * time.Millisecond,
		NewRunToken: func() (string, string) { return "clasp_rt_test", fmt.Sprint(time.Now().UnixNano()) }})
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("start scheduler: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// eventually polls cond every 20 ms for up to 30 s (a liveness bound, not
// a timing assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not reached within 30 s", what)
}

func (f *fixture) wake(t *testing.T) *store.WakeResult {
	t.Helper()
	res, err := f.st.Wake(t.Context(), &store.WakeParams{AgentID: f.agent.ID, Reason: clasp.InvocationOnDemand, IssueID: f.issue.ID, Actor: board})
	if err != nil {
		t.Fatalf("wake: %v", err)
	}
	return res
}

func (f *fixture) run(t *testing.T, id string) *clasp.Run {
	t.Helper()
	r, err := f.st.RunGet(t.Context(), id)
	if err != nil {
		t.Fatalf("get run: %v", err)
	}
	return r
}

func (f *fixture) runningWithPID(t *testing.T, id string) *clasp.Run {
	t.Helper()
	var r *clasp.Run
	eventually(t, "run "+id+" running with a pid", func() bool {
		r = f.run(t, id)
		// The agent writes its environment with a shell redirect: the
		// file exists (empty) before env has written it all. The run's
		// variables come last, PAPERCLIP_WAKE_REASON the very last.
		b, err := os.ReadFile(filepath.Join(f.dir, "env-"+id))
		return r.Status == clasp.RunRunning && r.PID != nil && err == nil &&
			strings.Contains(string(b), "PAPERCLIP_WAKE_REASON=") && strings.HasSuffix(string(b), "\n")
	})
	return r
}

// checkoutAs is the agent's checkout in run r (what the agent process would do over HTTP).
func (f *fixture) checkoutAs(t *testing.T, r *clasp.Run, expected ...clasp.IssueStatus) *clasp.Issue {
	t.Helper()
	iss, err := f.st.IssueCheckout(t.Context(), &store.IssueCheckoutParams{Ref: f.issue.ID, AgentID: r.AgentID, ExpectedStatuses: expected,
		Actor: store.Actor{Type: clasp.ActorAgent, AgentID: r.AgentID, CompanyID: r.CompanyID, RunID: r.ID}})
	if err != nil {
		t.Fatalf("checkout by run %s: %v", r.ID, err)
	}
	return iss
}

func (f *fixture) retryOf(t *testing.T, runID string) *clasp.Run {
	t.Helper()
	runs, _, err := f.st.RunList(t.Context(), &store.RunListParams{CompanyID: f.agent.CompanyID})
	if err != nil {
		t.Fatal(err)
	}
	var found *clasp.Run
	n := 0
	for _, r := range runs {
		if r.RetryOfRunID != nil && *r.RetryOfRunID == runID {
			found, n = r, n+1
		}
	}
	if n > 1 {
		t.Fatalf("run %s has %d retries, want at most 1", runID, n)
	}
	return found
}

// An agent process killed with SIGKILL while holding an issue: exactly one
// retry, the execution lock on it, no checkout lock on the dead run; the
// retry finishes the issue. Killed again: no second retry, locks released.
func TestKilledAgentRetriedOnce(t *testing.T) {
	stores(t, func(t *testing.T, open func() store.HeartbeatStore) {
		st := open()
		f := newFixture(t, st, agentScript, 0)
		newScheduler(t, st, "host-a")
		r1 := f.runningWithPID(t, f.wake(t).Run.ID)
		env, _ := os.ReadFile(filepath.Join(f.dir, "env-"+r1.ID))
		for _, want := range []string{"CLASP_RUN_ID=" + r1.ID, "PAPERCLIP_RUN_ID=" + r1.ID, "CLASP_ISSUE_ID=" + f.issue.ID,
			"PAPERCLIP_TASK_ID=" + f.issue.ID, "PAPERCLIP_LINKED_ISSUE_IDS=" + f.issue.ID, "PAPERCLIP_COMPANY_ID=" + f.agent.CompanyID,
			"CLASP_AGENT_ID=" + f.agent.ID, "CLASP_WAKE_REASON=on_demand", "CLASP_API_KEY=clasp_rt_test", "CLASP_COMPANY_ID=" + f.agent.CompanyID} {
			if !containsLine(string(env), want) {
				t.Errorf("agent environment lacks %s:\n%s", want, env)
			}
		}
		f.checkoutAs(t, r1, clasp.IssueTodo)
		if err := syscall.Kill(*r1.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var retry *clasp.Run
		eventually(t, "a retry of the killed run", func() bool { retry = f.retryOf(t, r1.ID); return retry != nil })
		if got := f.run(t, r1.ID); got.Status != clasp.RunFailed || deref(got.ErrorCode) != clasp.RunErrorProcessLost {
			t.Errorf("killed run: got %s/%s, want failed/process_lost", got.Status, deref(got.ErrorCode))
		}
		if retry.Attempt != 2 {
			t.Errorf("retry attempt: got %d, want 2", retry.Attempt)
		}
		iss, _ := st.IssueGet(t.Context(), "", f.issue.ID)
		if deref(iss.CheckoutRunID) == r1.ID || deref(iss.ExecutionRunID) == r1.ID {
			t.Errorf("issue still names the dead run: checkout %q execution %q", deref(iss.CheckoutRunID), deref(iss.ExecutionRunID))
		}
		if deref(iss.ExecutionRunID) != retry.ID || iss.CheckoutRunID != nil {
			t.Errorf("issue locks: execution %q checkout %q, want execution on the retry %s and no checkout (process-loss retry)",
				deref(iss.ExecutionRunID), deref(iss.CheckoutRunID), retry.ID)
		}
		// The retry runs, finishes the issue, exits 0.
		r2 := f.runningWithPID(t, retry.ID)
		f.checkoutAs(t, r2, clasp.IssueTodo)
		done := clasp.IssueDone
		if _, err := st.IssueUpdate(t.Context(), &store.IssueUpdateParams{Ref: f.issue.ID, Status: &done,
			Actor: store.Actor{Type: clasp.ActorAgent, AgentID: r2.AgentID, CompanyID: r2.CompanyID, RunID: r2.ID}}); err != nil {
			t.Fatalf("retry finishes the issue: %v", err)
		}
		os.WriteFile(filepath.Join(f.dir, "release-"+r2.ID), nil, 0o600)
		eventually(t, "retry succeeded", func() bool { return f.run(t, r2.ID).Status == clasp.RunSucceeded })
		if got := f.retryOf(t, r2.ID); got != nil {
			t.Errorf("a retry of a retry: %s", got.ID)
		}
	})
}

// A run woken without an issue checks one out and is killed: its retry's
// issueId is that issue (whose execution lock it received), and the
// retry's process starts with CLASP_ISSUE_ID and PAPERCLIP_TASK_ID naming it.
func TestRetryKnowsItsIssue(t *testing.T) {
	stores(t, func(t *testing.T, open func() store.HeartbeatStore) {
		st := open()
		f := newFixture(t, st, agentScript, 0)
		newScheduler(t, st, "host-a")
		w, err := st.Wake(t.Context(), &store.WakeParams{AgentID: f.agent.ID, Reason: clasp.InvocationOnDemand, Actor: board})
		if err != nil {
			t.Fatalf("wake: %v", err)
		}
		r1 := f.runningWithPID(t, w.Run.ID)
		f.checkoutAs(t, r1, clasp.IssueTodo)
		if err := syscall.Kill(*r1.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		var retry *clasp.Run
		eventually(t, "a retry of the killed run", func() bool { retry = f.retryOf(t, r1.ID); return retry != nil })
		if deref(retry.IssueID) != f.issue.ID {
			t.Fatalf("retry's issueId: got %q, want %s (the issue whose execution lock it received)", deref(retry.IssueID), f.issue.ID)
		}
		r2 := f.runningWithPID(t, retry.ID)
		env, _ := os.ReadFile(filepath.Join(f.dir, "env-"+r2.ID))
		for _, want := range []string{"CLASP_ISSUE_ID=" + f.issue.ID, "PAPERCLIP_TASK_ID=" + f.issue.ID, "CLASP_WAKE_REASON=retry"} {
			if !containsLine(string(env), want) {
				t.Errorf("retry's environment lacks %s:\n%s", want, env)
			}
		}
		os.WriteFile(filepath.Join(f.dir, "release-"+r2.ID), nil, 0o600)
		eventually(t, "retry ended", func() bool { return f.run(t, r2.ID).Status.Terminal() })
	})
}

func TestKilledTwiceNotRetriedAgain(t *testing.T) {
	stores(t, func(t *testing.T, open func() store.HeartbeatStore) {
		st := open()
		f := newFixture(t, st, agentScript, 0)
		newScheduler(t, st, "host-a")
		r1 := f.runningWithPID(t, f.wake(t).Run.ID)
		f.checkoutAs(t, r1, clasp.IssueTodo)
		syscall.Kill(*r1.PID, syscall.SIGKILL)
		var retry *clasp.Run
		eventually(t, "a retry", func() bool { retry = f.retryOf(t, r1.ID); return retry != nil })
		r2 := f.runningWithPID(t, retry.ID)
		f.checkoutAs(t, r2, clasp.IssueTodo)
		syscall.Kill(*r2.PID, syscall.SIGKILL)
		eventually(t, "the retry lost", func() bool { return f.run(t, r2.ID).Status == clasp.RunFailed })
		if got := f.run(t, r2.ID); deref(got.ErrorCode) != clasp.RunErrorProcessLost {
			t.Errorf("second loss: errorCode %q, want process_lost", deref(got.ErrorCode))
		}
		if got := f.retryOf(t, r2.ID); got != nil {
			t.Errorf("second loss retried: %s", got.ID)
		}
		iss, _ := st.IssueGet(t.Context(), "", f.issue.ID)
		if iss.CheckoutRunID != nil || iss.ExecutionRunID != nil {
			t.Errorf("locks after second loss: checkout %q execution %q, want none", deref(iss.CheckoutRunID), deref(iss.ExecutionRunID))
		}
	})
}

// A process (and a child of it) that ignores SIGTERM and outlives
// timeoutSec: timed_out, and its whole process group is gone.
func TestTimeoutKillsGroup(t *testing.T) {
	stores(t, func(t *testing.T, open func() store.HeartbeatStore) {
		st := open()
		f := newFixture(t, st, `#!/bin/sh
trap '' TERM
env > "$DIR/env-$CLASP_RUN_ID"
sh -c "trap '' TERM; sleep 1000" &
sleep 1000
`, 1)
		newScheduler(t, st, "host-a")
		r := f.runningWithPID(t, f.wake(t).Run.ID)
		eventually(t, "run timed out", func() bool { return f.run(t, r.ID).Status == clasp.RunTimedOut })
		eventually(t, "process group gone", func() bool { return !groupAlive(*r.PID) })
	})
}

// The server stops abruptly while a run's process keeps running and
// another run's process dies: a new scheduler on the same host re-adopts
// the live one and recovers the dead one once.
func TestRestartReadoptsLiveRecoversDead(t *testing.T) {
	stores(t, func(t *testing.T, open func() store.HeartbeatStore) {
		st := open()
		f := newFixture(t, st, agentScript, 0)
		// a second agent with its own issue
		ctx := t.Context()
		b, _ := st.AgentCreate(ctx, &store.AgentCreateParams{CompanyID: f.agent.CompanyID, Name: "beta", Actor: board})
		cfg, _ := st.AgentAdapterGet(ctx, f.agent.ID)
		st.AgentAdapterSet(ctx, &store.AgentAdapterSetParams{AgentID: b.ID, Config: cfg, Actor: board})
		iss2, _ := st.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: f.agent.CompanyID, Title: "two", Status: clasp.IssueTodo, Actor: board})

		s1 := New(st, Config{HostID: "host-a", Interval: 50 * time.Millisecond, LogDir: t.TempDir(), KillGrace: 300 * time.Millisecond})
		if err := s1.Start(ctx); err != nil {
			t.Fatal(err)
		}
		live := f.runningWithPID(t, f.wake(t).Run.ID)
		w2, err := st.Wake(ctx, &store.WakeParams{AgentID: b.ID, Reason: clasp.InvocationOnDemand, IssueID: iss2.ID, Actor: board})
		if err != nil {
			t.Fatal(err)
		}
		dead := f.runningWithPID(t, w2.Run.ID)
		s1.Stop() // as a SIGKILLed server: nothing ends the runs
		syscall.Kill(*dead.PID, syscall.SIGKILL)
		eventually(t, "dead process gone", func() bool { return !Alive(*dead.PID, procStartOf(t, *dead.PID, live)) })

		// The same log directory, as a restarted server's: the exit status
		// of a re-adopted process is recorded there.
		s2 := New(st, Config{HostID: "host-a", Interval: 50 * time.Millisecond, LogDir: s1.LogDir(), KillGrace: 300 * time.Millisecond})
		if err := s2.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s2.Stop)
		eventually(t, "dead run recovered", func() bool { return f.run(t, dead.ID).Status == clasp.RunFailed })
		if got := f.run(t, live.ID); got.Status != clasp.RunRunning {
			t.Fatalf("live run after restart: got %s, want running (re-adopted)", got.Status)
		}
		var retry *clasp.Run
		eventually(t, "one retry of the dead run", func() bool { retry = f.retryOf(t, dead.ID); return retry != nil })
		if f.retryOf(t, live.ID) != nil {
			t.Errorf("the live run was retried")
		}
		// The re-adopted process exits 0: its run succeeded (the exit status
		// its shim recorded), with no retry.
		os.WriteFile(filepath.Join(f.dir, "release-"+live.ID), nil, 0o600)
		eventually(t, "re-adopted run ended", func() bool { return f.run(t, live.ID).Status != clasp.RunRunning })
		if got := f.run(t, live.ID); got.Status != clasp.RunSucceeded || got.ExitCode == nil || *got.ExitCode != 0 {
			t.Errorf("re-adopted run that exited 0: %s exit %v %q, want succeeded exit 0", got.Status, got.ExitCode, deref(got.Error))
		}
		if f.retryOf(t, live.ID) != nil {
			t.Errorf("the re-adopted run was retried")
		}
	})
}

func procStartOf(t *testing.T, pid int, _ *clasp.Run) int64 {
	v, _ := ProcStart(pid)
	return max(v, 1)
}

func containsLine(s, line string) bool {
	for _, l := range splitLines(s) {
		if l == line {
			return true
		}
	}
	return false
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func deref[T any](p *T) T {
	var z T
	if p == nil {
		return z
	}
	return *p
}

// A run whose process cannot be started (its cwd vanished after the
// adapter was set) ends failed with errorCode spawn_failed, and releases
// the issue's execution lock.
func TestSpawnFailedErrorCode(t *testing.T) {
	stores(t, func(t *testing.T, open func() store.HeartbeatStore) {
		st := open()
		f := newFixture(t, st, "#!/bin/sh\nexit 0\n", 0)
		wd := filepath.Join(f.dir, "wd")
		if err := os.Mkdir(wd, 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AgentAdapterSet(t.Context(), &store.AgentAdapterSetParams{AgentID: f.agent.ID, Actor: board, Config: &clasp.AdapterConfig{
			Type: clasp.AdapterProcess, Command: "/bin/sh", Args: []string{"-c", "exit 0"}, Cwd: wd,
			Heartbeat: clasp.HeartbeatConfig{Enabled: true, MaxConcurrentRuns: 1}}}); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(wd); err != nil {
			t.Fatal(err)
		}
		newScheduler(t, st, "host-a")
		id := f.wake(t).Run.ID
		eventually(t, "run failed", func() bool { return f.run(t, id).Status == clasp.RunFailed })
		r := f.run(t, id)
		if deref(r.ErrorCode) != clasp.RunErrorSpawnFailed {
			t.Errorf("errorCode = %q, want %q (error %q)", deref(r.ErrorCode), clasp.RunErrorSpawnFailed, deref(r.Error))
		}
		iss, err := st.IssueGet(t.Context(), f.issue.CompanyID, f.issue.ID)
		if err != nil {
			t.Fatal(err)
		}
		if iss.ExecutionRunID != nil || iss.CheckoutRunID != nil {
			t.Errorf("locks left after the failed spawn: execution %v, checkout %v", deref(iss.ExecutionRunID), deref(iss.CheckoutRunID))
		}
	})
}

// A run whose process exits with an error ends failed with the last lines
// of its log in its error (what an escalation's comment quotes, RULES.md
// E3); older lines are left out.
func TestFailedRunErrorEndsWithLogTail(t *testing.T) {
	stores(t, func(t *testing.T, open func() store.HeartbeatStore) {
		st := open()
		f := newFixture(t, st, "#!/bin/sh\nfor i in 1 2 3 4 5 6 7 8; do echo \"step $i\"; done\necho 'panic: cannot reach the build cache' >&2\nexit 3\n", 0)
		newScheduler(t, st, "host-a")
		id := f.wake(t).Run.ID
		eventually(t, "run failed", func() bool { return f.run(t, id).Status == clasp.RunFailed })
		e := deref(f.run(t, id).Error)
		if !strings.HasPrefix(e, "the process exited with 3; its log ends: ") || !strings.Contains(e, "panic: cannot reach the build cache") ||
			!strings.Contains(e, "step 8") || strings.Contains(e, "step 1 ") || strings.Contains(e, "step 1 |") {
			t.Errorf("error %q: want the exit code and the log's last lines (step 5-8 and the panic), not its first", e)
		}
	})
}
