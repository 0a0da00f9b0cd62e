package httpapi

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/google/go-cmp/cmp"
)

// Scenario tests (RULES.md, Scenarios) over real HTTP (a loopback listener, a
// SQLite file). Each is named after its scenario.

func TestS01_CheckoutUnassignedTodo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("SA")
	i1 := b.issue(w.c.ID, map[string]any{"status": "todo"})
	res := b.checkout(i1.ID, w.ka, w.ra1.ID, w.a.ID)
	if res.status != http.StatusOK {
		t.Fatalf("checkout: %d %s", res.status, res.body)
	}
	got := decode[clasp.Issue](t, res)
	if got.Status != clasp.IssueInProgress || got.AssigneeAgentID == nil || *got.AssigneeAgentID != w.a.ID ||
		got.CheckoutRunID == nil || *got.CheckoutRunID != w.ra1.ID || got.ExecutionRunID == nil || *got.ExecutionRunID != w.ra1.ID ||
		got.CheckoutEpoch != 1 {
		t.Errorf("checked out issue = %s, want in_progress, assignee A, both locks R1, epoch 1", res.body)
	}
	sameIssue(t, got, b.getIssue(i1.ID))
	if n := countAction(b.activity(i1.ID), clasp.ActionIssueCheckedOut); n != 1 {
		t.Errorf("%d issue.checked_out rows, want 1", n)
	}
}

func TestS02_SameRunCheckoutIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("SB")
	i1 := b.issue(w.c.ID, map[string]any{"status": "todo"})
	first := b.checkout(i1.ID, w.ka, w.ra1.ID, w.a.ID)
	if first.status != http.StatusOK {
		t.Fatalf("first checkout: %d %s", first.status, first.body)
	}
	want := decode[clasp.Issue](t, first)
	for i := 0; i < 3; i++ {
		res := b.checkout(i1.ID, w.ka, w.ra1.ID, w.a.ID, clasp.IssueTodo, clasp.IssueBacklog, clasp.IssueBlocked, clasp.IssueInReview)
		if res.status != http.StatusOK {
			t.Fatalf("retry %d: %d %s", i, res.status, res.body)
		}
		if diff := cmp.Diff(want, decode[clasp.Issue](t, res)); diff != "" {
			t.Errorf("retry %d body differs (-first +retry):\n%s", i, diff)
		}
	}
	sameIssue(t, want, b.getIssue(i1.ID))
	if n := countAction(b.activity(i1.ID), clasp.ActionIssueCheckedOut); n != 1 {
		t.Errorf("%d issue.checked_out rows, want 1", n)
	}
}

func TestS03_ConcurrentCheckoutOneWinner(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("SC")
	const rounds = 100
	for round := 0; round < rounds; round++ {
		iss := b.issue(w.c.ID, map[string]any{"status": "todo", "assigneeAgentId": w.a.ID})
		runs := []*clasp.Run{w.ra1, w.ra2}
		results := make([]*resp, len(runs))
		var start, done sync.WaitGroup
		start.Add(1)
		for i, r := range runs {
			done.Add(1)
			go func() {
				defer done.Done()
				start.Wait()
				results[i] = b.checkout(iss.ID, w.ka, r.ID, w.a.ID)
			}()
		}
		start.Done()
		done.Wait()
		winner := ""
		for i, res := range results {
			switch res.status {
			case http.StatusOK:
				if winner != "" {
					t.Fatalf("round %d: two winners", round)
				}
				winner = runs[i].ID
			case http.StatusConflict:
			default:
				t.Fatalf("round %d: status %d %s", round, res.status, res.body)
			}
		}
		if winner == "" {
			t.Fatalf("round %d: no winner", round)
		}
		for i, res := range results {
			if runs[i].ID == winner {
				continue
			}
			e := wantErr(t, res, http.StatusConflict, clasp.CodeCheckoutConflict, "")
			if e.Details["checkoutRunId"] != winner {
				t.Errorf("round %d: conflict names %v, want winner %s", round, e.Details["checkoutRunId"], winner)
			}
		}
		if got := b.getIssue(iss.ID); got.CheckoutRunID == nil || *got.CheckoutRunID != winner {
			t.Errorf("round %d: row holder %v, want %s", round, got.CheckoutRunID, winner)
		}
	}
}

