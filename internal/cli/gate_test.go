package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp"
)

// gateBin builds the clasp binary once per test that needs one.
func gateBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary and runs a server; skipped with -short")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	bin := filepath.Join(t.TempDir(), "clasp")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/clasp").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// gitEnv is the environment of the test's git commands: no user or
// system configuration, a fixed identity.
func gitEnv(home string) []string {
	return append(exampleEnv(), "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
}

// sh runs a command in dir and returns its combined output and error.
func sh(t *testing.T, env []string, dir string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func mustSh(t *testing.T, env []string, dir string, name string, args ...string) string {
	t.Helper()
	out, err := sh(t, env, dir, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

// TestGateRefusesSupersededPush (RULES.md G1-G5): a real clasp serve, a
// bare repository with the gate installed as its pre-receive hook, two
// clones. Agent builder checks out EX-1 (epoch 1; the answer names branch
// clasp/EX-1 and stamp Clasp-Issue: EX-1@1) and commits with the stamp;
// its run fails and reviewer takes the issue (epoch 2): builder's push is
// refused naming epoch 2 and reviewer's run, reviewer's is accepted and,
// once EX-1 is done, still passes clasp gate check while builder's still
// fails. Another company's stamp, a malformed stamp and an unstamped
// commit on clasp/EX-1 are refused; with the server down the hook refuses
// every push; the gate token can do nothing but the check.
func TestGateRefusesSupersededPush(t *testing.T) {
	bin := gateBin(t)
	s := startExampleServer(t, bin)
	tmp := t.TempDir()
	env := gitEnv(tmp)
	cli := append(append([]string(nil), env...), "CLASP_URL="+s.url, "CLASP_TOKEN="+s.token)

	// reviewer, a second agent of EX, with a run; company OT with OT-1.
	var rev, revKey, revRun, ot, otIssue struct {
		ID, Token, RunToken, Identifier string
	}
	s.api("POST", "/api/companies/"+s.company+"/agents", s.token, `{"name":"reviewer"}`, &rev)
	s.api("POST", "/api/agents/"+rev.ID+"/keys", s.token, `{}`, &revKey)
	s.api("POST", "/api/agents/me/runs", revKey.Token, `{}`, &revRun)
	s.api("POST", "/api/companies", s.token, `{"name":"Other","issuePrefix":"OT"}`, &ot)
	s.api("POST", "/api/companies/"+ot.ID+"/issues", s.token, `{"title":"theirs","status":"todo"}`, &otIssue)

	// The shared bare repository with the gate, seeded with main.
	bare := filepath.Join(tmp, "origin.git")
	mustSh(t, env, tmp, "git", "init", "-q", "--bare", "-b", "main", bare)
	mustSh(t, cli, tmp, bin, "gate", "install", "--repo", bare, "--company", "EX")
	if fi, err := os.Stat(filepath.Join(bare, "hooks", "clasp-gate.env")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("hooks/clasp-gate.env: %v, mode %v; want 0600", err, fi)
	}
	seed := filepath.Join(tmp, "seed")
	mustSh(t, env, tmp, "git", "clone", "-q", bare, seed)
	mustSh(t, env, seed, "git", "checkout", "-q", "-b", "main")
	mustSh(t, env, seed, "git", "commit", "-q", "--allow-empty", "-m", "start")
	mustSh(t, env, seed, "git", "push", "-q", "origin", "main")
	wa, wb := filepath.Join(tmp, "builder"), filepath.Join(tmp, "reviewer")
	mustSh(t, env, tmp, "git", "clone", "-q", bare, wa)
	mustSh(t, env, tmp, "git", "clone", "-q", bare, wb)

	// builder holds EX-1 at epoch 1 and commits its work, stamped.
	var got clasp.Issue
	s.api("POST", "/api/issues/"+s.issue+"/checkout", s.runToken, `{"agentId":"`+s.agent+`","expectedStatuses":["todo"]}`, &got)
	if w := got.Workspace; w == nil || w.Branch != "clasp/EX-1" || w.Stamp != "Clasp-Issue: EX-1@1" || w.Epoch != 1 {
		t.Fatalf("checkout's workspace: got %+v, want clasp/EX-1, Clasp-Issue: EX-1@1, 1", w)
	}
	mustSh(t, env, wa, "git", "checkout", "-q", "-b", got.Workspace.Branch)
	if err := os.WriteFile(filepath.Join(wa, "result.txt"), []byte("builder\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustSh(t, env, wa, "git", "add", "result.txt")
	mustSh(t, env, wa, "git", "commit", "-q", "-m", "builder's result", "--trailer", got.Workspace.Stamp)

	// builder's run fails; the board gives EX-1 to reviewer (epoch 2).
	s.api("POST", "/api/runs/"+s.run+"/finish", s.runToken, `{"status":"failed"}`, nil)
	s.api("PATCH", "/api/issues/"+s.issue, s.token, `{"assigneeAgentId":"`+rev.ID+`","status":"todo"}`, nil)
	s.api("POST", "/api/issues/"+s.issue+"/checkout", revRun.RunToken, `{"agentId":"`+rev.ID+`","expectedStatuses":["todo"]}`, &got)
	if got.Workspace == nil || got.Workspace.Epoch != 2 {
		t.Fatalf("reviewer's checkout: got workspace %+v, want epoch 2", got.Workspace)
	}

	out, err := sh(t, env, wa, "git", "push", "origin", "clasp/EX-1")
	t.Logf("builder's push:\n%s", out)
	want := "superseded: EX-1 is at epoch 2, held by run " + revRun.ID + " of agent reviewer"
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("builder's push after the takeover: err %v, output:\n%s\nwant a refusal saying %q", err, out, want)
	}

	// reviewer's stamped work is accepted.
	mustSh(t, env, wb, "git", "checkout", "-q", "-b", "clasp/EX-1", "origin/main")
	if err := os.WriteFile(filepath.Join(wb, "result.txt"), []byte("reviewer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustSh(t, env, wb, "git", "add", "result.txt")
	mustSh(t, env, wb, "git", "commit", "-q", "-m", "reviewer's result", "--trailer", got.Workspace.Stamp)
	if out, err := sh(t, env, wb, "git", "push", "origin", "clasp/EX-1"); err != nil {
		t.Fatalf("reviewer's push: %v\n%s", err, out)
	}

	// Done: reviewer's completed work still passes, builder's still fails.
	s.api("PATCH", "/api/issues/"+s.issue, revRun.RunToken, `{"status":"done"}`, &got)
	if got.CompletedEpoch == nil || *got.CompletedEpoch != 2 {
		t.Fatalf("done: completedEpoch %v, want 2", got.CompletedEpoch)
	}
	var gt clasp.GateToken
	if err := json.Unmarshal([]byte(mustSh(t, cli, tmp, bin, "gate", "token", "create", "--company", "EX", "--name", "ci", "--json")), &gt); err != nil {
		t.Fatal(err)
	}
	gate := append(append([]string(nil), env...), "CLASP_URL="+s.url, "CLASP_TOKEN="+gt.Token)
	if out, err := sh(t, gate, wb, bin, "gate", "check", "--range", "origin/main..clasp/EX-1"); err != nil {
		t.Errorf("gate check of reviewer's completed work: %v\n%s", err, out)
	}
	out, err = sh(t, gate, wa, bin, "gate", "check", "--range", "origin/main..clasp/EX-1", "--json")
	var rep gateReport
	if jerr := json.Unmarshal([]byte(out), &rep); err == nil || jerr != nil || rep.OK || len(rep.Commits) != 1 ||
		len(rep.Commits[0].Results) != 1 || rep.Commits[0].Results[0].Reason != clasp.GateSuperseded {
		t.Errorf("gate check of builder's work after EX-1 is done: err %v, output %s; want exit 1, one commit superseded", err, out)
	}

	// Refused: another company's stamp, a malformed one, none on clasp/EX-1.
	for _, c := range []struct{ branch, trailer, want string }{
		{"misc", "Clasp-Issue: " + otIssue.Identifier + "@0", "unknown: no issue " + otIssue.Identifier + " in this company"},
		{"misc2", "Clasp-Issue: not-a-stamp", `malformed stamp "not-a-stamp"`},
		{"clasp/EX-1", "", "unstamped: a commit on clasp/EX-1, a branch of the company's template clasp/<identifier>, must carry a Clasp-Issue trailer"},
	} {
		args := []string{"commit", "-q", "--allow-empty", "-m", "probe " + c.branch}
		if c.trailer != "" {
			args = append(args, "--trailer", c.trailer)
		}
		mustSh(t, env, wb, "git", "checkout", "-q", "-B", c.branch, "clasp/EX-1")
		mustSh(t, env, wb, "git", args...)
		out, err := sh(t, env, wb, "git", "push", "origin", c.branch)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("push to %s with trailer %q: err %v, output:\n%s\nwant a refusal saying %q", c.branch, c.trailer, err, out, c.want)
		}
	}

	// The company's branch template decides which branches need stamps:
	// under work/{identifier} an unstamped commit on work/EX-7 is refused
	// naming the template, one on clasp/EX-7 is not on an issue branch.
	mustSh(t, cli, tmp, bin, "company", "update", "EX", "--branch-template", "work/{identifier}")
	for _, c := range []struct {
		branch string
		ok     bool
	}{{"work/EX-7", false}, {"clasp/EX-7", true}} {
		mustSh(t, env, wb, "git", "checkout", "-q", "-B", c.branch, "origin/main")
		mustSh(t, env, wb, "git", "commit", "-q", "--allow-empty", "-m", "unstamped on "+c.branch)
		out, err := sh(t, env, wb, "git", "push", "origin", c.branch)
		refused := strings.Contains(out, "unstamped: a commit on "+c.branch+", a branch of the company's template work/<identifier>")
		if (err == nil) != c.ok || refused == c.ok {
			t.Errorf("unstamped push to %s under work/{identifier}: err %v, output:\n%s\nwant accepted %v", c.branch, err, out, c.ok)
		}
	}

	// The gate token may ask the check and nothing else.
	res := httpDo(t, "GET", s.url+"/api/companies", gt.Token)
	if res != 403 {
		t.Errorf("GET /api/companies with the gate token: %d, want 403", res)
	}

	// Server down: the hook refuses, and says so.
	s.stop()
	mustSh(t, env, wb, "git", "checkout", "-q", "-B", "after", "origin/main")
	mustSh(t, env, wb, "git", "commit", "-q", "--allow-empty", "-m", "while the server is down")
	out, err = sh(t, env, wb, "git", "push", "origin", "after")
	if err == nil || !strings.Contains(out, "could not check the stamps") {
		t.Errorf("push with the server down: err %v, output:\n%s\nwant a refusal saying the server could not check", err, out)
	}
	// Inside the hook the server's URL is the hook's environment file's.
	envFile := filepath.Join(bare, "hooks", "clasp-gate.env")
	if !strings.Contains(out, "are in "+envFile) || strings.Contains(out, "--url") {
		t.Errorf("push with the server down, output:\n%s\nwant it to name %s as where the server's URL is set, not --url", out, envFile)
	}
	// No verdict is exit 2 (a refused commit is 1).
	out, err = sh(t, gate, wb, bin, "gate", "check", "--range", "origin/main..after")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(out, "could not check the stamps") {
		t.Errorf("gate check with the server down: %v, output:\n%s\nwant exit 2 saying the server could not check", err, out)
	}
}

// TestGitHelpNamesTheBranchTemplate: the help of clasp agent work and of
// clasp gate check says the branch is the company's branch template's,
// clasp/{identifier} by default, instead of naming clasp/ as the only one.
func TestGitHelpNamesTheBranchTemplate(t *testing.T) {
	for _, args := range [][]string{{"agent", "work", "--help"}, {"gate", "check", "--help"}} {
		r := runCLI(t, nil, "", args...)
		if r.code != 0 {
			t.Fatalf("clasp %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
		for _, bad := range []string{"branch clasp/<identifier>", "a branch under clasp/", "branch clasp/<issue>"} {
			if strings.Contains(r.stdout, bad) {
				t.Errorf("clasp %s says %q; want the company's branch template named", strings.Join(args, " "), bad)
			}
		}
		if !strings.Contains(r.stdout, "branch template") || !strings.Contains(r.stdout, "default clasp/{identifier}") {
			t.Errorf("clasp %s does not say the branch is the company's branch template's, default clasp/{identifier}:\n%s", strings.Join(args, " "), r.stdout)
		}
	}
}

// httpDo sends one request with bearer and returns its status.
func httpDo(t *testing.T, method, url, bearer string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+bearer)
	res, err := exampleClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestAgentWorkGitWorktrees (RULES.md G5): clasp agent work --git DIR
// works its claim of EX-1 (epoch 1) in the worktree
// DIR/.clasp-worktrees/EX-1@1 on branch clasp/EX-1, started from the
// branch's tip where a superseded hold (epoch 0's worktree, left on this
// machine) committed work; that older worktree is removed with a log
// line, never reused. The result commit carries Clasp-Issue: EX-1@1, the
// issue is completed at epoch 1, and the gate accepts the branch.
func TestAgentWorkGitWorktrees(t *testing.T) {
	bin := gateBin(t)
	s := startExampleServer(t, bin)
	tmp := t.TempDir()
	env := gitEnv(tmp)
	repo := filepath.Join(tmp, "repo")
	mustSh(t, env, tmp, "git", "init", "-q", "-b", "main", repo)
	mustSh(t, env, repo, "git", "commit", "-q", "--allow-empty", "-m", "start")
	stale := filepath.Join(repo, ".clasp-worktrees", "EX-1@0")
	mustSh(t, env, repo, "git", "worktree", "add", "-q", "-b", "clasp/EX-1", stale, "HEAD")
	mustSh(t, env, stale, "git", "commit", "-q", "--allow-empty", "-m", "previous holder")
	input := filepath.Join(tmp, "input.txt")
	if err := os.WriteFile(input, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.api("PATCH", "/api/issues/"+s.issue, s.token, `{"description":"`+input+`"}`, nil)

	work := append(append([]string(nil), env...), "CLASP_URL="+s.url, "CLASP_TOKEN="+s.key)
	cmd := exec.Command(bin, "agent", "work", "--git", repo)
	cmd.Dir, cmd.Env = tmp, work
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("agent work: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "removing the worktree of a superseded hold") || !strings.Contains(stderr.String(), "EX-1@0") {
		t.Errorf("no log line for the removal of the superseded worktree; stderr:\n%s", stderr.String())
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the superseded worktree %s is still there (%v)", stale, err)
	}
	wt := filepath.Join(repo, ".clasp-worktrees", "EX-1@1")
	if !strings.Contains(stdout.String(), "event=committed") || !strings.Contains(stdout.String(), wt) {
		t.Errorf("no committed event naming %s; stdout:\n%s", wt, stdout.String())
	}
	log := mustSh(t, env, repo, "git", "log", "--format=%s|%(trailers:key=Clasp-Issue,valueonly,separator=;)", "main..clasp/EX-1")
	lines := strings.Split(strings.TrimSpace(log), "\n")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], "|EX-1@1") || lines[1] != "previous holder|" {
		t.Errorf("clasp/EX-1 since main:\n%s\nwant the result stamped EX-1@1 on top of the previous holder's commit", log)
	}
	if b, err := os.ReadFile(filepath.Join(wt, "results", "EX-1")); err != nil || !strings.HasPrefix(string(b), "sha256 ") {
		t.Errorf("results/EX-1 in the worktree: %q, %v", b, err)
	}
	var iss clasp.Issue
	s.api("GET", "/api/issues/"+s.issue, s.token, "", &iss)
	if iss.Status != clasp.IssueDone || iss.CompletedEpoch == nil || *iss.CompletedEpoch != 1 {
		t.Fatalf("EX-1: status %s, completedEpoch %v; want done at 1", iss.Status, iss.CompletedEpoch)
	}
	var gt clasp.GateToken
	s.api("POST", "/api/companies/"+s.company+"/gate-tokens", s.token, `{"name":"ci"}`, &gt)
	gate := append(append([]string(nil), env...), "CLASP_URL="+s.url, "CLASP_TOKEN="+gt.Token)
	if out, err := sh(t, gate, repo, bin, "gate", "check", "--ref", "refs/heads/clasp/EX-1", "--range", "main..clasp/EX-1"); err == nil ||
		!strings.Contains(out, "unstamped") || !strings.Contains(out, "1 of 2 commits refused") {
		t.Errorf("gate check of clasp/EX-1: err %v, output:\n%s\nwant the previous holder's unstamped commit refused, the result accepted", err, out)
	}
}

// TestAgentWorkGitNotARepository: clasp agent work --git DIR refuses a DIR
// that is not a git repository at startup, with exit 2, a message saying
// so and how to make one, and no issue claimed. With a repository in
// which the worktree cannot be made (.clasp-worktrees is a file), the
// claimed issue is left blocked with a comment naming the git step that
// failed, never one about the file the description names.
func TestAgentWorkGitNotARepository(t *testing.T) {
	bin := gateBin(t)
	s := startExampleServer(t, bin)
	tmp := t.TempDir()
	env := gitEnv(tmp)
	input := filepath.Join(tmp, "input.txt")
	if err := os.WriteFile(input, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.api("PATCH", "/api/issues/"+s.issue, s.token, `{"description":"`+input+`"}`, nil)
	work := append(append([]string(nil), env...), "CLASP_URL="+s.url, "CLASP_TOKEN="+s.key)

	plain := filepath.Join(tmp, "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := sh(t, work, tmp, bin, "agent", "work", "--git", plain)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("agent work --git on a plain directory: %v, want exit 2; output:\n%s", err, out)
	}
	if !strings.Contains(out, plain+" is not a git repository") || !strings.Contains(out, "git init "+plain) {
		t.Errorf("output does not say %s is not a git repository and how to make one:\n%s", plain, out)
	}
	var iss clasp.Issue
	s.api("GET", "/api/issues/"+s.issue, s.token, "", &iss)
	if iss.Status != clasp.IssueTodo || iss.CheckoutEpoch != 0 {
		t.Fatalf("EX-1 after the refusal: status %s, epoch %d; want todo, never checked out", iss.Status, iss.CheckoutEpoch)
	}

	repo := filepath.Join(tmp, "repo")
	mustSh(t, env, tmp, "git", "init", "-q", "-b", "main", repo)
	mustSh(t, env, repo, "git", "commit", "-q", "--allow-empty", "-m", "start")
	if err := os.WriteFile(filepath.Join(repo, ".clasp-worktrees"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = sh(t, work, tmp, bin, "agent", "work", "--git", repo)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("agent work with no room for a worktree: %v, want exit 1; output:\n%s", err, out)
	}
	s.api("GET", "/api/issues/"+s.issue, s.token, "", &iss)
	if iss.Status != clasp.IssueBlocked {
		t.Fatalf("EX-1: status %s, want blocked", iss.Status)
	}
	var comments []clasp.Comment
	s.api("GET", "/api/issues/"+s.issue+"/comments", s.token, "", &comments)
	if len(comments) == 0 {
		t.Fatal("EX-1 has no comment")
	}
	body := comments[len(comments)-1].Body
	if strings.Contains(body, "description names") || !strings.Contains(body, "could not commit the result in its worktree: git worktree") {
		t.Errorf("EX-1's comment: %q; want it to say the git work (its worktree) failed, not the file of the description", body)
	}
}

// TestGateInstallAgain: installing the gate twice on one repository
// leaves one live token, the second install's: the first install's token,
// whose id its environment file records, is revoked, and so is the token
// of an environment file that holds the secret alone (as written before
// ids were recorded), found by its prefix. A clasp binary inside Go's build
// cache is refused with exit 2 (the hook would break when the cache is
// trimmed), --clasp names another, and must be executable. A repository
// that is not bare gets a note about receive.denyCurrentBranch.
func TestGateInstallAgain(t *testing.T) {
	bin := gateBin(t)
	s := startExampleServer(t, bin)
	tmp := t.TempDir()
	env := gitEnv(tmp)
	cli := append(append([]string(nil), env...), "CLASP_URL="+s.url, "CLASP_TOKEN="+s.token)
	bare := filepath.Join(tmp, "origin.git")
	mustSh(t, env, tmp, "git", "init", "-q", "--bare", "-b", "main", bare)
	envFile := filepath.Join(bare, "hooks", "clasp-gate.env")

	live := func() []clasp.GateToken {
		var ts []clasp.GateToken
		s.api("GET", "/api/companies/"+s.company+"/gate-tokens", s.token, "", &ts)
		var out []clasp.GateToken
		for _, g := range ts {
			if g.RevokedAt == nil {
				out = append(out, g)
			}
		}
		return out
	}
	out := mustSh(t, cli, tmp, bin, "gate", "install", "--repo", bare, "--company", "EX")
	if strings.Contains(out, "note:") {
		t.Errorf("install into a bare repository printed a note:\n%s", out)
	}
	first := live()
	if len(first) != 1 {
		t.Fatalf("live gate tokens after one install: %+v, want 1", first)
	}
	if b, _ := os.ReadFile(envFile); !strings.Contains(string(b), "CLASP_GATE_TOKEN_ID='"+first[0].ID+"'") {
		t.Errorf("%s does not record the token's id %s:\n%s", envFile, first[0].ID, b)
	}
	out = mustSh(t, cli, tmp, bin, "gate", "install", "--repo", bare, "--company", "EX")
	second := live()
	if len(second) != 1 || second[0].ID == first[0].ID || !strings.Contains(out, "Revoked the previous gate token "+first[0].ID) {
		t.Fatalf("live gate tokens after a second install: %+v (first %s), output:\n%s\nwant the first revoked, one live", second, first[0].ID, out)
	}

	// An environment file with the secret alone.
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "CLASP_GATE_TOKEN_ID=") && !strings.HasPrefix(line, "CLASP_GATE_COMPANY_ID=") {
			kept = append(kept, line)
		}
	}
	if err := os.WriteFile(envFile, []byte(strings.Join(kept, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	out = mustSh(t, cli, tmp, bin, "gate", "install", "--repo", bare, "--company", "EX")
	third := live()
	if len(third) != 1 || third[0].ID == second[0].ID || !strings.Contains(out, "Revoked the previous gate token "+second[0].ID) {
		t.Fatalf("live gate tokens after an install over a file without the id: %+v (previous %s), output:\n%s\nwant the previous revoked", third, second[0].ID, out)
	}

	// A binary in Go's build cache: refused before any token is made.
	current := third[0].ID
	for _, dir := range []string{filepath.Join(tmp, "go-build123", "b001", "exe"), filepath.Join(tmp, "gocache", "ab")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cached := filepath.Join(dir, "clasp")
		mustSh(t, env, tmp, "cp", bin, cached)
		out, err := sh(t, append(cli, "GOCACHE="+filepath.Join(tmp, "gocache")), tmp, cached, "gate", "install", "--repo", bare, "--company", "EX")
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(out, "go build -o clasp ./cmd/clasp") || !strings.Contains(out, "--clasp PATH") {
			t.Errorf("install from %s: %v, output:\n%s\nwant exit 2 saying to build the binary or pass --clasp", cached, err, out)
		}
		if got := live(); len(got) != 1 || got[0].ID != current {
			t.Errorf("live gate tokens after a refused install: %+v, want %s alone", got, current)
		}
		mustSh(t, cli, tmp, cached, "gate", "install", "--repo", bare, "--company", "EX", "--clasp", bin)
		if got := live(); len(got) == 1 {
			current = got[0].ID
		}
		if hook, _ := os.ReadFile(filepath.Join(bare, "hooks", "pre-receive")); !strings.Contains(string(hook), "'"+bin+"' gate check") {
			t.Errorf("the hook installed with --clasp %s:\n%s", bin, hook)
		}
	}
	if out, err := sh(t, cli, tmp, bin, "gate", "install", "--repo", bare, "--company", "EX", "--clasp", envFile); err == nil || !strings.Contains(out, "not an executable file") {
		t.Errorf("--clasp of a file that is not executable: %v, output:\n%s\nwant a refusal", err, out)
	}

	// A repository that is not bare: a note, and the install goes on.
	work := filepath.Join(tmp, "work")
	mustSh(t, env, tmp, "git", "init", "-q", "-b", "main", work)
	out = mustSh(t, cli, tmp, bin, "gate", "install", "--repo", work, "--company", "EX")
	if !strings.Contains(out, "note: "+work+" is not bare") || !strings.Contains(out, "receive.denyCurrentBranch") {
		t.Errorf("install into a repository that is not bare:\n%s\nwant a note about receive.denyCurrentBranch", out)
	}
	if _, err := os.Stat(filepath.Join(work, ".git", "hooks", "pre-receive")); err != nil {
		t.Errorf("no hook in the repository that is not bare: %v", err)
	}
}
