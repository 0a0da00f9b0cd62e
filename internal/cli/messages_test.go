package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
	"github.com/clasp-dev/clasp/internal/httpapi"
)

// fixture is a real server with one company (prefix ACME), one agent
// (builder) with an API key.
type fixture struct {
	info               ServeInfo
	board, agentKey    string
	companyID, agent   string
	boardEnv, agentEnv map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	info, _, _ := startServer(t, filepath.Join(t.TempDir(), "data"))
	f := &fixture{info: info, board: info.BoardToken}
	f.boardEnv = map[string]string{EnvURL: info.URL, EnvToken: info.BoardToken}
	var co clasp.Company
	mustJSON(t, runCLI(t, f.boardEnv, "", "company", "create", "Acme", "--prefix", "ACME", "--json"), &co)
	f.companyID = co.ID
	var ag clasp.Agent
	mustJSON(t, runCLI(t, f.boardEnv, "", "agent", "create", "builder", "--company", co.ID, "--json"), &ag)
	f.agent = ag.ID
	var key clasp.APIKey
	mustJSON(t, runCLI(t, f.boardEnv, "", "agent", "key", "create", ag.ID, "--json"), &key)
	f.agentKey = key.Token
	f.agentEnv = map[string]string{EnvURL: info.URL, EnvToken: key.Token}
	return f
}

func mustJSON(t *testing.T, r result, v any) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("%q: %v", r.stdout, err)
	}
}

// todoAndRun creates the todo issue title (ACME-1 in a fresh fixture) as
// the board and opens a run of the fixture's agent, through the CLI.
func (f *fixture) todoAndRun(t *testing.T, title string) clasp.Run {
	t.Helper()
	if r := runCLI(t, f.boardEnv, "", "issue", "create", title, "--company", f.companyID, "--status", "todo"); r.code != 0 {
		t.Fatalf("issue create: %d %s", r.code, r.stderr)
	}
	var run clasp.Run
	mustJSON(t, runCLI(t, f.agentEnv, "", "run", "open", "--json"), &run)
	return run
}

// TestAgentWorkFailureReads: `clasp agent work` on a todo issue without a
// description leaves it blocked with a comment, and its run failed with an
// error, that say in a sentence what is wrong and what to do; the board's
// runs page shows that error without a code-less ": " before it.
func TestAgentWorkFailureReads(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if r := runCLI(t, f.boardEnv, "", "issue", "create", "No file", "--company", f.companyID, "--status", "todo"); r.code != 0 {
		t.Fatalf("issue create: %d %s", r.code, r.stderr)
	}
	if r := runCLI(t, f.agentEnv, "", "agent", "work"); r.code != 1 {
		t.Fatalf("agent work: exit %d, want 1; %s", r.code, r.stderr)
	}
	var comments []clasp.Comment
	mustJSON(t, runCLI(t, f.boardEnv, "", "issue", "comments", "ACME-1", "--json"), &comments)
	var runs []clasp.Run
	mustJSON(t, runCLI(t, f.boardEnv, "", "run", "list", "--company", f.companyID, "--json"), &runs)
	var runErr string
	for _, r := range runs {
		if r.Status == clasp.RunFailed && r.Error != nil {
			runErr = *r.Error
		}
	}
	if len(comments) != 1 {
		t.Fatalf("comments: %+v, want one", comments)
	}
	for what, msg := range map[string]string{"comment": comments[0].Body, "run error": runErr} {
		if strings.Contains(msg, "hash :") || strings.Contains(msg, "open :") || !strings.Contains(msg, "description names no file") ||
			!strings.Contains(msg, "clasp issue update ACME-1 --description PATH --status todo") {
			t.Errorf("%s: %q, want a sentence saying the description names no file and how to fix it", what, msg)
		}
	}

	// The board's runs page.
	form := url.Values{"token": {f.board}}.Encode()
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := hc.Post(f.info.URL+"/login", "application/x-www-form-urlencoded", strings.NewReader(form))
	if err != nil || len(res.Cookies()) != 1 {
		t.Fatalf("board sign-in: %v %v", err, res)
	}
	res.Body.Close()
	req, _ := http.NewRequest("GET", f.info.URL+"/runs?company="+f.companyID, nil)
	req.AddCookie(res.Cookies()[0])
	res, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	page := html.UnescapeString(string(b))
	if !strings.Contains(page, "work on ACME-1 failed") || strings.Contains(page, " : work on") || strings.Contains(page, ">: work on") {
		t.Errorf("board runs page (%d) shows the run error with an empty code before it, or not at all:\n%s", res.StatusCode, page)
	}
}

