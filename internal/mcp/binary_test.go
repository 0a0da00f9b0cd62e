package mcp_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TestMain runs the tests, then removes the binary claspBinary built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath)) // best effort: a temporary directory
	}
	os.Exit(code)
}

// claspBinary builds cmd/clasp once per test binary and returns its path.
func claspBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the clasp binary; skipped with -short")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "clasp-mcp-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "clasp")
		out, err := exec.Command("go", "build", "-o", binPath, "../../cmd/clasp").CombinedOutput()
		if err != nil {
			buildErr = &buildError{err: err, out: string(out)}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + e.out }

// mcpProcess is a `clasp mcp` process and the MCP client session on its
// stdio (the SDK's command transport).
type mcpProcess struct {
	cmd    *exec.Cmd
	cs     *sdk.ClientSession
	stderr *bytes.Buffer
}

func startMCP(t *testing.T, env ...string) *mcpProcess {
	t.Helper()
	cmd := exec.Command(claspBinary(t), "mcp")
	cmd.Env = append(os.Environ(), env...)
	p := &mcpProcess{cmd: cmd, stderr: &bytes.Buffer{}}
	cmd.Stderr = p.stderr
	start := time.Now()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "binary-test", Version: "1"}, nil).
		Connect(context.Background(), &sdk.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	if err != nil {
		t.Fatalf("start clasp mcp: %v\n%s", err, p.stderr)
	}
	t.Logf("clasp mcp answered initialize %v after start", time.Since(start).Round(time.Millisecond))
	p.cs = cs
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cs.Close() })
	return p
}

