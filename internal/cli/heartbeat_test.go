package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// Server-managed agents through the command line against a real server (Serve,
// with its heartbeat scheduler): set-adapter, wake, run log --follow, run
// cancel.

// mustCLIJSON runs a command that must succeed and decodes its --json output.
func mustCLIJSON(t *testing.T, env map[string]string, out any, args ...string) {
	t.Helper()
	r := runCLI(t, env, "", append(args, "--json")...)
	if r.code != 0 {
		t.Fatalf("clasp %v: exit %d, stderr %q", args, r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), out); err != nil {
		t.Fatalf("clasp %v: output %q: %v", args, r.stdout, err)
	}
}

// waitRun polls the run (real time, generous bound: not a timing
// assertion) until its status is terminal.
func waitRun(t *testing.T, env map[string]string, runID string) *clasp.Run {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var r clasp.Run
		mustCLIJSON(t, env, &r, "run", "show", runID)
		if r.Status.Terminal() {
			return &r
		}
	}
	t.Fatalf("run %s did not end", runID)
	return nil
}

func TestManagedAgentCommands(t *testing.T) {
	t.Parallel()
	info, _, _ := startServer(t, t.TempDir())
	board := map[string]string{EnvURL: info.URL, EnvToken: info.BoardToken}
	var co clasp.Company
	mustCLIJSON(t, board, &co, "company", "create", "Managed", "--prefix", "MGD")
	var ag clasp.Agent
	mustCLIJSON(t, board, &ag, "agent", "create", "worker", "--company", co.ID)

	dir := t.TempDir()
	script := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"hello from $CLASP_RUN_ID ($CLASP_WAKE_REASON) $GREETING\"\necho to-stderr >&2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var got client.AgentWithAdapter
	mustCLIJSON(t, board, &got, "agent", "set-adapter", ag.ID, "--command", "/bin/sh", "--arg", script, "--cwd", dir,
		"--env", "GREETING=hi", "--timeout", "60s", "--heartbeat-interval", "0s", "--max-concurrent", "2")
	want := clasp.AdapterConfig{Type: "process", Command: "/bin/sh", Args: []string{script}, Cwd: dir, Env: map[string]string{"GREETING": "hi"},
		TimeoutSec: 60, Heartbeat: clasp.HeartbeatConfig{Enabled: true, MaxConcurrentRuns: 2}}
	if got.Adapter == nil || got.Adapter.Command != want.Command || got.Adapter.Cwd != dir || got.Adapter.Env["GREETING"] != "hi" ||
		got.Adapter.TimeoutSec != 60 || got.Adapter.Heartbeat != want.Heartbeat {
		t.Fatalf("set-adapter answered %+v, want %+v", got.Adapter, want)
	}
	var shown client.AgentWithAdapter
	mustCLIJSON(t, board, &shown, "agent", "show", ag.ID)
	if shown.ID != ag.ID || shown.Adapter == nil || shown.Adapter.Command != "/bin/sh" {
		t.Errorf("agent show --json answered id %q adapter %+v, want the adapter just set", shown.ID, shown.Adapter)
	}
	if r := runCLI(t, board, "", "agent", "show", ag.ID); !strings.Contains(r.stdout, "process: /bin/sh "+script) {
		t.Errorf("agent show: stdout %q, want the adapter line", r.stdout)
	}
	if r := runCLI(t, board, "", "agent", "set-adapter", ag.ID, "--command", "x", "--timeout", "1.5s"); r.code != ExitUsage {
		t.Errorf("fractional --timeout: exit %d, want %d", r.code, ExitUsage)
	}
	if r := runCLI(t, board, "", "agent", "set-adapter", ag.ID, "--clear", "--command", "x"); r.code != ExitUsage {
		t.Errorf("--clear with --command: exit %d, want %d", r.code, ExitUsage)
	}

	var w client.Wake
	mustCLIJSON(t, board, &w, "agent", "wake", ag.ID, "--idempotency-key", "cli-1")
	if w.Status != "queued" || w.RunID == nil {
		t.Fatalf("wake: %+v", w)
	}
	var again client.Wake
	mustCLIJSON(t, board, &again, "agent", "wake", ag.ID, "--idempotency-key", "cli-1")
	if !again.Replayed || again.RunID == nil || *again.RunID != *w.RunID {
		t.Errorf("wake with the same key: %+v", again)
	}

	// --follow prints the whole log once the run has ended.
	lr := runCLI(t, board, "", "run", "log", *w.RunID, "--follow")
	if lr.code != 0 || !strings.Contains(lr.stdout, "hello from "+*w.RunID+" (on_demand) hi") || !strings.Contains(lr.stdout, "to-stderr") {
		t.Errorf("run log --follow: exit %d, stdout %q, stderr %q", lr.code, lr.stdout, lr.stderr)
	}
	if r := waitRun(t, board, *w.RunID); r.Status != clasp.RunSucceeded {
		t.Errorf("run ended %s, want succeeded", r.Status)
	}
	if r := runCLI(t, board, "", "run", "cancel", *w.RunID); r.code != ExitConflict {
		t.Errorf("cancel of an ended run: exit %d, want %d; stderr %q", r.code, ExitConflict, r.stderr)
	}

	// A long process is cancelled: its group is stopped and the run ends cancelled.
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho started\nexec sleep 300\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustCLIJSON(t, board, &w, "agent", "wake", ag.ID)
	if w.RunID == nil {
		t.Fatalf("wake: %+v", w)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := runCLI(t, board, "", "run", "log", *w.RunID)
		if r.code == 0 && strings.Contains(r.stdout, "started") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the long run never started: %q %q", r.stdout, r.stderr)
		}
	}
	if r := runCLI(t, board, "", "run", "cancel", *w.RunID); r.code != 0 {
		t.Fatalf("run cancel: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := waitRun(t, board, *w.RunID); r.Status != clasp.RunCancelled {
		t.Errorf("cancelled run ended %s", r.Status)
	}

	var cleared client.AgentWithAdapter
	mustCLIJSON(t, board, &cleared, "agent", "set-adapter", ag.ID, "--clear")
	if cleared.Adapter != nil {
		t.Errorf("--clear left %+v", cleared.Adapter)
	}
	// Nothing will run: exit 1, with the answer (and its reason) printed.
	r := runCLI(t, board, "", "agent", "wake", ag.ID, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &w); err != nil || r.code != ExitError || w.Status != "skipped" || w.SkipReason != "no_adapter" {
		t.Errorf("wake without adapter: exit %d, %+v (%v)", r.code, w, err)
	}
}