// TestRunWordingAndTerminateConfirm: `clasp issue checkout` with a run that
// has finished reaches the checkout (the agent is found without the run) and
// its error names --run, never the HTTP header; without a run the error says
// to pass --run or set CLASP_RUN_ID. `clasp agent terminate` refuses without
// --yes when stdin is not a terminal, saying so, and terminates with it.
func TestRunWordingAndTerminateConfirm(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	run := f.todoAndRun(t, "Work")
	if r := runCLI(t, f.agentEnv, "", "run", "finish", run.ID); r.code != 0 {
		t.Fatalf("run finish: %d %s", r.code, r.stderr)
	}
	r := runCLI(t, f.agentEnv, "", "issue", "checkout", "ACME-1", "--run", run.ID)
	if r.code == 0 || strings.Contains(r.stderr, "X-Clasp-Run-Id") || strings.Contains(r.stderr, "header") ||
		strings.Contains(r.stderr, "find the calling agent") || !strings.Contains(r.stderr, "--run") {
		t.Errorf("checkout in a finished run: exit %d, stderr %q; want an error about the run named by --run, naming no header", r.code, r.stderr)
	}
	r = runCLI(t, f.agentEnv, "", "issue", "checkout", "ACME-1")
	if r.code == 0 || strings.Contains(r.stderr, "X-Clasp-Run-Id") || !strings.Contains(r.stderr, "--run") || !strings.Contains(r.stderr, EnvRunID) {
		t.Errorf("checkout without a run: exit %d, stderr %q; want it to name --run and %s, not the header", r.code, r.stderr, EnvRunID)
	}

	r = runCLI(t, f.boardEnv, "", "agent", "terminate", f.agent)
	if r.code != ExitUsage || !strings.Contains(r.stderr, "--yes") || !strings.Contains(r.stderr, "not a terminal") {
		t.Errorf("terminate without --yes, stdin not a terminal: exit %d, stderr %q; want 2, saying to pass --yes", r.code, r.stderr)
	}
	var ag clasp.Agent
	mustJSON(t, runCLI(t, f.boardEnv, "", "agent", "show", f.agent, "--json"), &ag)
	if ag.Status != clasp.AgentActive {
		t.Fatalf("agent after a refused terminate: %s, want active", ag.Status)
	}
	mustJSON(t, runCLI(t, f.boardEnv, "", "agent", "terminate", f.agent, "--yes", "--json"), &ag)
	if ag.Status != clasp.AgentTerminated {
		t.Errorf("agent after terminate --yes: %s, want terminated", ag.Status)
	}
}

// TestWakeSkippedSaysWhy: waking an agent that cannot run (no adapter,
// then terminated) prints why the wake was skipped and what to do, and
// exits 1, since nothing will run.
func TestWakeSkippedSaysWhy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := runCLI(t, f.boardEnv, "", "agent", "wake", f.agent)
	if r.code != ExitError || !strings.Contains(r.stdout, "skipped") || !strings.Contains(r.stdout, "no adapter") || !strings.Contains(r.stdout, "set-adapter") {
		t.Errorf("wake without an adapter: exit %d, stdout %q; want 1 and the reason (no adapter, set-adapter)", r.code, r.stdout)
	}
	if r := runCLI(t, f.boardEnv, "", "agent", "terminate", f.agent, "--yes"); r.code != 0 {
		t.Fatalf("terminate: %d %s", r.code, r.stderr)
	}
	r = runCLI(t, f.boardEnv, "", "agent", "wake", f.agent)
	if r.code != ExitError || !strings.Contains(r.stdout, "terminated") {
		t.Errorf("wake of a terminated agent: exit %d, stdout %q; want 1, saying it is terminated", r.code, r.stdout)
	}
	var w struct{ Status, SkipReason string }
	r = runCLI(t, f.boardEnv, "", "agent", "wake", f.agent, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &w); err != nil || r.code != ExitError || w.Status != "skipped" || w.SkipReason != "agent_terminated" {
		t.Errorf("wake --json: exit %d, %q (%v); want 1 and skipReason agent_terminated", r.code, r.stdout, err)
	}
}