func TestS05_HeldByLiveRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("SE")
	i1 := b.issue(w.c.ID, map[string]any{"status": "todo"})
	if res := b.checkout(i1.ID, w.ka, w.ra1.ID, w.a.ID); res.status != http.StatusOK {
		t.Fatalf("R1 checkout: %d %s", res.status, res.body)
	}
	before := b.getIssue(i1.ID)
	e := wantErr(t, b.checkout(i1.ID, w.ka, w.ra2.ID, w.a.ID), http.StatusConflict, clasp.CodeCheckoutConflict, "")
	if e.Details["reason"] != clasp.ReasonHeldByLiveRun || e.Details["checkoutRunId"] != w.ra1.ID {
		t.Errorf("conflict details %v, want reason held_by_live_run naming R1", e.Details)
	}
	wantErr(t, b.do("PATCH", "/api/issues/"+i1.ID, req{token: w.ka, run: w.ra2.ID, body: map[string]any{"title": "stolen"}}),
		http.StatusConflict, clasp.CodeOwnershipConflict, "")
	wantErr(t, b.do("POST", "/api/issues/"+i1.ID+"/release", req{token: w.ka, run: w.ra2.ID, body: map[string]any{}}),
		http.StatusConflict, clasp.CodeOwnershipConflict, "")
	sameIssue(t, before, b.getIssue(i1.ID))
	var got clasp.Issue
	b.must(http.StatusOK, "PATCH", "/api/issues/"+i1.ID, req{token: w.ka, run: w.ra1.ID, body: map[string]any{"title": "mine"}}, &got)
	if got.Title != "mine" || got.CheckoutRunID == nil || *got.CheckoutRunID != w.ra1.ID {
		t.Errorf("holder's PATCH gave %+v", got)
	}
}

func TestS09_AssignedToOtherAgent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("SI")
	i1 := b.issue(w.c.ID, map[string]any{"status": "todo", "assigneeAgentId": w.a.ID})
	e := wantErr(t, b.checkout(i1.ID, w.kb, w.rb.ID, w.b.ID), http.StatusConflict, clasp.CodeCheckoutConflict, "")
	if e.Details["reason"] != clasp.ReasonAssignedToOtherAgent {
		t.Errorf("reason %v, want assigned_to_other_agent", e.Details["reason"])
	}
	wantErr(t, b.checkout(i1.ID, w.kb, w.rb.ID, w.a.ID), http.StatusForbidden, clasp.CodeAgentMismatch, "agentId")
	sameIssue(t, i1, b.getIssue(i1.ID))
}

func TestS10_CheckoutBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("SJ")
	i1 := b.issue(w.c.ID, map[string]any{"status": "done"})
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
		code   string
		field  string
	}{
		{"ExpectDone", map[string]any{"agentId": w.a.ID, "expectedStatuses": []string{"done"}}, 422, clasp.CodePreconditionFailed, "expectedStatuses"},
		{"ExpectCancelled", map[string]any{"agentId": w.a.ID, "expectedStatuses": []string{"cancelled"}}, 422, clasp.CodePreconditionFailed, "expectedStatuses"},
		{"EmptyStatuses", map[string]any{"agentId": w.a.ID, "expectedStatuses": []string{}}, 400, clasp.CodeInvalidRequest, "expectedStatuses"},
		{"UnknownStatus", map[string]any{"agentId": w.a.ID, "expectedStatuses": []string{"doing"}}, 400, clasp.CodeInvalidRequest, "expectedStatuses"},
		{"MissingStatuses", map[string]any{"agentId": w.a.ID}, 400, clasp.CodeInvalidRequest, "expectedStatuses"},
		{"NullStatuses", map[string]any{"agentId": w.a.ID, "expectedStatuses": nil}, 400, clasp.CodeInvalidRequest, "expectedStatuses"},
		{"BadAgentID", map[string]any{"agentId": "x", "expectedStatuses": []string{"todo"}}, 400, clasp.CodeInvalidRequest, "agentId"},
		{"MissingAgentID", map[string]any{"expectedStatuses": []string{"todo"}}, 400, clasp.CodeInvalidRequest, "agentId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.do("POST", "/api/issues/"+i1.ID+"/checkout", req{token: w.ka, run: w.ra1.ID, body: tc.body})
			wantErr(t, res, tc.status, tc.code, tc.field)
			sameIssue(t, i1, b.getIssue(i1.ID))
		})
	}
	// The board's checkout is validated the same way.
	wantErr(t, b.do("POST", "/api/issues/"+i1.ID+"/checkout", req{body: map[string]any{"agentId": w.a.ID, "expectedStatuses": []string{"done"}}}),
		422, clasp.CodePreconditionFailed, "expectedStatuses")
	sameIssue(t, i1, b.getIssue(i1.ID))
}

