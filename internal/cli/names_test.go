package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// TestTablesNameAgentsAndIssues: issue list, run list, activity and events
// name the agent (alpha) and the issue (ACME-1) a person knows, not their
// UUIDs; --json still carries the ids.
func TestTablesNameAgentsAndIssues(t *testing.T) {
	t.Parallel()
	info, _, _ := startServer(t, filepath.Join(t.TempDir(), "data"))
	board := map[string]string{EnvURL: info.URL, EnvToken: info.BoardToken}
	var co clasp.Company
	mustJSON(t, runCLI(t, board, "", "company", "create", "Acme", "--prefix", "ACME", "--json"), &co)
	var ag clasp.Agent
	mustJSON(t, runCLI(t, board, "", "agent", "create", "alpha", "--company", "ACME", "--json"), &ag)
	var key clasp.APIKey
	mustJSON(t, runCLI(t, board, "", "agent", "key", "create", ag.ID, "--json"), &key)
	agentEnv := map[string]string{EnvURL: info.URL, EnvToken: key.Token}
	var iss clasp.Issue
	mustJSON(t, runCLI(t, board, "", "issue", "create", "Fix the login page", "--company", "ACME", "--assignee", "alpha", "--status", "todo", "--json"), &iss)
	var run clasp.Run
	mustJSON(t, runCLI(t, agentEnv, "", "run", "open", "--json"), &run)
	runEnv := map[string]string{EnvURL: info.URL, EnvToken: run.RunToken}
	if r := runCLI(t, runEnv, "", "issue", "checkout", "ACME-1"); r.code != 0 {
		t.Fatalf("checkout: exit %d: %s", r.code, r.stderr)
	}

	// table runs a command for people and returns its stdout.
	table := func(env map[string]string, args ...string) string {
		t.Helper()
		r := runCLI(t, env, "", args...)
		if r.code != 0 {
			t.Fatalf("clasp %v: exit %d: %s", args, r.code, r.stderr)
		}
		return r.stdout
	}
	// line returns the line of out that contains all of has.
	line := func(what, out string, has ...string) string {
		t.Helper()
	lines:
		for l := range strings.Lines(out) {
			for _, h := range has {
				if !strings.Contains(l, h) {
					continue lines
				}
			}
			return l
		}
		t.Errorf("%s: no line holds all of %q:\n%s", what, has, out)
		return ""
	}
	noIDs := func(what, s string) {
		t.Helper()
		for name, id := range map[string]string{"agent": ag.ID, "issue": iss.ID, "company": co.ID} {
			if strings.Contains(s, id) {
				t.Errorf("%s shows the %s's id %s:\n%s", what, name, id, s)
			}
		}
	}

	out := table(board, "issue", "list", "--company", "ACME")
	noIDs("issue list", line("issue list", out, "ACME-1", "alpha", "Fix the login page"))

	out = table(board, "run", "list", "--company", "ACME")
	noIDs("run list", line("run list", out, run.ID, "alpha", "ACME-1"))

	// The activity rows' details may carry ids; the actor and entity
	// columns name them.
	for _, env := range []map[string]string{board, agentEnv} {
		out = table(env, "activity", "--company", "ACME")
		l := line("activity", out, "agent alpha", clasp.ActionIssueCheckedOut, "issue ACME-1")
		noIDs("activity actor and entity", columns(l, 5))
		l = line("activity", out, clasp.ActionAgentCreated, "agent alpha")
		noIDs("activity actor and entity", columns(l, 5))
	}
	out = table(board, "activity", "--company", "ACME")
	line("activity", out, clasp.ActionCompanyCreated, "company ACME")
	out = table(board, "activity", "--issue", "ACME-1")
	line("issue activity", out, "agent alpha", clasp.ActionIssueCheckedOut, "issue ACME-1")
	line("issue activity", out, clasp.ActionIssueCreated, "issue ACME-1")

	out = table(board, "events", "--company", "ACME", "--after", "0", "--action", clasp.ActionIssueCheckedOut, "--count", "1")
	l := line("events", out, "agent alpha", clasp.ActionIssueCheckedOut, "issue ACME-1", "run="+run.ID)
	noIDs("events actor and entity", columns(l, 6))
	out = table(board, "events", "--after", "0", "--count", "3") // the company's creation, alpha's and its key's
	line("events", out, clasp.ActionAgentCreated, "agent alpha")
	line("events", out, clasp.ActionCompanyCreated, "company ACME")
	noIDs("events of company and agent", out)

	// The board acting with a named operator token is named by it: for an
	// admin, who lists every token, and for an operator, who knows itself.
	var alice clasp.OperatorToken
	mustJSON(t, runCLI(t, board, "", "operator", "token", "create", "alice", "--role", "operator", "--json"), &alice)
	aliceEnv := map[string]string{EnvURL: info.URL, EnvToken: alice.Token}
	if r := runCLI(t, aliceEnv, "", "issue", "create", "By alice", "--company", "ACME"); r.code != 0 {
		t.Fatalf("issue create as alice: exit %d: %s", r.code, r.stderr)
	}
	for _, env := range []map[string]string{board, aliceEnv} {
		l := line("activity", table(env, "activity", "--issue", "ACME-2"), "board alice", clasp.ActionIssueCreated, "issue ACME-2")
		if strings.Contains(l, alice.ID) {
			t.Errorf("activity shows the operator token's id %s:\n%s", alice.ID, l)
		}
	}

	// Views of one thing name what they point at, with its id beside it.
	out = table(board, "issue", "show", "ACME-1")
	line("issue show", out, "Assignee", "alpha ("+ag.ID+")")
	line("issue show", out, "Company", "ACME ("+co.ID+")")
	// A new child names its parent by identifier, as issue show does.
	out = table(board, "issue", "create", "Child of ACME-1", "--company", "ACME", "--parent", "ACME-1")
	noIDs("issue create's parent", line("issue create", out, "Parent", "ACME-1"))
	out = table(board, "run", "show", run.ID)
	line("run show", out, "Agent", "alpha ("+ag.ID+")")
	line("run show", out, "Holds", "ACME-1")
	line("run show", out, "Company", "ACME ("+co.ID+")")
	out = table(board, "agent", "show", ag.ID)
	line("agent show", out, "Company", "ACME ("+co.ID+")")
	if r := runCLI(t, runEnv, "", "issue", "comment", "ACME-1", "looking at it"); r.code != 0 {
		t.Fatalf("comment: exit %d: %s", r.code, r.stderr)
	} else {
		line("issue comment", r.stdout, "Author", "agent alpha ("+ag.ID+")")
		line("issue comment", r.stdout, "Issue", "ACME-1 ("+iss.ID+")")
	}
	// An agent may not list companies; its views name its company by the
	// prefix of the company's issues.
	out = table(agentEnv, "run", "show", run.ID)
	line("run show as the agent", out, "Company", "ACME ("+co.ID+")")
	out = table(agentEnv, "agent", "show", ag.ID)
	line("agent show as the agent", out, "Company", "ACME ("+co.ID+")")
	out = table(agentEnv, "issue", "show", "ACME-1")
	line("issue show as the agent", out, "Company", "ACME ("+co.ID+")")
	line("activity as the agent", table(agentEnv, "activity", "--company", "ACME"), clasp.ActionCompanyCreated, "company ACME")
	out = table(board, "issue", "comments", "ACME-1")
	noIDs("issue comments", line("issue comments", out, "agent alpha"))

	// --json is the API's answer, ids and all.
	var issues []clasp.Issue
	mustJSON(t, runCLI(t, board, "", "issue", "list", "--company", "ACME", "--json"), &issues)
	if len(issues) != 3 || issues[2].ID != iss.ID || issues[2].AssigneeAgentID == nil || *issues[2].AssigneeAgentID != ag.ID {
		t.Errorf("issue list --json: %+v, want ACME-1 assigned to %s", issues, ag.ID)
	}
	var runs []clasp.Run
	mustJSON(t, runCLI(t, board, "", "run", "list", "--company", "ACME", "--json"), &runs)
	if len(runs) != 1 || runs[0].AgentID != ag.ID {
		t.Errorf("run list --json: %+v, want one run of %s", runs, ag.ID)
	}
	var acts []clasp.Activity
	mustJSON(t, runCLI(t, board, "", "activity", "--issue", "ACME-1", "--json"), &acts)
	checkedOut := false
	for _, ac := range acts {
		checkedOut = checkedOut || ac.Action == clasp.ActionIssueCheckedOut && ac.ActorID == ag.ID && ac.EntityID == iss.ID
	}
	if !checkedOut {
		t.Errorf("activity --json: %+v, want issue.checked_out by %s of %s", acts, ag.ID, iss.ID)
	}
	ev := runCLI(t, board, "", "events", "--company", "ACME", "--after", "0", "--action", clasp.ActionIssueCheckedOut, "--count", "1", "--json")
	var a clasp.Activity
	if err := json.Unmarshal([]byte(ev.stdout), &a); err != nil || a.ActorID != ag.ID || a.EntityID != iss.ID {
		t.Errorf("events --json: %q (%v), want the ids of %s and %s", ev.stdout, err, ag.ID, iss.ID)
	}
}