// TestBinaryStdio drives the real `clasp mcp` binary over stdio: start, list
// tools, claim, work, done; stdin EOF finishes its run succeeded; SIGTERM
// finishes it cancelled and releases the issue; SIGKILL leaves the lock to
// the lease and the sweeper.
func TestBinaryStdio(t *testing.T) {
	w := newWorld(t, "", 2*time.Second, 3)
	env := []string{"CLASP_URL=" + w.url, "CLASP_API_KEY=" + w.keys[0], "CLASP_RUN_ID=", "CLASP_RUN_TOKEN=", "CLASP_API_KEY_FILE="}
	ctx := context.Background()

	// Start, list, claim, done, EOF.
	p := startMCP(t, env...)
	tools, err := p.cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 9 {
		t.Fatalf("tools/list: %v, %d tools", err, len(tools.Tools))
	}
	c := call(t, p.cs, "claim_next_issue", nil)
	if c.IsError || c.str("outcome") != "claimed" {
		t.Fatalf("claim: %+v", c.S)
	}
	ident, runID := c.str("issue", "identifier"), c.str("runId")
	d := call(t, p.cs, "update_issue_status", map[string]any{"issue": ident, "status": "done", "comment": "ok"})
	if d.IsError {
		t.Fatalf("done: %+v", d.S)
	}
	held := call(t, p.cs, "claim_next_issue", nil) // held when stdin closes: released by the finish
	if err := p.cs.Close(); err != nil {           // closes stdin, waits for the exit
		t.Fatalf("close: %v\n%s", err, p.stderr)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after stdin EOF\n%s", code, p.stderr)
	}
	r, err := w.board.RunGet(ctx, runID)
	if err != nil || r.Status != clasp.RunSucceeded || r.InvocationSource != "mcp" {
		t.Fatalf("run after stdin EOF: %+v %v; want succeeded", r, err)
	}
	iss, _ := w.board.IssueGet(ctx, held.str("issue", "identifier"))
	if iss.CheckoutRunID != nil {
		t.Errorf("issue held at EOF is still locked by %s", *iss.CheckoutRunID)
	}
	if !strings.Contains(p.stderr.String(), "finished run") {
		t.Errorf("stderr has no log of the finish:\n%s", p.stderr)
	}

	// SIGTERM: cancelled, lock released.
	p = startMCP(t, env...)
	c = call(t, p.cs, "claim_next_issue", nil)
	runID, ident = c.str("runId"), c.str("issue", "identifier")
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// stdin stays open until the run has ended: the signal alone ends it.
	eventually(t, "the run ends after SIGTERM", func() bool {
		r, err := w.board.RunGet(ctx, runID)
		return err == nil && r.Status.Terminal()
	})
	t.Logf("clasp mcp finished its run %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	_ = p.cs.Close()
	r, _ = w.board.RunGet(ctx, runID)
	iss, _ = w.board.IssueGet(ctx, ident)
	if r.Status != clasp.RunCancelled || iss.CheckoutRunID != nil {
		t.Fatalf("after SIGTERM: run %s, lock %v; want cancelled and released", r.Status, iss.CheckoutRunID)
	}

	// SIGKILL: the process neither finishes its run nor releases the issue;
	// the lease runs out and the sweeper fails the run (pass 1) and clears
	// the lock (pass 2). The two need not be seen in that order: a lease
	// that runs out between the passes of one sweep has its lock cleared
	// by that sweep's pass 2 and its run failed by the next one's pass 1
	// (RULES.md, The sweeper). So the test waits for both.
	p = startMCP(t, env...)
	c = call(t, p.cs, "claim_next_issue", nil)
	runID, ident = c.str("runId"), c.str("issue", "identifier")
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// The SDK's command transport reaps the process (cmd.Wait); a second
	// Wait here would race it. The session ends once the process is gone.
	_ = p.cs.Wait()
	eventually(t, "the sweeper fails the killed session's run and releases its issue", func() bool {
		iss, err := w.board.IssueGet(ctx, ident)
		if err != nil || iss.CheckoutRunID != nil || iss.ExecutionRunID != nil {
			return false
		}
		r, err := w.board.RunGet(ctx, runID)
		return err == nil && r.Status.Terminal()
	})
	r, _ = w.board.RunGet(ctx, runID)
	if r.Status != clasp.RunFailed || r.ErrorCode == nil || *r.ErrorCode != clasp.RunErrorLeaseExpired {
		t.Errorf("killed session's run: %s, errorCode %v; want failed, lease_expired (the sweeper's, not a finish)", r.Status, r.ErrorCode)
	}
	// The only lock change since the claim is the sweeper's.
	acts, err := w.board.IssueActivity(ctx, ident, client.ActivityListParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var since []string // newest first, down to the claim's checkout
	for _, a := range acts.Items {
		if a.Action == clasp.ActionIssueCheckedOut && strings.Contains(string(a.Details), runID) {
			break
		}
		since = append(since, a.Action+" by "+string(a.ActorType)+" "+string(a.Details))
	}
	if len(since) != 1 || !strings.HasPrefix(since[0], clasp.ActionIssueStaleLockCleared+" by system ") || !strings.Contains(since[0], runID) {
		t.Errorf("activity of %s after the killed session's checkout: %q; want one issue.stale_lock_cleared by system naming %s", ident, since, runID)
	}
}

// TestBinaryNotConfigured: `clasp mcp` with no environment starts, lists its
// tools, and answers not_configured naming CLASP_API_KEY.
func TestBinaryNotConfigured(t *testing.T) {
	p := startMCP(t, "CLASP_URL=", "CLASP_API_KEY=", "CLASP_RUN_TOKEN=", "CLASP_API_KEY_FILE=", "CLASP_RUN_ID=")
	r := call(t, p.cs, "claim_next_issue", nil)
	if !r.IsError || r.str("error", "setting") != "CLASP_API_KEY" {
		t.Fatalf("claim without a key: %+v", r.S)
	}
	if err := p.cs.Close(); err != nil || p.cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("close: %v, exit %d\n%s", err, p.cmd.ProcessState.ExitCode(), p.stderr)
	}
}

// TestBinarySIGTERMDuringClaimWait: SIGTERM while claim_next_issue waits
// for work ends the wait at once: the process exits and finishes its run
// cancelled well before the wait would have ended.
func TestBinarySIGTERMDuringClaimWait(t *testing.T) {
	w := newWorld(t, "", 30*time.Second, 1)
	env := []string{"CLASP_URL=" + w.url, "CLASP_API_KEY=" + w.keys[0], "CLASP_RUN_ID=", "CLASP_RUN_TOKEN=", "CLASP_API_KEY_FILE="}
	ctx := context.Background()
	p := startMCP(t, env...)
	c := call(t, p.cs, "claim_next_issue", nil) // the only issue: nothing is left to claim
	if c.IsError || c.str("outcome") != "claimed" {
		t.Fatalf("claim: %+v", c.S)
	}
	runID := c.str("runId")
	before := claimRequests(t, w.url)
	go func() {
		_, _ = p.cs.CallTool(ctx, &sdk.CallToolParams{Name: "claim_next_issue", Arguments: map[string]any{"waitSeconds": 60}})
	}()
	// The wait is under way once the server has seen two more claims (the
	// call's first try and one retry a second later).
	eventually(t, "the waiting claim retries", func() bool { return claimRequests(t, w.url) >= before+2 })
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = p.cs.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(40 * time.Second): // the wait alone would last about 58 s more
		t.Fatalf("clasp mcp still running 40 s after SIGTERM during a 60 s claim wait\n%s", p.stderr)
	}
	t.Logf("clasp mcp exited %v after SIGTERM during a claim wait", time.Since(start).Round(time.Millisecond))
	r, err := w.board.RunGet(ctx, runID)
	if err != nil || r.Status != clasp.RunCancelled {
		t.Fatalf("run after SIGTERM: %+v %v; want cancelled", r, err)
	}
}

// claimRequests returns how many claim requests the server at url has
// answered, from its /metrics.
func claimRequests(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "clasp_http_request_duration_seconds_count{") && strings.Contains(line, `method="POST"`) && strings.Contains(line, `route="/api/agents/me/claim"`) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			n += int(v)
		}
	}
	return n
}
