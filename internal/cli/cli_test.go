package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp"
)

// result is what one run of the command line produced.
type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the command line with args and the environment env (nothing
// else is read from the process environment).
func runCLI(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb, func(k string) string { return env[k] })
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// recorded is one request a fake server received.
type recorded struct {
	Method, Path, Query, Auth, Run string
	Body                           string
}

// fakeServer answers with handler and records every request.
type fakeServer struct {
	URL  string
	mu   sync.Mutex
	reqs []recorded
}

func (f *fakeServer) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func newFakeServer(t *testing.T, handler http.HandlerFunc) *fakeServer {
	t.Helper()
	f := &fakeServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("X-Clasp-Run-Id"), string(b)})
		f.mu.Unlock()
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func ptr[T any](v T) *T { return &v }

// testCompanyID is a company id the fake servers answer for (a company id
// is sent as is; anything else is looked up as a prefix or name first).
const testCompanyID = "0191e0a4-0000-7000-8000-0000000000c1"

var testIssue = &clasp.Issue{
	ID: "0191e0a4-0000-7000-8000-000000000001", CompanyID: "c1", Identifier: "ENG-1", Title: "Fix the login page",
	Status: clasp.IssueInProgress, Priority: clasp.PriorityHigh, AssigneeAgentID: ptr("a1"),
	CheckoutRunID: ptr("r1"), ExecutionRunID: ptr("r1"), CheckoutEpoch: 1,
	CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), UpdatedAt: time.Date(2025, 1, 2, 3, 4, 6, 0, time.UTC),
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {}, {"issue"}, {"issue", "checkout", "--help"}, {"help", "serve"}} {
		r := runCLI(t, nil, "", args...)
		if r.code != ExitOK {
			t.Errorf("clasp %v: exit %d, want 0; stderr %q", args, r.code, r.stderr)
		}
		if !strings.Contains(r.stdout, "Usage:") {
			t.Errorf("clasp %v: stdout has no usage:\n%s", args, r.stdout)
		}
	}
}

// TestEveryCommandDocumented walks the command tree: every command says
// what it does, and every runnable leaf shows an example.
func TestEveryCommandDocumented(t *testing.T) {
	t.Parallel()
	a := &app{getenv: func(string) string { return "" }}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Short == "" {
			t.Errorf("%q has no Short", c.CommandPath())
		}
		if !c.HasSubCommands() && c.Example == "" {
			t.Errorf("%q has no Example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(a.newRootCmd())
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"bogus"},
		{"issue", "bogus"},
		{"agent", "key", "bogus"},
		{"issue", "show"},
		{"issue", "list", "--bogus"},
		{"company", "create", "Acme", "--prefix", ""}, // an empty prefix
		{"issue", "show", "ENG-1", "--run", "nope"},   // not a run id
		{"issue", "update", "ENG-1"},                  // nothing to update
		{"issue", "update", "ENG-1", "--status", "doing"},
		{"issue", "update", "ENG-1", "--assignee", "a1", "--unassign"},
		{"issue", "checkout", "ENG-1", "--expect", "doing"},
		{"issue", "checkout", "ENG-1", "--expect", ""},
		{"issue", "create", "t", "--company", "c1", "--priority", "urgent"},
		{"issue", "list"}, // no company and no agent token
		{"issue", "force-release", "ENG-1"},
		{"run", "finish", "r1", "--status", "running"},
		{"run", "heartbeat"}, // no run id anywhere
		{"run", "list", "--company", "c1", "--status", "lost"},
		{"activity", "--issue", "ENG-1", "--action", "x"},
		{"serve", "--sync", "sometimes"},
		{"serve", "--local-trusted", "--listen", "0.0.0.0:0"},
		{"serve", "--listen", "nonsense"},
		{"serve", "--log-level", "loud"},
		{"serve", "--lease-ttl", "0s"},
		{"serve", "--lease-ttl", "-5s"},
		{"serve", "--sweep-interval", "0s"},
		{"swarm", "--agents", "0"},
		{"swarm", "--agents", "-1"},
		{"swarm", "--slow", "-1s"},
		{"swarm", "--lease-ttl", "0s"},
		{"swarm", "--agent-cmd", "python3 agent.py", "--managed"}, // --managed runs --agent-command
		{"swarm", "--agent-cmd", "python3 agent.py", "--mcp"},
		{"swarm", "--agent-cmd", "  "},
		{"run", "log", "r1", "--offset", "-5"},
		{"serve", "--db-max-conns", "5"}, // SQLite: no pool to size
		{"verify", "--replicas", "2"},    // replicas need PostgreSQL
	} {
		r := runCLI(t, nil, "", args...)
		if r.code != ExitUsage {
			t.Errorf("clasp %v: exit %d, want %d; stderr %q", args, r.code, ExitUsage, r.stderr)
			continue
		}
		if !strings.HasPrefix(r.stderr, "error: ") || !strings.Contains(r.stderr, "--help") {
			t.Errorf("clasp %v: stderr %q, want an error and a pointer to --help", args, r.stderr)
		}
	}
}

func TestConnectionRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	r := runCLI(t, map[string]string{EnvURL: url}, "", "issue", "show", "ENG-1")
	if r.code != ExitError {
		t.Errorf("exit %d, want %d", r.code, ExitError)
	}
	if !strings.Contains(r.stderr, "Is the server running?") {
		t.Errorf("stderr %q does not explain", r.stderr)
	}
}

func TestConflictExitCode(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/agents/me":
			reply(w, 200, &clasp.Agent{ID: "a2", CompanyID: "c1", Name: "b", Status: clasp.AgentActive})
		case "/api/issues/ENG-1/checkout":
			reply(w, 409, map[string]any{"error": "ENG-1 is held by another live run.", "code": "checkout_conflict",
				"details": map[string]any{"issueId": testIssue.ID, "status": "in_progress", "assigneeAgentId": "a1",
					"checkoutRunId": "r1", "executionRunId": "r1", "reason": "held_by_live_run"}})
		case "/api/issues/ENG-1/release":
			reply(w, 409, map[string]any{"error": "Another run holds ENG-1.", "code": "ownership_conflict", "details": map[string]any{"checkoutRunId": "r1"}})
		case "/api/runs/r9/heartbeat":
			reply(w, 409, map[string]any{"error": "Run r9 has ended.", "code": "run_not_live", "details": map[string]any{}})
		default:
			reply(w, 404, map[string]any{"error": "No such thing.", "code": "not_found", "details": map[string]any{}})
		}
	})
	const r2 = "01a23800-0000-7000-8000-000000000002" // a run id is a UUID (checkRunID)
	env := map[string]string{EnvURL: f.URL, EnvToken: "clasp_ak_x", EnvRunID: r2}

	r := runCLI(t, env, "", "issue", "checkout", "ENG-1")
	if r.code != ExitConflict {
		t.Fatalf("checkout: exit %d, want %d; stderr %q", r.code, ExitConflict, r.stderr)
	}
	for _, want := range []string{"error: ENG-1 is held by another live run. (checkout_conflict)", "held by run r1", "reason=held_by_live_run"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("checkout stderr %q lacks %q", r.stderr, want)
		}
	}
	reqs := f.requests()
	last := reqs[len(reqs)-1]
	if last.Auth != "Bearer clasp_ak_x" || last.Run != r2 {
		t.Errorf("checkout sent Authorization %q, run %q; want the env's", last.Auth, last.Run)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(last.Body), &body); err != nil {
		t.Fatal(err)
	}
	wantBody := map[string]any{"agentId": "a2", "expectedStatuses": []any{"todo", "backlog", "blocked"}}
	if diff := cmp.Diff(wantBody, body); diff != "" {
		t.Errorf("checkout body (-want +got):\n%s", diff)
	}

	for _, args := range [][]string{{"issue", "release", "ENG-1"}, {"run", "heartbeat", "r9"}} {
		if r := runCLI(t, env, "", args...); r.code != ExitConflict {
			t.Errorf("clasp %v: exit %d, want %d", args, r.code, ExitConflict)
		}
	}
	r = runCLI(t, env, "", "issue", "show", "ENG-404")
	if r.code != ExitError || r.stderr != "error: No such thing. (not_found)\n" {
		t.Errorf("show missing: exit %d stderr %q; want 1 and the error line", r.code, r.stderr)
	}
}

func TestShowJSONAndTable(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/issues/ENG-1":
			reply(w, 200, testIssue)
		case "/api/companies/" + testCompanyID + "/issues":
			if r.URL.Query().Get("cursor") == "" {
				w.Header().Set("Link", `</api/companies/`+testCompanyID+`/issues?cursor=p2>; rel="next"`)
				reply(w, 200, []*clasp.Issue{testIssue})
				return
			}
			second := *testIssue
			second.Identifier = "ENG-2"
			reply(w, 200, []*clasp.Issue{&second})
		}
	})
	env := map[string]string{EnvURL: f.URL, EnvToken: "clasp_bt_x"}

	r := runCLI(t, env, "", "issue", "show", "ENG-1", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var got clasp.Issue
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("--json output %q: %v", r.stdout, err)
	}
	if diff := cmp.Diff(testIssue, &got); diff != "" {
		t.Errorf("--json issue (-want +got):\n%s", diff)
	}

	r = runCLI(t, env, "", "issue", "show", "ENG-1")
	for _, want := range []string{"Identifier:", "ENG-1", "Checkout run:", "r1", "Checkout epoch:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show output lacks %q:\n%s", want, r.stdout)
		}
	}

	r = runCLI(t, env, "", "issue", "list", "--company", testCompanyID)
	if r.code != 0 || !strings.Contains(r.stdout, "IDENTIFIER") || !strings.Contains(r.stdout, "ENG-1") || strings.Contains(r.stdout, "ENG-2") {
		t.Errorf("list (one page): exit %d stdout:\n%s", r.code, r.stdout)
	}
	if !strings.Contains(r.stderr, "--cursor p2") {
		t.Errorf("list stderr %q does not say how to get the next page", r.stderr)
	}

	r = runCLI(t, env, "", "issue", "list", "--company", testCompanyID, "--all", "--json")
	var all []clasp.Issue
	if err := json.Unmarshal([]byte(r.stdout), &all); err != nil || len(all) != 2 || all[1].Identifier != "ENG-2" {
		t.Errorf("list --all --json: %d issues, err %v; output %q", len(all), err, r.stdout)
	}
}