func TestS11_RunHeaderChecks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("SK")
	i1 := b.issue(w.c.ID, map[string]any{"status": "todo"})
	done := b.run(w.ka)
	b.must(http.StatusOK, "POST", "/api/runs/"+done.ID+"/finish", req{token: w.ka, run: done.ID, body: map[string]any{"status": "succeeded"}}, nil)
	body := map[string]any{"agentId": w.a.ID, "expectedStatuses": []string{"todo"}}
	for _, tc := range []struct {
		name   string
		r      req
		status int
		code   string
		field  string
	}{
		{"NoRunHeader", req{token: w.ka}, 401, clasp.CodeRunIDRequired, ""},
		{"SucceededRun", req{token: w.ka, run: done.ID}, 409, clasp.CodeRunNotLive, ""},
		{"OtherAgentsRun", req{token: w.ka, run: w.rb.ID}, 403, clasp.CodeRunNotOwned, ""},
		{"UnknownRun", req{token: w.ka, run: "0b0e2b53-6f42-4d6e-8f0c-2b7c1b9d1c3e"}, 422, clasp.CodeRunNotFound, ""},
		{"NotAUUID", req{token: w.ka, run: "not-a-uuid"}, 400, clasp.CodeInvalidRequest, RunIDHeader},
		{"NotAUUIDPaperclipHeader", req{token: w.ka, run: "42", runHdr: PaperclipRunIDHdr}, 400, clasp.CodeInvalidRequest, PaperclipRunIDHdr},
		{"HeadersDisagree", req{token: w.ka, run: w.ra1.ID, headers: map[string]string{PaperclipRunIDHdr: w.ra2.ID}}, 400, clasp.CodeInvalidRequest, PaperclipRunIDHdr},
		{"BoardWithRun", req{run: w.ra1.ID}, 400, clasp.CodeInvalidRequest, RunIDHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.r.body = body
			wantErr(t, b.do("POST", "/api/issues/"+i1.ID+"/checkout", tc.r), tc.status, tc.code, tc.field)
			sameIssue(t, i1, b.getIssue(i1.ID))
		})
	}
	// The original protocol's header works.
	res := b.checkout(i1.ID, w.ka, "", w.a.ID)
	wantErr(t, res, 401, clasp.CodeRunIDRequired, "")
	res = b.do("POST", "/api/issues/"+i1.ID+"/checkout", req{token: w.ka, run: w.ra1.ID, runHdr: PaperclipRunIDHdr, body: body})
	if res.status != http.StatusOK {
		t.Fatalf("checkout with %s: %d %s", PaperclipRunIDHdr, res.status, res.body)
	}
}

func TestS12_BoardChecksOutForAgent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("SL")
	i1 := b.issue(w.c.ID, map[string]any{"status": "todo"})
	var got clasp.Issue
	b.must(http.StatusOK, "POST", "/api/issues/"+i1.ID+"/checkout", req{body: map[string]any{"agentId": w.a.ID, "expectedStatuses": []string{"todo"}}}, &got)
	if got.Status != clasp.IssueInProgress || got.AssigneeAgentID == nil || *got.AssigneeAgentID != w.a.ID || got.CheckoutRunID != nil || got.ExecutionRunID != nil {
		t.Fatalf("board checkout gave %+v; want in_progress, assignee A, no locks", got)
	}
	res := b.checkout(i1.ID, w.ka, w.ra1.ID, w.a.ID)
	if res.status != http.StatusOK {
		t.Fatalf("A's run checkout: %d %s", res.status, res.body)
	}
	if got := decode[clasp.Issue](t, res); got.CheckoutRunID == nil || *got.CheckoutRunID != w.ra1.ID {
		t.Errorf("A's run does not hold it: %s", res.body)
	}
}