// TestNamesRefetchAgents: a long-lived names lists a company's agents
// again for an unknown agent id, at most once per refetch period; a
// names of one command lists them once.
func TestNamesRefetchAgents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	defer hc.CloseIdleConnections()
	a := &app{getenv: func(k string) string { return f.boardEnv[k] }, hc: hc}
	ctx := context.Background()
	now := time.Now()
	n := a.names(agentRefetchEvery)
	n.now = func() time.Time { return now }
	once := a.names(0)
	n.learnAgents(ctx, f.companyID, "")
	once.learnAgents(ctx, f.companyID, "")
	if got := n.agent(f.agent); got != "builder" {
		t.Fatalf("agent %s named %q, want builder", f.agent, got)
	}
	var late clasp.Agent
	mustJSON(t, runCLI(t, f.boardEnv, "", "agent", "create", "late", "--company", f.companyID, "--json"), &late)
	n.learnAgents(ctx, f.companyID, late.ID)
	if got := n.agent(late.ID); got != late.ID {
		t.Errorf("agent created since, before the refetch period: named %q, want its id", got)
	}
	now = now.Add(agentRefetchEvery)
	n.learnAgents(ctx, f.companyID, late.ID)
	if got := n.agent(late.ID); got != "late" {
		t.Errorf("agent created since, after the refetch period: named %q, want late", got)
	}
	once.learnAgents(ctx, f.companyID, late.ID)
	if got := once.agent(late.ID); got != late.ID {
		t.Errorf("a one-command names named an agent created since its list %q, want its id", got)
	}
	unknown := "01a23f3b-d238-7443-9ebb-23c7ba6fd855"
	n.learnIssue(ctx, f.companyID, unknown)
	if got := n.issue(unknown); got != unknown {
		t.Errorf("unknown issue named %q, want its id", got)
	}
}

