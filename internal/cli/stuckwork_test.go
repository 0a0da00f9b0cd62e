package cli

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
)

// TestAbandonedMarked: issue list and agent inbox mark an in_progress
// issue that no live run holds (no lock, or a lock of a run that ended)
// as abandoned, and no other (a queued holder is about to start).
func TestAbandonedMarked(t *testing.T) {
	t.Parallel()
	at := func(ident string, st clasp.IssueStatus, run string) *clasp.Issue {
		iss := *testIssue
		iss.ID, iss.Identifier, iss.Status, iss.CheckoutRunID, iss.ExecutionRunID = "id-"+ident, ident, st, nil, nil
		if run != "" {
			iss.CheckoutRunID, iss.ExecutionRunID = ptr(run), ptr(run)
		}
		return &iss
	}
	lease := time.Now().Add(time.Hour)
	queued := at("ENG-6", clasp.IssueInProgress, "")
	queued.ExecutionRunID = ptr("queued") // a wake's run, about to start
	f := newFakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/companies/" + testCompanyID + "/issues":
			reply(w, 200, []*clasp.Issue{at("ENG-1", clasp.IssueInProgress, ""), at("ENG-2", clasp.IssueInProgress, "live"),
				at("ENG-3", clasp.IssueInProgress, "ended"), at("ENG-4", clasp.IssueTodo, ""), queued})
		case "/api/runs/live":
			reply(w, 200, &clasp.Run{ID: "live", Status: clasp.RunRunning, LeaseExpiresAt: &lease})
		case "/api/runs/queued":
			reply(w, 200, &clasp.Run{ID: "queued", Status: clasp.RunQueued})
		case "/api/runs/ended":
			reply(w, 200, &clasp.Run{ID: "ended", Status: clasp.RunSucceeded})
		case "/api/agents/me/inbox-lite":
			reply(w, 200, []*clasp.InboxItem{
				{ID: "i1", Identifier: "ENG-1", Status: clasp.IssueInProgress},
				{ID: "i2", Identifier: "ENG-2", Status: clasp.IssueInProgress, ActiveRun: &clasp.ActiveRun{ID: "live", Status: clasp.RunRunning}},
				{ID: "i5", Identifier: "ENG-5", Status: clasp.IssueTodo},
				{ID: "i6", Identifier: "ENG-6", Status: clasp.IssueInProgress, ActiveRun: &clasp.ActiveRun{ID: "queued", Status: clasp.RunQueued}},
				{ID: "i7", Identifier: "ENG-7", Status: clasp.IssueInProgress, ActiveRun: &clasp.ActiveRun{ID: "ended", Status: clasp.RunFailed}},
			})
		default:
			reply(w, 404, map[string]string{"error": "no", "code": "not_found"})
		}
	})
	env := map[string]string{EnvURL: f.URL, EnvToken: "clasp_bt_x"}
	wantMarks := func(what, out string, marked map[string]bool) {
		t.Helper()
		for ident, want := range marked {
			var line string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, ident+" ") {
					line = l
				}
			}
			if got := strings.Contains(line, "in_progress (abandoned)"); got != want || line == "" {
				t.Errorf("%s: %s marked abandoned=%v, want %v:\n%s", what, ident, got, want, out)
			}
		}
	}
	r := runCLI(t, env, "", "issue", "list", "--company", testCompanyID)
	if r.code != 0 {
		t.Fatalf("issue list: exit %d: %s", r.code, r.stderr)
	}
	wantMarks("issue list", r.stdout, map[string]bool{"ENG-1": true, "ENG-2": false, "ENG-3": true, "ENG-4": false, "ENG-6": false})
	r = runCLI(t, env, "", "agent", "inbox")
	if r.code != 0 {
		t.Fatalf("agent inbox: exit %d: %s", r.code, r.stderr)
	}
	wantMarks("agent inbox", r.stdout, map[string]bool{"ENG-1": true, "ENG-2": false, "ENG-5": false, "ENG-6": false, "ENG-7": true})
}

// TestRunListShowsHeldIssues: run list names, as a run's issue, the issue
// it holds, also when the run was not woken for any issue.
func TestRunListShowsHeldIssues(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	run := f.todoAndRun(t, "Held")
	runEnv := map[string]string{EnvURL: f.info.URL, EnvToken: run.RunToken}
	if r := runCLI(t, runEnv, "", "issue", "checkout", "ACME-1"); r.code != 0 {
		t.Fatalf("checkout: %d %s", r.code, r.stderr)
	}
	r := runCLI(t, f.boardEnv, "", "run", "list", "--company", "ACME")
	if r.code != 0 {
		t.Fatalf("run list: %d %s", r.code, r.stderr)
	}
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, run.ID) {
			if !strings.Contains(l, "ACME-1") {
				t.Errorf("run list row of the run holding ACME-1 does not name it:\n%s", r.stdout)
			}
			return
		}
	}
	t.Errorf("run list has no row for run %s:\n%s", run.ID, r.stdout)
}
