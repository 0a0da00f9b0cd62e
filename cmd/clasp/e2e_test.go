package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
)

// TestEndToEnd builds the real binary, starts `clasp serve` on a free port
// with a fresh data directory, and drives the checkout protocol through the
// CLI binary: company, agent, key, two runs, issue, checkout (exit 0), a
// second run's checkout (exit 3, the holder on stderr), release, finish;
// then SIGTERM and a clean exit.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a server; skipped with -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool in PATH")
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "clasp")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// Start the server and read its address and board token from stdout.
	srv := exec.Command(bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(tmp, "data"))
	srv.Env = append(os.Environ(), "CLASP_DATA_DIR=", "CLASP_LISTEN=")
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var srvErr bytes.Buffer
	srv.Stderr = &srvErr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	srvDone := false // set once exited has been received from
	t.Cleanup(func() {
		if !srvDone {
			_ = srv.Process.Kill()
			<-exited
		}
	})
	type banner struct{ url, token string }
	got := make(chan banner, 1)
	go func() {
		var b banner
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if tok, ok := strings.CutPrefix(line, "board token: "); ok {
				b.token = tok
			}
			if u, ok := strings.CutPrefix(line, "clasp listening on "); ok {
				b.url = u
				got <- b
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout) // drain, so that Wait may close the pipe
		close(got)
		exited <- srv.Wait()
	}()
	var bn banner
	select {
	case b, ok := <-got:
		if !ok {
			srvDone = true
			<-exited
			t.Fatalf("server exited before listening; stderr:\n%s", srvErr.String())
		}
		bn = b
	case <-time.After(time.Minute): // a guard against a hung server, not a timing check
		t.Fatalf("server did not announce its address; stderr:\n%s", srvErr.String())
	}
	if !strings.HasPrefix(bn.token, "clasp_bt_") || !strings.HasPrefix(bn.url, "http://127.0.0.1:") {
		t.Fatalf("banner: url %q token %q", bn.url, bn.token)
	}
	if b, err := os.ReadFile(filepath.Join(tmp, "data", "board-token")); err != nil || strings.TrimSpace(string(b)) != bn.token {
		t.Errorf("board-token file: %q, %v; want the printed token", b, err)
	}

	// runClasp runs the CLI binary with the given token (and run) and returns
	// its exit code, stdout and stderr.
	runClasp := func(token, runID string, args ...string) (int, string, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "CLASP_URL="+bn.url, "CLASP_TOKEN="+token, "CLASP_RUN_ID="+runID, "CLASP_COMPANY_ID=")
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("clasp %v: %v", args, err)
		}
		return cmd.ProcessState.ExitCode(), out.String(), errb.String()
	}
	// mustJSON runs a CLI command that must exit 0 and decodes its --json output.
	mustJSON := func(token, runID string, v any, args ...string) {
		t.Helper()
		code, out, errOut := runClasp(token, runID, append(args, "--json")...)
		if code != 0 {
			t.Fatalf("clasp %v: exit %d\n%s", args, code, errOut)
		}
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("clasp %v: output %q: %v", args, out, err)
		}
	}

	board := bn.token
	var co clasp.Company
	mustJSON(board, "", &co, "company", "create", "End to end", "--prefix", "ETE")
	var ag clasp.Agent
	mustJSON(board, "", &ag, "agent", "create", "worker-1", "--company", co.ID)
	var key clasp.APIKey
	mustJSON(board, "", &key, "agent", "key", "create", ag.ID)
	var iss clasp.Issue
	mustJSON(board, "", &iss, "issue", "create", "Compute the answer", "--company", co.ID, "--status", "todo")
	if iss.Identifier != "ETE-1" {
		t.Errorf("identifier = %q, want ETE-1", iss.Identifier)
	}
	var r1, r2 clasp.Run
	mustJSON(key.Token, "", &r1, "run", "open")
	mustJSON(key.Token, "", &r2, "run", "open")

	// R1 (by its run token) checks the issue out.
	var held clasp.Issue
	mustJSON(r1.RunToken, "", &held, "issue", "checkout", iss.Identifier, "--expect", "todo")
	if held.Status != clasp.IssueInProgress || held.CheckoutRunID == nil || *held.CheckoutRunID != r1.ID || held.CheckoutEpoch != 1 {
		t.Fatalf("after checkout: status %s, checkoutRunId %v, epoch %d; want in_progress, %s, 1", held.Status, held.CheckoutRunID, held.CheckoutEpoch, r1.ID)
	}

	// R2 (agent key + run header) is refused: exit 3, holder named.
	code, _, errOut := runClasp(key.Token, r2.ID, "issue", "checkout", iss.Identifier, "--expect", "todo")
	if code != 3 {
		t.Fatalf("second run's checkout: exit %d, want 3; stderr %q", code, errOut)
	}
	if !strings.Contains(errOut, "checkout_conflict") || !strings.Contains(errOut, r1.ID) {
		t.Errorf("second run's checkout stderr does not name the conflict and holder %s:\n%s", r1.ID, errOut)
	}

	// R1 releases; the issue is todo again and still assigned.
	var rel clasp.Issue
	mustJSON(r1.RunToken, "", &rel, "issue", "release", iss.Identifier)
	if rel.Status != clasp.IssueTodo || rel.CheckoutRunID != nil || rel.AssigneeAgentID == nil || *rel.AssigneeAgentID != ag.ID {
		t.Errorf("after release: status %s, checkoutRunId %v, assignee %v", rel.Status, rel.CheckoutRunID, rel.AssigneeAgentID)
	}
	var fin clasp.Run
	mustJSON(r1.RunToken, "", &fin, "run", "finish", r1.ID, "--status", "succeeded")
	if fin.Status != clasp.RunSucceeded {
		t.Errorf("finish: status %s", fin.Status)
	}
	// R2 may take it now.
	mustJSON(key.Token, r2.ID, &held, "issue", "checkout", iss.Identifier, "--expect", "todo")
	if held.CheckoutRunID == nil || *held.CheckoutRunID != r2.ID || held.CheckoutEpoch != 2 {
		t.Errorf("R2 checkout: checkoutRunId %v epoch %d, want %s 2", held.CheckoutRunID, held.CheckoutEpoch, r2.ID)
	}
	mustJSON(key.Token, r2.ID, &fin, "run", "finish", r2.ID, "--status", "failed", "--error", "test over")

	// A human-readable listing works too.
	code, out, errOut := runClasp(board, "", "activity", "--issue", iss.Identifier)
	if code != 0 || !strings.Contains(out, clasp.ActionIssueCheckedOut) || !strings.Contains(out, clasp.ActionIssueReleased) {
		t.Errorf("activity: exit %d\n%s\n%s", code, out, errOut)
	}

	// SIGTERM: a graceful, clean exit.
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		srvDone = true
		if err != nil {
			t.Errorf("server exit after SIGTERM: %v; stderr:\n%s", err, srvErr.String())
		}
	case <-time.After(time.Minute): // a guard, not a timing check
		t.Fatalf("server did not exit after SIGTERM; stderr:\n%s", srvErr.String())
	}
	if strings.Contains(srvErr.String(), "panic") {
		t.Errorf("server stderr mentions a panic:\n%s", srvErr.String())
	}
}