// TestBenchHelpExampleSmall runs the claim part of the help's example
// (`clasp bench --workload cycle,claim --clients 64 --issues 10000`) at a
// small scale against a server whose per-credential rate limit the set-up
// runs into (as the example's set-up ran into the in-process server's): the
// bench waits out each 429 as Retry-After says and passes; at the end the
// companies it made hold no active agent and no open issue, and it says so.
func TestBenchHelpExampleSmall(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ready := make(chan ServeInfo, 1)
	done := make(chan error, 1)
	sctx, stop := context.WithCancel(ctx)
	go func() {
		done <- Serve(sctx, ServeConfig{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Stdout: io.Discard,
			Net: NetConfig{Limits: httpapi.Limits{CredentialRate: 40, CredentialBurst: 100}}}, ready)
	}()
	var info ServeInfo
	select {
	case info = <-ready:
	case err := <-done:
		stop()
		t.Fatalf("serve: %v", err)
	}
	defer func() { stop(); <-done }()

	var out, errb bytes.Buffer
	code := run(ctx, []string{"bench", "--server", info.URL, "--workload", "claim", "--clients", "4", "--issues", "150", "--duration", "1s"},
		strings.NewReader(""), &out, &errb, func(k string) string { return map[string]string{EnvToken: info.BoardToken}[k] })
	if code != 0 || ctx.Err() != nil {
		t.Fatalf("clasp bench: exit %d (%v)\nstdout:\n%s\nstderr:\n%s", code, ctx.Err(), out.String(), errb.String())
	}
	if !strings.Contains(errb.String(), "is archived (its") || !strings.Contains(errb.String(), "--keep-data") {
		t.Errorf("bench stderr does not say what it left on the server:\n%s", errb.String())
	}
	board := client.New(info.URL, client.WithToken(info.BoardToken))
	// The bench left the board token's rate limit spent: each check below
	// waits as a refusal's Retry-After says, as any client of the
	// server must.
	limited := func(f func() error) {
		t.Helper()
		for {
			err := f()
			e := clasp.AsError(err)
			if e == nil || e.Code != clasp.CodeRateLimited {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			sec, _ := e.Details["retryAfterSeconds"].(float64)
			select {
			case <-ctx.Done():
				t.Fatalf("rate limited until the test's deadline: %v", err)
			case <-time.After(time.Duration(max(sec, 1) * float64(time.Second))):
			}
		}
	}
	// The bench's companies are archived (the store's contract tests
	// check that an archived company is out of the default list).
	var cos *client.Page[*clasp.Company]
	limited(func() (err error) {
		cos, err = board.CompanyListIncludingArchived(ctx, client.ListParams{})
		return err
	})
	n := 0
	for _, co := range cos.Items {
		if !strings.HasPrefix(co.Name, "clasp bench") {
			continue
		}
		n++
		if co.ArchivedAt == nil {
			t.Errorf("company %q is not archived after the bench", co.Name)
		}
		var ags *client.Page[*clasp.Agent]
		limited(func() (err error) {
			ags, err = board.AgentList(ctx, co.ID, client.ListParams{Limit: 1000})
			return err
		})
		for _, ag := range ags.Items {
			if ag.Status != clasp.AgentTerminated {
				t.Errorf("company %q: agent %s is %s after the bench, want terminated", co.Name, ag.Name, ag.Status)
			}
		}
		var open *client.Page[*clasp.Issue]
		limited(func() (err error) {
			open, err = board.IssueList(ctx, co.ID, client.IssueListParams{Limit: 1000,
				Statuses: []clasp.IssueStatus{clasp.IssueBacklog, clasp.IssueTodo, clasp.IssueInProgress, clasp.IssueInReview, clasp.IssueBlocked}})
			return err
		})
		if len(open.Items) > 0 {
			t.Errorf("company %q: %d open issues after the bench, want none", co.Name, len(open.Items))
		}
	}
	if n != 2 {
		t.Errorf("%d \"clasp bench\" companies, want 2 (the fixture's and the claim drain's)", n)
	}
}

// TestCompanyAndAgentByName: --company takes a company's issue prefix or
// name (any case) as well as its id, and a name two companies share is
// refused with both listed; agent flags and arguments take an agent's name;
// an agent's credential resolves its own company's prefix and refuses
// another's.
func TestCompanyAndAgentByName(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, args := range [][]string{{"Beta Labs", "--prefix", "BETA"}, {"Twin", "--prefix", "TWA"}, {"Twin", "--prefix", "TWB"}} {
		if r := runCLI(t, f.boardEnv, "", append([]string{"company", "create"}, args...)...); r.code != 0 {
			t.Fatalf("company create %v: %d %s", args, r.code, r.stderr)
		}
	}
	var iss clasp.Issue
	mustJSON(t, runCLI(t, f.boardEnv, "", "issue", "create", "By name", "--company", "acme", "--assignee", "BUILDER", "--json"), &iss)
	if iss.CompanyID != f.companyID || iss.AssigneeAgentID == nil || *iss.AssigneeAgentID != f.agent {
		t.Errorf("issue create --company acme --assignee BUILDER: company %s assignee %v, want %s and %s", iss.CompanyID, iss.AssigneeAgentID, f.companyID, f.agent)
	}
	for _, ref := range []string{"ACME", "Acme", "acme", f.companyID} {
		var list []clasp.Issue
		mustJSON(t, runCLI(t, f.boardEnv, "", "issue", "list", "--company", ref, "--assignee", "builder", "--json"), &list)
		if len(list) != 1 {
			t.Errorf("issue list --company %s --assignee builder: %d issues, want 1", ref, len(list))
		}
	}
	if r := runCLI(t, f.boardEnv, "", "issue", "list", "--company", "beta labs"); r.code != 0 {
		t.Errorf("issue list --company 'beta labs': %d %s", r.code, r.stderr)
	}
	r := runCLI(t, f.boardEnv, "", "issue", "list", "--company", "twin")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "TWA") || !strings.Contains(r.stderr, "TWB") {
		t.Errorf("issue list --company twin (two companies): exit %d, %q; want 2, listing both", r.code, r.stderr)
	}
	if r := runCLI(t, f.boardEnv, "", "agent", "show", "builder"); r.code != 0 || !strings.Contains(r.stdout, f.agent) {
		t.Errorf("agent show builder: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, f.boardEnv, "", "run", "list", "--company", "ACME", "--agent", "builder"); r.code != 0 {
		t.Errorf("run list --agent builder: %d %s", r.code, r.stderr)
	}
	if r := runCLI(t, f.agentEnv, "", "issue", "list", "--company", "acme"); r.code != 0 {
		t.Errorf("agent: issue list --company acme: %d %s", r.code, r.stderr)
	}
	if r := runCLI(t, f.agentEnv, "", "issue", "list", "--company", "BETA"); r.code != ExitUsage || !strings.Contains(r.stderr, "ACME") {
		t.Errorf("agent: issue list --company BETA: exit %d, %q; want 2 naming its own company", r.code, r.stderr)
	}
}

// TestEventsFollowsEveryCompany: `clasp events` with the board token and no
// --company follows every company it sees, each line led by the company's
// issue prefix.
func TestEventsFollowsEveryCompany(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if r := runCLI(t, f.boardEnv, "", "company", "create", "Beta Labs", "--prefix", "BETA"); r.code != 0 {
		t.Fatalf("company create: %d %s", r.code, r.stderr)
	}
	r := runCLI(t, f.boardEnv, "", "events", "--after", "0", "--count", "3")
	if r.code != 0 || strings.Count(r.stdout, "\n") != 3 {
		t.Fatalf("events without --company: exit %d, stdout %q, stderr %q; want 3 events", r.code, r.stdout, r.stderr)
	}
	for line := range strings.Lines(r.stdout) {
		if !strings.HasPrefix(line, "ACME  ") && !strings.HasPrefix(line, "BETA  ") {
			t.Errorf("events line %q does not start with its company's prefix", line)
		}
	}
}

// A --blocked-by list with an empty entry names no issue: it is refused
// (exit 2) and the blockers stay; --blocked-by "" removes them.
func TestBlockedByEmptyEntry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, title := range []string{"blocker", "blocked"} {
		if r := runCLI(t, f.boardEnv, "", "issue", "create", title, "--company", "ACME"); r.code != 0 {
			t.Fatalf("issue create %s: exit %d: %s", title, r.code, r.stderr)
		}
	}
	if r := runCLI(t, f.boardEnv, "", "issue", "update", "ACME-2", "--blocked-by", "ACME-1"); r.code != 0 {
		t.Fatalf("issue update --blocked-by ACME-1: exit %d: %s", r.code, r.stderr)
	}
	for _, list := range []string{",,", " ", "ACME-1,,"} {
		r := runCLI(t, f.boardEnv, "", "issue", "update", "ACME-2", "--blocked-by", list)
		if r.code != ExitUsage || !strings.Contains(r.stderr, "empty entry") {
			t.Errorf("--blocked-by %q: exit %d, stderr %q; want exit 2 naming the empty entry", list, r.code, r.stderr)
		}
		if r := runCLI(t, f.boardEnv, "", "issue", "create", "x", "--company", "ACME", "--blocked-by", list); r.code != ExitUsage {
			t.Errorf("issue create --blocked-by %q: exit %d, want 2", list, r.code)
		}
	}
	var iss clasp.Issue
	mustJSON(t, runCLI(t, f.boardEnv, "", "issue", "show", "ACME-2", "--json"), &iss)
	if len(iss.BlockedBy) != 1 {
		t.Fatalf("after refused updates ACME-2 is blocked by %v, want ACME-1", iss.BlockedBy)
	}
	mustJSON(t, runCLI(t, f.boardEnv, "", "issue", "update", "ACME-2", "--blocked-by", "", "--json"), &iss)
	if len(iss.BlockedBy) != 0 {
		t.Errorf("--blocked-by \"\" left blockers %v", iss.BlockedBy)
	}
}

// TestIssueShowNamesParent: `clasp issue show` names an issue's parent by
// its identifier and status, not by its id.
func TestIssueShowNamesParent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if r := runCLI(t, f.boardEnv, "", "issue", "create", "epic", "--company", "ACME"); r.code != 0 {
		t.Fatalf("issue create epic: exit %d: %s", r.code, r.stderr)
	}
	if r := runCLI(t, f.boardEnv, "", "issue", "create", "part", "--company", "ACME", "--parent", "ACME-1"); r.code != 0 {
		t.Fatalf("issue create part --parent ACME-1: exit %d: %s", r.code, r.stderr)
	}
	r := runCLI(t, f.boardEnv, "", "issue", "show", "ACME-2")
	if r.code != 0 {
		t.Fatalf("issue show ACME-2: exit %d: %s", r.code, r.stderr)
	}
	var parent string
	for line := range strings.Lines(r.stdout) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "Parent" {
			parent = strings.TrimSpace(v)
		}
	}
	if parent != "ACME-1 (backlog)" {
		t.Errorf("issue show ACME-2 names its parent %q, want \"ACME-1 (backlog)\"; output:\n%s", parent, r.stdout)
	}
}