func TestS13_Release(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("SM")
	for _, unassign := range []bool{false, true} {
		i1 := b.issue(w.c.ID, map[string]any{"status": "todo"})
		if res := b.checkout(i1.ID, w.ka, w.ra1.ID, w.a.ID); res.status != http.StatusOK {
			t.Fatalf("checkout: %d %s", res.status, res.body)
		}
		var got clasp.Issue
		b.must(http.StatusOK, "POST", "/api/issues/"+i1.ID+"/release", req{token: w.ka, run: w.ra1.ID, body: map[string]any{"unassign": unassign}}, &got)
		if got.Status != clasp.IssueTodo || got.CheckoutRunID != nil || got.ExecutionRunID != nil {
			t.Errorf("unassign=%v: released issue %+v; want todo without locks", unassign, got)
		}
		if unassign && got.AssigneeAgentID != nil {
			t.Errorf("unassign=true: assignee %v kept", *got.AssigneeAgentID)
		}
		if !unassign && (got.AssigneeAgentID == nil || *got.AssigneeAgentID != w.a.ID) {
			t.Errorf("unassign=false: assignee %v, want A", got.AssigneeAgentID)
		}
		if n := countAction(b.activity(i1.ID), clasp.ActionIssueReleased); n != 1 {
			t.Errorf("%d issue.released rows, want 1", n)
		}
		// Releasing an issue with no lock is a 200 no-op (rule L4).
		var again clasp.Issue
		b.must(http.StatusOK, "POST", "/api/issues/"+i1.ID+"/release", req{token: w.ka, run: w.ra1.ID, body: map[string]any{}}, &again)
		sameIssue(t, &got, &again)
	}
}

func TestS15_NonHolderReleaseConflicts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("SO")
	i1 := b.issue(w.c.ID, map[string]any{"status": "todo"})
	if res := b.checkout(i1.ID, w.ka, w.ra1.ID, w.a.ID); res.status != http.StatusOK {
		t.Fatalf("checkout: %d %s", res.status, res.body)
	}
	before := b.getIssue(i1.ID)
	wantErr(t, b.do("POST", "/api/issues/"+i1.ID+"/release", req{token: w.kb, run: w.rb.ID, body: map[string]any{}}),
		http.StatusConflict, clasp.CodeOwnershipConflict, "")
	sameIssue(t, before, b.getIssue(i1.ID))
}

func TestS16_BoardPatchReleasesLocks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("SP")
	i1 := b.issue(w.c.ID, map[string]any{"status": "todo"})
	i2 := b.issue(w.c.ID, map[string]any{"status": "todo"})
	for _, iss := range []*clasp.Issue{i1, i2} {
		if res := b.checkout(iss.ID, w.ka, w.ra1.ID, w.a.ID); res.status != http.StatusOK {
			t.Fatalf("checkout: %d %s", res.status, res.body)
		}
	}
	var got clasp.Issue
	b.must(http.StatusOK, "PATCH", "/api/issues/"+i1.ID, req{body: map[string]any{"status": "done"}}, &got)
	if got.Status != clasp.IssueDone || got.CheckoutRunID != nil || got.ExecutionRunID != nil || got.CompletedAt == nil {
		t.Errorf("done issue %+v; want done, no locks, completedAt set", got)
	}
	b.must(http.StatusOK, "PATCH", "/api/issues/"+i2.ID, req{body: map[string]any{"assigneeAgentId": w.b.ID}}, &got)
	if got.CheckoutRunID != nil || got.ExecutionRunID != nil || got.AssigneeAgentID == nil || *got.AssigneeAgentID != w.b.ID {
		t.Errorf("reassigned issue %+v; want assignee B, no locks", got)
	}
	if res := b.checkout(i2.ID, w.kb, w.rb.ID, w.b.ID); res.status != http.StatusOK {
		t.Fatalf("B's checkout: %d %s", res.status, res.body)
	}
	held := b.getIssue(i2.ID)
	wantErr(t, b.do("POST", "/api/issues/"+i2.ID+"/release", req{token: w.ka, run: w.ra1.ID, body: map[string]any{}}),
		http.StatusConflict, clasp.CodeOwnershipConflict, "")
	sameIssue(t, held, b.getIssue(i2.ID))
	b.must(http.StatusOK, "POST", "/api/runs/"+w.ra1.ID+"/finish", req{token: w.ka, run: w.ra1.ID, body: map[string]any{"status": "succeeded"}}, nil)
	if got := b.getIssue(i2.ID); got.CheckoutRunID == nil || *got.CheckoutRunID != w.rb.ID {
		t.Errorf("after R1 finished, I2 holder %v, want R2 %s", got.CheckoutRunID, w.rb.ID)
	}
}

