package crashtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// workerScript is the process of a server-managed agent that works: it
// checks its issue out in its run, moves it to done, and finishes the run
// succeeded.
const workerScript = `set -e
api() { curl -sf -X "$1" -H "Authorization: Bearer $CLASP_API_KEY" -H "X-Clasp-Run-Id: $CLASP_RUN_ID" \
  -H 'Content-Type: application/json' -d "$3" "$CLASP_API_URL$2" >/dev/null; }
api POST "/api/issues/$CLASP_ISSUE_ID/checkout" "{\"agentId\":\"$AGENT\",\"expectedStatuses\":[\"todo\"]}"
api PATCH "/api/issues/$CLASP_ISSUE_ID" '{"status":"done"}'
api POST "/api/runs/$CLASP_RUN_ID/finish" '{"status":"succeeded"}'`

// TestEscalation_AlwaysCrashingAgent (RULES.md E1, E3), with the real
// binary: a server-managed agent whose process always exits non-zero is
// woken for one issue; after exactly 3 failed runs the issue is blocked,
// with one comment naming each run, one issue.escalated row and one
// webhook delivery of it, and a further wake is refused and starts nothing;
// a working agent beside it finishes every one of its issues meanwhile.
func TestEscalation_AlwaysCrashingAgent(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			rc := newHookReceiver(t, false, nil)
			log := &syncBuffer{}
			srv := startServer(t, append(serveArgs(t, backend, "clasp_escalate"), "--webhook-allow-private", "--webhook-retry-base", "10ms"), log)
			board := client.New(srv.URL(), client.WithToken(srv.BoardToken()), client.WithHTTPClient(newHTTPClient()))
			co, err := board.CompanyCreate(ctx, client.CompanyCreateRequest{Name: "escalation", IssuePrefix: randomPrefix("ES")})
			if err != nil {
				t.Fatal(err)
			}
			w, err := board.WebhookCreate(ctx, co.ID, client.WebhookCreateRequest{URL: rc.srv.URL, Events: []string{"run.finished", "issue.escalated"}})
			if err != nil {
				t.Fatal(err)
			}
			a, err := board.AgentCreate(ctx, co.ID, client.AgentCreateRequest{Name: "crasher", Role: "crash"})
			if err != nil {
				t.Fatal(err)
			}
			cfg := &clasp.AdapterConfig{Type: clasp.AdapterProcess, Command: "/bin/sh",
				Args: []string{"-c", "echo 'panic: cannot parse the task' >&2; exit 3"}, Heartbeat: clasp.HeartbeatConfig{Enabled: true, MaxConcurrentRuns: 1}}
			if _, err := board.AgentSetAdapter(ctx, a.ID, cfg); err != nil {
				t.Fatal(err)
			}
			iss, err := board.IssueCreate(ctx, co.ID, client.IssueCreateRequest{Title: "always crashes", Status: clasp.IssueTodo, AssigneeAgentID: a.ID})
			if err != nil {
				t.Fatal(err)
			}
			// A worker agent beside it completes its own issues meanwhile.
			worker, err := board.AgentCreate(ctx, co.ID, client.AgentCreateRequest{Name: "worker", Role: "work"})
			if err != nil {
				t.Fatal(err)
			}
			wcfg := &clasp.AdapterConfig{Type: clasp.AdapterProcess, Command: "/bin/sh", Args: []string{"-c", workerScript},
				Env: map[string]string{"AGENT": worker.ID}, Heartbeat: clasp.HeartbeatConfig{Enabled: true, MaxConcurrentRuns: 1}}
			if _, err := board.AgentSetAdapter(ctx, worker.ID, wcfg); err != nil {
				t.Fatal(err)
			}
			var workerIssues, workerRuns []string
			for i := range 4 {
				wi, err := board.IssueCreate(ctx, co.ID, client.IssueCreateRequest{Title: fmt.Sprintf("works %d", i), Status: clasp.IssueTodo, AssigneeAgentID: worker.ID})
				if err != nil {
					t.Fatal(err)
				}
				wk, err := board.AgentWake(ctx, worker.ID, client.WakeRequest{IssueID: wi.ID})
				if err != nil || wk.Status != "queued" || wk.RunID == nil {
					t.Fatalf("wake the worker for %s: %+v, %v", wi.Identifier, wk, err)
				}
				workerIssues, workerRuns = append(workerIssues, wi.ID), append(workerRuns, *wk.RunID)
			}
			// Deliveries arrive in any order across entities: keep what
			// arrived until it is waited for.
			finished := map[string]string{} // run id -> its status
			escalations := 0
			// take reads one delivery: a run's end, or the escalation.
			take := func() {
				c := rc.next(t, log)
				var ev struct {
					Activity clasp.Activity `json:"activity"`
				}
				if err := json.Unmarshal(c.body, &ev); err != nil {
					t.Fatal(err)
				}
				switch c.event {
				case clasp.ActionRunFinished:
					var d struct {
						Status string `json:"status"`
					}
					_ = json.Unmarshal(ev.Activity.Details, &d)
					finished[ev.Activity.EntityID] = d.Status
				case clasp.ActionIssueEscalated:
					escalations++
				}
			}
			waitRun := func(id string) string {
				for finished[id] == "" {
					take()
				}
				return finished[id]
			}
			var runIDs []string
			for i := range 3 {
				wk, err := board.AgentWake(ctx, a.ID, client.WakeRequest{IssueID: iss.ID})
				if err != nil || wk.Status != "queued" || wk.RunID == nil {
					t.Fatalf("wake %d: %+v, %v; want queued", i+1, wk, err)
				}
				runIDs = append(runIDs, *wk.RunID)
				if st := waitRun(*wk.RunID); st != string(clasp.RunFailed) {
					t.Fatalf("the crashing run ended %s", st)
				}
			}
			for escalations == 0 {
				take()
			}
			for k, id := range workerRuns {
				if st := waitRun(id); st != string(clasp.RunSucceeded) {
					t.Errorf("the worker's run for its issue %d ended %s", k, st)
				}
			}
			for _, id := range workerIssues {
				wi, err := board.IssueGet(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if wi.Status != clasp.IssueDone {
					t.Errorf("the worker's issue %s is %s beside the escalated one, want done", wi.Identifier, wi.Status)
				}
			}
			got, err := board.IssueGet(ctx, iss.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != clasp.IssueBlocked || got.CheckoutRunID != nil || got.ExecutionRunID != nil {
				t.Errorf("issue after 3 crashes: %s, locks %v %v; want blocked and unlocked", got.Status, got.CheckoutRunID, got.ExecutionRunID)
			}
			acts, err := allActivity(ctx, board, co.ID, clasp.ActionIssueEscalated)
			if err != nil {
				t.Fatal(err)
			}
			if len(acts) != 1 {
				t.Errorf("%d issue.escalated rows, want 1", len(acts))
			}
			cs, err := board.CommentList(ctx, iss.ID, client.CommentListParams{})
			if err != nil {
				t.Fatal(err)
			}
			if len(cs) != 1 {
				t.Fatalf("%d comments, want 1", len(cs))
			}
			for _, id := range runIDs {
				if !strings.Contains(cs[0].Body, id) {
					t.Errorf("the comment does not name run %s:\n%s", id, cs[0].Body)
				}
			}
			page, err := board.WebhookDeliveries(ctx, w.ID, 1000)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, d := range page.Items {
				if d.Event == clasp.ActionIssueEscalated {
					n++
				}
			}
			if n != 1 || escalations != 1 {
				t.Errorf("issue.escalated: %d deliveries in the log, %d received; want 1 and 1", n, escalations)
			}
			// Not woken again.
			_, err = board.AgentWake(ctx, a.ID, client.WakeRequest{IssueID: iss.ID})
			if ce := clasp.AsError(err); ce == nil || ce.Status != http.StatusUnprocessableEntity || ce.Details["reason"] != "issue_escalated" {
				t.Errorf("wake after escalation: %v, want 422 with reason issue_escalated", err)
			}
			runs, err := board.RunList(ctx, co.ID, client.RunListParams{Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			crashed := 0
			for _, r := range runs.Items {
				if r.AgentID == a.ID {
					crashed++
				}
			}
			if crashed != 3 {
				t.Errorf("%d runs of the crashing agent, want the 3 that crashed", crashed)
			}
		})
	}
}