func TestUpdateSendsOnlyGivenFields(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) { reply(w, 200, testIssue) })
	env := map[string]string{EnvURL: f.URL}
	for _, tc := range []struct {
		args  []string
		stdin string
		want  map[string]any
	}{
		{[]string{"--unassign", "--status", "todo"}, "", map[string]any{"assigneeAgentId": nil, "status": "todo"}},
		{[]string{"--title", ""}, "", map[string]any{"title": ""}},
		{[]string{"--status", "done", "--comment", "-"}, "sha256 abc\n", map[string]any{"status": "done", "comment": "sha256 abc"}},
	} {
		r := runCLI(t, env, tc.stdin, append([]string{"issue", "update", "ENG-1"}, tc.args...)...)
		if r.code != 0 {
			t.Fatalf("update %v: exit %d: %s", tc.args, r.code, r.stderr)
		}
		// The update is the last PATCH (the text output reads names after it).
		var patch recorded
		for _, rq := range f.requests() {
			if rq.Method == http.MethodPatch {
				patch = rq
			}
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(patch.Body), &got); err != nil {
			t.Fatalf("update %v: the PATCH body %q: %v", tc.args, patch.Body, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("update %v body (-want +got):\n%s", tc.args, diff)
		}
	}
}

func TestCompanyFromAgent(t *testing.T) {
	t.Parallel()
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/agents/me":
			reply(w, 200, &clasp.Agent{ID: "a1", CompanyID: "c7"})
		default:
			reply(w, 200, []any{})
		}
	})
	r := runCLI(t, map[string]string{EnvURL: f.URL, EnvToken: "clasp_rt_x"}, "", "issue", "list", "--status", "todo")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	reqs := f.requests()
	if len(reqs) != 2 || reqs[1].Path != "/api/companies/c7/issues" || reqs[1].Query != "status=todo" {
		t.Errorf("requests = %+v, want /agents/me then c7's issues with status=todo", reqs)
	}
}

// TestCLIHintsNameTheMistake: against a real server, each mistake is
// answered by a sentence about that mistake: a --run (or $CLASP_RUN_ID)
// that is no run id says so, before any other flag's complaint; the board
// token with a run says the board never acts in one; an empty or blank
// $CLASP_TOKEN counts as unset and the 401 says where a token comes from;
// company create without --prefix gets one derived from the name.
func TestCLIHintsNameTheMistake(t *testing.T) {
	t.Parallel()
	info, _, _ := startServer(t, t.TempDir())
	board := map[string]string{EnvURL: info.URL, EnvToken: info.BoardToken}
	var co clasp.Company
	mustCLIJSON(t, board, &co, "company", "create", "Delta Works")
	if co.IssuePrefix != "DEL" {
		t.Errorf("company create without --prefix: issuePrefix %q, want DEL (derived from the name)", co.IssuePrefix)
	}
	withRun := map[string]string{EnvURL: info.URL, EnvToken: info.BoardToken, EnvRunID: "nope"}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"--run not a run id", board, []string{"issue", "checkout", "DEL-1", "--run", "nope"}, `--run "nope" is not a run id`},
		{"CLASP_RUN_ID not a run id", withRun, []string{"issue", "checkout", "DEL-1"}, `CLASP_RUN_ID "nope" is not a run id`},
		{"board token with a run", board, []string{"issue", "checkout", "DEL-1", "--run", "01a237fc-4e5d-7723-bfc7-d8c5d3a763e9"}, "the board token never acts in a run (--run"},
	} {
		r := runCLI(t, tc.env, "", tc.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "--agent is required") {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", tc.name, r.code, r.stderr, ExitUsage, tc.want)
		}
	}
	for _, tok := range []string{"", "  "} {
		r := runCLI(t, map[string]string{EnvURL: info.URL, EnvToken: tok}, "", "company", "list")
		if r.code != ExitError || !strings.Contains(r.stderr, "(unauthenticated)") || !strings.Contains(r.stderr, "No token was sent") || !strings.Contains(r.stderr, "board-token") {
			t.Errorf("CLASP_TOKEN=%q: exit %d, stderr %q; want the 401 and a hint saying no token was sent and where one comes from", tok, r.code, r.stderr)
		}
	}
	r := runCLI(t, map[string]string{EnvURL: info.URL, EnvToken: "clasp_bt_wrong"}, "", "company", "list")
	if r.code != ExitError || strings.Contains(r.stderr, "No token was sent") {
		t.Errorf("a wrong token: exit %d, stderr %q; want the 401 without the no-token hint", r.code, r.stderr)
	}
}