func TestS17_ForceRelease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("SQ")
	i1 := b.issue(w.c.ID, map[string]any{"status": "todo"})
	if res := b.checkout(i1.ID, w.ka, w.ra1.ID, w.a.ID); res.status != http.StatusOK {
		t.Fatalf("checkout: %d %s", res.status, res.body)
	}
	held := b.getIssue(i1.ID)
	wantErr(t, b.do("POST", "/api/issues/"+i1.ID+"/admin/force-release", req{token: w.ka, run: w.ra1.ID, body: map[string]any{"reason": "mine"}}),
		http.StatusForbidden, clasp.CodeForbidden, "")
	wantErr(t, b.do("POST", "/api/issues/"+i1.ID+"/admin/force-release", req{body: map[string]any{}}),
		http.StatusBadRequest, clasp.CodeInvalidRequest, "reason")
	sameIssue(t, held, b.getIssue(i1.ID))
	var got clasp.Issue
	b.must(http.StatusOK, "POST", "/api/issues/"+i1.ID+"/admin/force-release", req{body: map[string]any{"reason": "stuck agent"}}, &got)
	if got.CheckoutRunID != nil || got.ExecutionRunID != nil {
		t.Errorf("force-released issue still locked: %+v", got)
	}
	rows := b.activity(i1.ID)
	var found bool
	for _, r := range rows {
		if r.Action != clasp.ActionIssueForceRelease {
			continue
		}
		found = true
		d := decodeDetails(t, r)
		if d["previousCheckoutRunId"] != w.ra1.ID || d["previousExecutionRunId"] != w.ra1.ID || d["reason"] != "stuck agent" {
			t.Errorf("force release details %v", d)
		}
	}
	if !found {
		t.Error("no issue.admin_force_release row")
	}
}

func TestS18_LockColumnsNotWritable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("SR")
	i1 := b.issue(w.c.ID, map[string]any{"status": "todo"})
	if res := b.checkout(i1.ID, w.ka, w.ra1.ID, w.a.ID); res.status != http.StatusOK {
		t.Fatalf("checkout: %d %s", res.status, res.body)
	}
	before := b.getIssue(i1.ID)
	nBefore := len(b.activity(i1.ID))
	for _, field := range []string{"checkoutRunId", "executionRunId", "checkoutEpoch", "executionAgentNameKey", "executionLockedAt", "identifier", "companyId"} {
		for _, who := range []req{{}, {token: w.ka, run: w.ra1.ID}} {
			t.Run(field, func(t *testing.T) {
				who.body = map[string]any{"title": "changed", field: nil}
				e := wantErr(t, b.do("PATCH", "/api/issues/"+i1.ID, who), http.StatusBadRequest, clasp.CodeInvalidRequest, field)
				if !strings.Contains(e.Error, "read-only") {
					t.Errorf("message %q does not say read-only", e.Error)
				}
			})
		}
	}
	who := req{body: map[string]any{"checkoutEpoch": 99}}
	wantErr(t, b.do("PATCH", "/api/issues/"+i1.ID, who), http.StatusBadRequest, clasp.CodeInvalidRequest, "checkoutEpoch")
	sameIssue(t, before, b.getIssue(i1.ID))
	if n := len(b.activity(i1.ID)); n != nBefore {
		t.Errorf("%d activity rows, want %d (nothing written)", n, nBefore)
	}
}