// TestNamesListIssuesPastLookups: past issueLookupsBeforeList unknown
// issues of one company, a names lists the company's issues instead of
// looking each up, both for a table's rows at once and for a stream's
// rows one at a time, and names every one of them.
func TestNamesListIssuesPastLookups(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const count = 3*issueLookupsBeforeList + 5
	c := client.New(f.info.URL, client.WithToken(f.board))
	ids := make([]string, count)
	idents := map[string]string{}
	for k := range ids {
		iss, err := c.IssueCreate(context.Background(), f.companyID, client.IssueCreateRequest{Title: fmt.Sprintf("issue %d", k)})
		if err != nil {
			t.Fatal(err)
		}
		ids[k], idents[iss.ID] = iss.ID, iss.Identifier
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		learn     func(n *names)
		wantGets  int
		wantLists int
	}{
		{"rows at once", func(n *names) { n.learnIssues(ctx, f.companyID, ids) }, 0, 1},
		{"rows one at a time", func(n *names) {
			for _, id := range ids {
				n.learnIssues(ctx, f.companyID, []string{id})
			}
		}, issueLookupsBeforeList, 1},
		{"a few rows", func(n *names) { n.learnIssues(ctx, f.companyID, ids[:issueLookupsBeforeList]) }, issueLookupsBeforeList, 0},
		// Other companies' rows used up the look-ups: this company's are
		// still named, by a list of its issues.
		{"look-ups used up", func(n *names) {
			n.issueLookups = maxIssueLookups
			for _, id := range ids {
				n.learnIssues(ctx, f.companyID, []string{id})
			}
		}, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &countingTransport{base: http.DefaultTransport.(*http.Transport).Clone()}
			hc := &http.Client{Transport: rt}
			defer hc.CloseIdleConnections()
			a := &app{getenv: func(k string) string { return f.boardEnv[k] }, hc: hc}
			n := a.names(0)
			tc.learn(n)
			named := 0
			for _, id := range ids {
				if got := n.issue(id); got == idents[id] {
					named++
				} else if got != id {
					t.Errorf("issue %s named %q, want %s", id, got, idents[id])
				}
			}
			wantNamed := count
			if tc.wantLists == 0 {
				wantNamed = tc.wantGets
			}
			if named != wantNamed {
				t.Errorf("%d issues named, want %d", named, wantNamed)
			}
			gets, lists := rt.count("GET /api/issues/"), rt.count("GET /api/companies/"+f.companyID+"/issues")
			if gets != tc.wantGets || lists != tc.wantLists {
				t.Errorf("%d look-ups and %d lists of the company's issues, want %d and %d", gets, lists, tc.wantGets, tc.wantLists)
			}
		})
	}
}