// TestShellExampleManagedAgent runs examples/shell-agent/agent.sh (and the
// Go example, built here) as server-managed agents end to end: set-adapter,
// wake with an issue, the run succeeds and the issue is done with the
// agent's comment.
func TestShellExampleManagedAgent(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the shell example needs %s: %v", tool, err)
		}
	}
	shell, err := filepath.Abs("../../examples/shell-agent/agent.sh")
	if err != nil {
		t.Fatal(err)
	}
	info, _, _ := startServer(t, t.TempDir())
	board := map[string]string{EnvURL: info.URL, EnvToken: info.BoardToken}
	ctx := context.Background()
	bc := client.New(info.URL, client.WithToken(info.BoardToken))
	co, err := bc.CompanyCreate(ctx, client.CompanyCreateRequest{Name: "Examples", IssuePrefix: "EXA"})
	if err != nil {
		t.Fatal(err)
	}

	type example struct {
		name    string
		command []string
	}
	examples := []example{{"shell", []string{"--command", "/bin/sh", "--arg", shell}}}
	if goTool, err := exec.LookPath("go"); err == nil {
		bin := filepath.Join(t.TempDir(), "goagent")
		if out, err := exec.Command(goTool, "build", "-o", bin, "../../examples/goagent").CombinedOutput(); err != nil {
			t.Fatalf("build the Go example: %v\n%s", err, out)
		}
		examples = append(examples, example{"go", []string{"--command", bin}})
	}
	for _, ex := range examples {
		ag, err := bc.AgentCreate(ctx, co.ID, client.AgentCreateRequest{Name: ex.name + "-agent"})
		if err != nil {
			t.Fatal(err)
		}
		todo := clasp.IssueTodo
		iss, err := bc.IssueCreate(ctx, co.ID, client.IssueCreateRequest{Title: "Work for the " + ex.name + " example", Status: todo, AssigneeAgentID: ag.ID})
		if err != nil {
			t.Fatal(err)
		}
		var got client.AgentWithAdapter
		mustCLIJSON(t, board, &got, append([]string{"agent", "set-adapter", ag.ID, "--timeout", "60s"}, ex.command...)...)
		var w client.Wake
		mustCLIJSON(t, board, &w, "agent", "wake", ag.ID, "--issue", iss.Identifier)
		if w.Status != "queued" || w.RunID == nil {
			t.Fatalf("%s: wake: %+v", ex.name, w)
		}
		run := waitRun(t, board, *w.RunID)
		logOut := runCLI(t, board, "", "run", "log", run.ID).stdout
		if run.Status != clasp.RunSucceeded {
			t.Fatalf("%s: run %s (%v), log:\n%s", ex.name, run.Status, run.Error, logOut)
		}
		done, err := bc.IssueGet(ctx, iss.ID)
		if err != nil {
			t.Fatal(err)
		}
		if done.Status != clasp.IssueDone || done.CheckoutRunID != nil || done.ExecutionRunID != nil {
			t.Errorf("%s: issue %s, checkout %v, execution %v; log:\n%s", ex.name, done.Status, done.CheckoutRunID, done.ExecutionRunID, logOut)
		}
		comments, err := bc.CommentList(ctx, iss.ID, client.CommentListParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(comments) != 1 || comments[0].RunID == nil || *comments[0].RunID != run.ID {
			t.Errorf("%s: comments %+v, want one from run %s", ex.name, comments, run.ID)
		}
		if !strings.Contains(logOut, "working on "+iss.Identifier) {
			t.Errorf("%s: log lacks the work line:\n%s", ex.name, logOut)
		}
	}
}