func TestS19_FinishReleasesAllLocks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("SS")
	i1 := b.issue(w.c.ID, map[string]any{"status": "todo"})
	i2 := b.issue(w.c.ID, map[string]any{"status": "todo"})
	for _, iss := range []*clasp.Issue{i1, i2} {
		if res := b.checkout(iss.ID, w.ka, w.ra1.ID, w.a.ID); res.status != http.StatusOK {
			t.Fatalf("checkout: %d %s", res.status, res.body)
		}
	}
	var run clasp.Run
	b.must(http.StatusOK, "POST", "/api/runs/"+w.ra1.ID+"/finish", req{token: w.ka, run: w.ra1.ID, body: map[string]any{"status": "failed", "exitCode": 2, "error": "boom"}}, &run)
	if run.Status != clasp.RunFailed || run.FinishedAt == nil {
		t.Errorf("finished run %+v; want failed with finishedAt", run)
	}
	for _, iss := range []*clasp.Issue{i1, i2} {
		got := b.getIssue(iss.ID)
		if got.CheckoutRunID != nil || got.ExecutionRunID != nil {
			t.Errorf("%s still locked after its run failed: %+v", iss.Identifier, got)
		}
		if n := countAction(b.activity(iss.ID), clasp.ActionIssueLockReleased); n != 1 {
			t.Errorf("%s: %d issue.lock_released rows, want 1", iss.Identifier, n)
		}
	}
	// A terminal run never changes again.
	wantErr(t, b.do("POST", "/api/runs/"+w.ra1.ID+"/heartbeat", req{token: w.ka, body: map[string]any{}}), http.StatusConflict, clasp.CodeRunNotLive, "")
	wantErr(t, b.do("POST", "/api/runs/"+w.ra1.ID+"/finish", req{body: map[string]any{"status": "succeeded"}}), http.StatusConflict, clasp.CodeRunNotLive, "")
	var again clasp.Run
	b.must(http.StatusOK, "GET", "/api/runs/"+w.ra1.ID, req{}, &again)
	if again.Status != clasp.RunFailed {
		t.Errorf("run status %s after late calls, want failed", again.Status)
	}
	// The run token died with the run.
	wantErr(t, b.do("GET", "/api/agents/me", req{token: w.ra1.RunToken}), http.StatusUnauthorized, clasp.CodeUnauthenticated, "")
}

func TestS25_Tenancy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w1 := b.world("TA")
	w2 := b.world("TB")
	i2 := b.issue(w2.c.ID, map[string]any{"status": "todo"})
	k, r := w1.ka, w1.ra1.ID
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"ReadByID", "GET", "/api/issues/" + i2.ID, nil, 404, clasp.CodeNotFound},
		{"ReadByIdentifier", "GET", "/api/issues/" + strings.ToLower(i2.Identifier), nil, 404, clasp.CodeNotFound},
		{"Checkout", "POST", "/api/issues/" + i2.ID + "/checkout", map[string]any{"agentId": w1.a.ID, "expectedStatuses": []string{"todo"}}, 404, clasp.CodeNotFound},
		{"CheckoutByIdentifier", "POST", "/api/issues/" + i2.Identifier + "/checkout", map[string]any{"agentId": w1.a.ID, "expectedStatuses": []string{"todo"}}, 404, clasp.CodeNotFound},
		{"Comment", "POST", "/api/issues/" + i2.ID + "/comments", map[string]any{"body": "hi"}, 404, clasp.CodeNotFound},
		{"Comments", "GET", "/api/issues/" + i2.ID + "/comments", nil, 404, clasp.CodeNotFound},
		{"Release", "POST", "/api/issues/" + i2.ID + "/release", map[string]any{}, 404, clasp.CodeNotFound},
		{"Patch", "PATCH", "/api/issues/" + i2.ID, map[string]any{"title": "x"}, 404, clasp.CodeNotFound},
		{"Activity", "GET", "/api/issues/" + i2.ID + "/activity", nil, 404, clasp.CodeNotFound},
		{"Run", "GET", "/api/runs/" + w2.ra1.ID, nil, 404, clasp.CodeNotFound},
		{"ListIssues", "GET", "/api/companies/" + w2.c.ID + "/issues", nil, 403, clasp.CodeForbidden},
		{"CreateIssue", "POST", "/api/companies/" + w2.c.ID + "/issues", map[string]any{"title": "x"}, 403, clasp.CodeForbidden},
		{"ListRuns", "GET", "/api/companies/" + w2.c.ID + "/runs", nil, 403, clasp.CodeForbidden},
		{"CompanyActivity", "GET", "/api/companies/" + w2.c.ID + "/activity", nil, 403, clasp.CodeForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, b.do(tc.method, tc.path, req{token: k, run: r, body: tc.body}), tc.status, tc.code, "")
		})
	}
	// Naming another company's run is naming a run that does not exist.
	wantErr(t, b.do("GET", "/api/agents/me", req{token: k, run: w2.ra1.ID}), 422, clasp.CodeRunNotFound, "")
	sameIssue(t, i2, b.getIssue(i2.ID))
	var comments []*clasp.Comment
	b.must(http.StatusOK, "GET", "/api/issues/"+i2.ID+"/comments", req{}, &comments)
	if len(comments) != 0 {
		t.Errorf("%d comments on C2's issue, want 0", len(comments))
	}
}