// countingTransport counts the requests it carries by method and path.
type countingTransport struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen []string // "GET /api/issues/…"
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.seen = append(c.seen, r.Method+" "+r.URL.Path)
	c.mu.Unlock()
	return c.base.RoundTrip(r)
}

// count returns how many requests began with prefix.
func (c *countingTransport) count(prefix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.seen {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

// columns returns the first k space-separated fields of line l.
func columns(l string, k int) string {
	f := strings.Fields(l)
	return strings.Join(f[:min(k, len(f))], " ")
}

// TestNamesFromCreationRows: an agent.created or company.created row names
// its agent or company by its own details, so a live stream names an agent
// created after the company's agents were listed, and an agent's
// credential, which may not list companies, sees its company's prefix.
func TestNamesFromCreationRows(t *testing.T) {
	t.Parallel()
	n := &names{agents: map[string]string{"a-old": "kept"}, companies: map[string]string{}, issues: map[string]string{},
		issueTried: map[string]bool{}, lookupsSince: map[string]int{}, issuesListed: map[string]time.Time{}, prefixTried: map[string]bool{}}
	n.learnActivity(context.Background(), []*clasp.Activity{
		{ID: 1, CompanyID: "co", Action: clasp.ActionCompanyCreated, EntityType: "company", EntityID: "co", Details: json.RawMessage(`{"name":"Acme","issuePrefix":"ACME"}`)},
		{ID: 2, CompanyID: "co", Action: clasp.ActionAgentCreated, EntityType: "agent", EntityID: "a-new", Details: json.RawMessage(`{"name":"fasttwo","role":null}`)},
		{ID: 3, CompanyID: "co", Action: clasp.ActionAgentCreated, EntityType: "agent", EntityID: "a-old", Details: json.RawMessage(`{"name":"renamed since"}`)},
		{ID: 4, CompanyID: "co", Action: clasp.ActionAgentCreated, EntityType: "agent", EntityID: "a-bad", Details: json.RawMessage(`"not an object"`)},
	})
	for id, want := range map[string]string{"a-new": "fasttwo", "a-old": "kept", "a-bad": "a-bad"} {
		if got := n.agent(id); got != want {
			t.Errorf("agent %s named %q, want %q", id, got, want)
		}
	}
	if got := n.company("co"); got != "ACME" {
		t.Errorf("company named %q, want ACME", got)
	}
}

// TestAgentNamesSharedByCompanies: an agent name two companies share is no
// ambiguity where the company is known (the issue's, for issue update
// --assignee), and where it is ambiguous, or names no agent, the refusal
// names the companies by prefix.
func TestAgentNamesSharedByCompanies(t *testing.T) {
	t.Parallel()
	info, _, _ := startServer(t, filepath.Join(t.TempDir(), "data"))
	board := map[string]string{EnvURL: info.URL, EnvToken: info.BoardToken}
	cos := map[string]clasp.Company{}
	builders := map[string]clasp.Agent{}
	for _, prefix := range []string{"ACME", "BETA"} {
		var co clasp.Company
		mustJSON(t, runCLI(t, board, "", "company", "create", prefix+" Corp", "--prefix", prefix, "--json"), &co)
		var ag clasp.Agent
		mustJSON(t, runCLI(t, board, "", "agent", "create", "builder", "--company", prefix, "--json"), &ag)
		cos[prefix], builders[prefix] = co, ag
	}
	if r := runCLI(t, board, "", "issue", "create", "Ship it", "--company", "BETA"); r.code != 0 {
		t.Fatalf("issue create: exit %d: %s", r.code, r.stderr)
	}
	var iss clasp.Issue
	mustJSON(t, runCLI(t, board, "", "issue", "update", "BETA-1", "--assignee", "builder", "--json"), &iss)
	if iss.AssigneeAgentID == nil || *iss.AssigneeAgentID != builders["BETA"].ID {
		t.Errorf("issue update BETA-1 --assignee builder assigned %v, want BETA's builder %s", iss.AssigneeAgentID, builders["BETA"].ID)
	}

	r := runCLI(t, board, "", "agent", "show", "builder")
	if r.code != ExitUsage || !strings.Contains(r.stderr, builders["ACME"].ID+" in company ACME") || !strings.Contains(r.stderr, builders["BETA"].ID+" in company BETA") {
		t.Errorf("agent show builder: exit %d, stderr:\n%s\nwant a usage error naming both builders by company prefix", r.code, r.stderr)
	}
	r = runCLI(t, board, "", "run", "list", "--company", "ACME", "--agent", "nobody")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "no agent has that name in company ACME") {
		t.Errorf("run list --agent nobody: exit %d, stderr:\n%s\nwant a usage error naming company ACME", r.code, r.stderr)
	}
	for prefix, co := range cos {
		if strings.Contains(r.stderr, co.ID) {
			t.Errorf("the refusal shows company %s's id:\n%s", prefix, r.stderr)
		}
	}

	// An operator token's scope is named by prefix too.
	if r := runCLI(t, board, "", "operator", "token", "create", "beta-ops", "--role", "operator", "--company", "BETA"); r.code != 0 ||
		!strings.Contains(r.stdout, "BETA ("+cos["BETA"].ID+")") {
		t.Errorf("operator token create: exit %d, stdout:\n%s\nwant the scope as BETA (<id>)", r.code, r.stdout)
	}
	out := runCLI(t, board, "", "operator", "token", "list").stdout
	if l := lineWith(out, "beta-ops"); !strings.Contains(l, " BETA ") || strings.Contains(l, cos["BETA"].ID) {
		t.Errorf("operator token list: the row of beta-ops is %q, want its scope as BETA", l)
	}
}

// lineWith returns the first line of out that holds s, "" when none does.
func lineWith(out, s string) string {
	for l := range strings.Lines(out) {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