// TestSetAdapterHelpTrue: the help of agent set-adapter says what the
// server accepts (clasp.AdapterConfig.Normalize): every --command and
// --cwd of its examples is a config the server takes, the flags say the
// command is an absolute path with no PATH lookup, and --cwd's default
// is the run's own directory under the data directory.
func TestSetAdapterHelpTrue(t *testing.T) {
	t.Parallel()
	r := runCLI(t, nil, "", "agent", "set-adapter", "--help")
	if r.code != ExitOK {
		t.Fatalf("set-adapter --help: exit %d, stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{"absolute path of the program", "no PATH lookup", "<data-dir>/runs/<runId>"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("set-adapter --help does not say %q:\n%s", want, r.stdout)
		}
	}
	for _, wrong := range []string{"looked up in the server's PATH", "default: the server's"} {
		if strings.Contains(r.stdout, wrong) {
			t.Errorf("set-adapter --help still says %q, which the server does not do", wrong)
		}
	}
	examples := 0
	for _, line := range strings.Split(r.stdout, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "clasp agent set-adapter <agent-id> ") {
			continue // not an example
		}
		f := strings.Fields(line)
		cfg := clasp.AdapterConfig{Type: clasp.AdapterProcess}
		for i := 0; i+1 < len(f); i++ {
			switch f[i] {
			case "--command":
				cfg.Command = f[i+1]
			case "--cwd":
				cfg.Cwd = f[i+1]
			}
		}
		if cfg.Command == "" {
			continue
		}
		examples++
		if err := cfg.Normalize(); err != nil {
			t.Errorf("set-adapter example %q: the server refuses it: %v", strings.TrimSpace(line), err)
		}
	}
	if examples == 0 {
		t.Errorf("set-adapter --help shows no example with --command:\n%s", r.stdout)
	}
}