func TestS26_BadBodies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	w := b.world("TC")
	create := "/api/companies/" + w.c.ID + "/issues"
	for _, tc := range []struct {
		name   string
		raw    []byte
		status int
		code   string
		field  string
	}{
		{"Malformed", []byte(`{"title": `), 400, clasp.CodeInvalidRequest, ""},
		{"TrailingGarbage", []byte(`{"title":"x"} trailing`), 400, clasp.CodeInvalidRequest, ""},
		{"SecondObject", []byte(`{"title":"x"}{"title":"y"}`), 400, clasp.CodeInvalidRequest, ""},
		{"TenMiB", []byte(`{"title":"` + strings.Repeat("a", 10<<20) + `"}`), 413, clasp.CodeBodyTooLarge, ""},
		{"WrongTypeTitle", []byte(`{"title":42}`), 400, clasp.CodeInvalidRequest, "title"},
		{"WrongTypePriority", []byte(`{"title":"x","priority":["high"]}`), 400, clasp.CodeInvalidRequest, "priority"},
		{"UnknownField", []byte(`{"title":"x","severity":"high"}`), 400, clasp.CodeInvalidRequest, "severity"},
		{"CaseVariantField", []byte(`{"Title":"x"}`), 400, clasp.CodeInvalidRequest, "Title"},
		{"DuplicateKey", []byte(`{"title":"x","title":"y"}`), 400, clasp.CodeInvalidRequest, "title"},
		{"CaseDuplicateKey", []byte(`{"title":"x","TITLE":"y"}`), 400, clasp.CodeInvalidRequest, "TITLE"},
		{"NotUTF8", []byte("{\"title\":\"caf\xe9\"}"), 400, clasp.CodeInvalidRequest, ""},
		{"LoneSurrogateEscape", []byte(`{"title":"caf\ud800"}`), 400, clasp.CodeInvalidRequest, ""},
		{"NotAnObject", []byte(`["title"]`), 400, clasp.CodeInvalidRequest, ""},
		{"Empty", []byte(``), 400, clasp.CodeInvalidRequest, "title"},
		{"MissingTitle", []byte(`{"description":"x"}`), 400, clasp.CodeInvalidRequest, "title"},
		{"BlankTitle", []byte(`{"title":"   "}`), 400, clasp.CodeInvalidRequest, "title"},
		{"LongTitle", []byte(`{"title":"` + strings.Repeat("é", 501) + `"}`), 400, clasp.CodeInvalidRequest, "title"},
		{"BadStatus", []byte(`{"title":"x","status":"doing"}`), 400, clasp.CodeInvalidRequest, "status"},
		{"BadPriority", []byte(`{"title":"x","priority":"urgent"}`), 400, clasp.CodeInvalidRequest, "priority"},
		{"BadAssignee", []byte(`{"title":"x","assigneeAgentId":"bob"}`), 400, clasp.CodeInvalidRequest, "assigneeAgentId"},
		{"NulInTitle", []byte(`{"title":"a\u0000b"}`), 400, clasp.CodeInvalidRequest, "title"},
		{"InProgressWithoutAssignee", []byte(`{"title":"x","status":"in_progress"}`), 422, clasp.CodePreconditionFailed, "status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantErr(t, b.do("POST", create, req{raw: tc.raw}), tc.status, tc.code, tc.field)
		})
	}
	// Same rules on agent calls, over the checkout path.
	wantErr(t, b.do("POST", "/api/issues/XX-1/checkout", req{token: w.ka, run: w.ra1.ID, raw: []byte(`{"agentId": `)}), 400, clasp.CodeInvalidRequest, "")
	wantErr(t, b.do("POST", "/api/runs/"+w.ra1.ID+"/finish", req{token: w.ka, raw: []byte(`{"status":"failed","exitCode":"1"}`)}), 400, clasp.CodeInvalidRequest, "exitCode")
	wantErr(t, b.do("POST", "/api/runs/"+w.ra1.ID+"/finish", req{token: w.ka, raw: []byte(`{"status":"running"}`)}), 400, clasp.CodeInvalidRequest, "status")
	// Nothing was written.
	var issues []*clasp.Issue
	b.must(http.StatusOK, "GET", create, req{}, &issues)
	if len(issues) != 0 {
		t.Errorf("%d issues exist after bad requests, want 0", len(issues))
	}
	var run clasp.Run
	b.must(http.StatusOK, "GET", "/api/runs/"+w.ra1.ID, req{}, &run)
	if run.Status != clasp.RunRunning {
		t.Errorf("run %s after bad finish requests, want running", run.Status)
	}
}
