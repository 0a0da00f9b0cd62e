package storetest

import (
	"strings"
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// escalationTests are the contract tests of RULES.md, Escalation (E1-E4).
var escalationTests = []struct {
	name string
	fn   func(*testing.T, opener)
}{
	{"E1_EscalatedAfterNFailures", testE1Escalated},
	{"E2_SuccessResetsCount", testE2SuccessResets},
	{"E4_PersonMovesItBack", testE4MovedBack},
	{"E1_CompanySetting", testE1CompanySetting},
}

// failRun opens a run of agent a for issue iss, checks the issue out in
// it and ends it with status and error code code; it returns the run.
func failRun(t *testing.T, e *env, iss *clasp.Issue, status clasp.RunStatus, code string) *clasp.Run {
	t.Helper()
	p := runOpenParams(e.a, leaseTTL)
	p.IssueID = iss.ID
	r, err := e.st.RunOpen(t.Context(), p)
	if err != nil {
		t.Fatalf("open run: %v", err)
	}
	mustCheckout(t, e.st, r, iss.ID, clasp.IssueTodo, clasp.IssueInProgress)
	msg := "exit status 2: panic: the agent crashed"
	if _, err := e.st.RunFinish(t.Context(), &store.RunFinishParams{RunID: r.ID, Status: status, ErrorCode: &code, Error: &msg,
		Actor: runActor(r)}); err != nil {
		t.Fatalf("finish run %s: %v", status, err)
	}
	return r
}

// E1, E3: the third run in a row of an issue that ends failed or timed
// out moves it to blocked with its locks cleared, in the transaction of
// that run's end, with one comment naming each failed run, one
// issue.escalated row and one webhook delivery of it.
func testE1Escalated(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	w := newWebhook(t, e.st, e.co.ID, "https://example.com/pager", clasp.ActionIssueEscalated)
	iss := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
	var runs []*clasp.Run
	runs = append(runs, failRun(t, e, iss, clasp.RunFailed, "exit_code"))
	runs = append(runs, failRun(t, e, iss, clasp.RunTimedOut, "timeout"))
	if got := getIssue(t, e.st, iss.ID); got.Status == clasp.IssueBlocked {
		t.Fatalf("blocked after 2 failures, want after 3")
	}
	runs = append(runs, failRun(t, e, iss, clasp.RunFailed, "process_lost"))
	got := getIssue(t, e.st, iss.ID)
	if got.Status != clasp.IssueBlocked || got.CheckoutRunID != nil || got.ExecutionRunID != nil {
		t.Fatalf("after 3 failures: status %s, locks %v %v; want blocked and unlocked", got.Status, got.CheckoutRunID, got.ExecutionRunID)
	}
	checkL7(t, "escalated", got)
	acts := e.issueActivity(t, iss.ID, clasp.ActionIssueEscalated)
	if len(acts) != 1 {
		t.Fatalf("%d issue.escalated rows, want 1", len(acts))
	}
	d := details(t, acts[0])
	if asString(d["failures"]) != "3" || asString(d["previousCheckoutRunId"]) != runs[2].ID || acts[0].ActorType != clasp.ActorSystem {
		t.Errorf("issue.escalated: %s", acts[0].Details)
	}
	cs, err := e.st.CommentList(ctx, &store.CommentListParams{Ref: iss.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || asString(d["commentId"]) != cs[0].ID {
		t.Fatalf("comments: %d (want 1, the one issue.escalated names)", len(cs))
	}
	for _, r := range runs {
		if !strings.Contains(cs[0].Body, r.ID) {
			t.Errorf("the comment does not name run %s:\n%s", r.ID, cs[0].Body)
		}
	}
	for _, s := range []string{"exit_code", "timed_out", "process_lost", "panic: the agent crashed"} {
		if !strings.Contains(cs[0].Body, s) {
			t.Errorf("the comment does not say %q:\n%s", s, cs[0].Body)
		}
	}
	if ds := deliveries(t, e.st, w.ID); len(ds) != 1 || ds[0].EntityID != iss.ID {
		t.Errorf("issue.escalated deliveries: %d, want 1", len(ds))
	}
	// A further failed run of the issue changes nothing.
	r := openRun(t, e.st, e.a)
	if _, err := finish(ctx, e.st, r, clasp.RunFailed); err != nil {
		t.Fatal(err)
	}
	p := runOpenParams(e.a, leaseTTL)
	p.IssueID = iss.ID
	r2, err := e.st.RunOpen(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := finish(ctx, e.st, r2, clasp.RunFailed); err != nil {
		t.Fatal(err)
	}
	if n := len(e.issueActivity(t, iss.ID, clasp.ActionIssueEscalated)); n != 1 {
		t.Errorf("%d issue.escalated rows after a further failure, want 1", n)
	}
	// E5: it needs attention, before an abandoned issue (in_progress, its
	// holder's lease expired).
	other := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.b.ID)
	rb := openRun(t, e.st, e.b)
	mustCheckout(t, e.st, rb, other.ID, clasp.IssueTodo)
	if err := e.h.ExpireRunLease(ctx, rb.ID); err != nil {
		t.Fatal(err)
	}
	att, err := e.st.AttentionList(ctx, e.co.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(att) != 2 || att[0].IssueID != iss.ID || att[0].Reason != clasp.AttentionEscalated || att[0].RunFailures != 3 ||
		att[0].FailureLog == nil || att[1].IssueID != other.ID || att[1].Reason != clasp.AttentionAbandoned {
		t.Errorf("attention: %d items %+v, want the escalated issue then the abandoned one", len(att), att)
	}
	// Claim-next does not take it.
	r3 := openRun(t, e.st, e.a)
	if c, err := e.st.IssueClaim(ctx, &store.IssueClaimParams{Actor: runActor(r3), Scope: store.ClaimMine}); err != nil || c != nil {
		t.Errorf("claim after escalation: %v, %v; want none", c, err)
	}
	// E3: nor does an agent's claim or checkout that expects blocked: a
	// person moves it out of blocked first.
	for _, scope := range []store.ClaimScope{store.ClaimMine, store.ClaimAny} {
		if c, err := e.st.IssueClaim(ctx, &store.IssueClaimParams{Actor: runActor(r3), Scope: scope,
			ExpectedStatuses: []clasp.IssueStatus{clasp.IssueBlocked}}); err != nil || c != nil {
			t.Errorf("claim %s expecting blocked after escalation: %v, %v; want none", scope, c, err)
		}
	}
	for _, ref := range []string{iss.ID, strings.ToLower(iss.Identifier)} {
		_, err = checkout(ctx, e.st, r3, ref, clasp.IssueBlocked, clasp.IssueTodo)
		wantCode(t, "checkout of an escalated issue expecting blocked", err, clasp.CodePreconditionFailed)
		if ce := clasp.AsError(err); ce == nil || ce.Details["reason"] != store.WakeReasonIssueEscalated || ce.Details["issueId"] != iss.ID ||
			!strings.HasPrefix(ce.Message, "Issue "+ref+" ") {
			t.Errorf("checkout of an escalated issue by %s: %v; want reason issue_escalated, details.issueId the id, the message naming %s", ref, err, ref)
		}
	}
	if got := getIssue(t, e.st, iss.ID); got.Status != clasp.IssueBlocked || got.CheckoutRunID != nil {
		t.Errorf("after refused checkouts: status %s, lock %v; want blocked, unlocked", got.Status, got.CheckoutRunID)
	}
	if att, err := e.st.AttentionList(ctx, e.co.ID); err != nil || len(att) == 0 || att[0].IssueID != iss.ID || att[0].Reason != clasp.AttentionEscalated {
		t.Errorf("attention after refused checkouts: %+v, %v; want the issue still escalated", att, err)
	}
}

// E2: a run that succeeds resets the count; cancelled runs neither count
// nor reset.
func testE2SuccessResets(t *testing.T, open opener) {
	e := newEnv(t, open)
	iss := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
	failRun(t, e, iss, clasp.RunFailed, "x")
	failRun(t, e, iss, clasp.RunFailed, "x")
	failRun(t, e, iss, clasp.RunSucceeded, "")
	failRun(t, e, iss, clasp.RunFailed, "x")
	failRun(t, e, iss, clasp.RunCancelled, "")
	failRun(t, e, iss, clasp.RunFailed, "x")
	if got := getIssue(t, e.st, iss.ID); got.Status == clasp.IssueBlocked {
		t.Errorf("blocked after fail, fail, success, fail, cancel, fail; want 2 in a row only")
	}
	failRun(t, e, iss, clasp.RunFailed, "x")
	if got := getIssue(t, e.st, iss.ID); got.Status != clasp.IssueBlocked {
		t.Errorf("status %s after the third failure in a row, want blocked", got.Status)
	}
}

// E4: a person moving an escalated issue out of blocked ends the
// escalation; its count starts again from zero. An agent may not: its
// PATCH out of blocked is 422 issue_escalated and changes nothing, while
// one that keeps it blocked is an ordinary PATCH.
func testE4MovedBack(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	iss := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
	for range 3 {
		failRun(t, e, iss, clasp.RunFailed, "x")
	}
	r := openRun(t, e.st, e.a)
	for _, st := range []clasp.IssueStatus{clasp.IssueTodo, clasp.IssueDone, clasp.IssueInReview} {
		_, err := e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: iss.ID, Status: ptr(st), Actor: runActor(r)})
		if ce := clasp.AsError(err); ce == nil || ce.Code != clasp.CodePreconditionFailed || ce.Details["reason"] != store.WakeReasonIssueEscalated {
			t.Errorf("agent's PATCH of the escalated issue to %s: %v, want 422 with reason issue_escalated", st, err)
		}
	}
	if _, err := e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: iss.ID, Title: ptr("still blocked"), Actor: runActor(r)}); err != nil {
		t.Errorf("agent's PATCH of the escalated issue's title: %v", err)
	}
	if got := getIssue(t, e.st, iss.ID); got.Status != clasp.IssueBlocked || got.Title != "still blocked" {
		t.Errorf("after the agent's PATCHes: status %s title %q, want blocked and the new title", got.Status, got.Title)
	}
	if n := len(e.issueActivity(t, iss.ID, clasp.ActionIssueEscalated)); n != 1 {
		t.Errorf("%d issue.escalated rows before the person moves it back, want 1", n)
	}
	if _, err := e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: iss.ID, Status: ptr(clasp.IssueTodo), Actor: boardActor()}); err != nil {
		t.Fatal(err)
	}
	failRun(t, e, iss, clasp.RunFailed, "x")
	failRun(t, e, iss, clasp.RunFailed, "x")
	if got := getIssue(t, e.st, iss.ID); got.Status == clasp.IssueBlocked {
		t.Errorf("blocked again after 2 failures since it was moved back")
	}
	failRun(t, e, iss, clasp.RunFailed, "x")
	if got := getIssue(t, e.st, iss.ID); got.Status != clasp.IssueBlocked {
		t.Errorf("status %s after 3 more failures, want blocked", got.Status)
	}
	if n := len(e.issueActivity(t, iss.ID, clasp.ActionIssueEscalated)); n != 2 {
		t.Errorf("%d issue.escalated rows, want 2", n)
	}
}

// E1: the company's escalateAfterFailures (default 3, 0 never, 400 out of
// 0..100) is set at creation and by an update, audited.
func testE1CompanySetting(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	if e.co.EscalateAfterFailures != clasp.DefaultEscalateAfterFailures {
		t.Errorf("default escalateAfterFailures %d", e.co.EscalateAfterFailures)
	}
	_, err := e.st.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "x", IssuePrefix: "XX", EscalateAfterFailures: ptr(101), Actor: boardActor()})
	wantCode(t, "create with 101", err, clasp.CodeInvalidRequest)
	co, err := e.st.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "y", IssuePrefix: "YY", EscalateAfterFailures: ptr(1), Actor: boardActor()})
	if err != nil || co.EscalateAfterFailures != 1 {
		t.Fatalf("create with 1: %+v, %v", co, err)
	}
	_, err = e.st.CompanyUpdate(ctx, &store.CompanyUpdateParams{ID: e.co.ID, EscalateAfterFailures: ptr(-1), Actor: boardActor()})
	wantCode(t, "update to -1", err, clasp.CodeInvalidRequest)
	up, err := e.st.CompanyUpdate(ctx, &store.CompanyUpdateParams{ID: e.co.ID, EscalateAfterFailures: ptr(0), Actor: boardActor()})
	if err != nil || up.EscalateAfterFailures != 0 {
		t.Fatalf("update to 0: %+v, %v", up, err)
	}
	acts := allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID, Action: clasp.ActionCompanyUpdated})
	if len(acts) != 1 || !strings.Contains(strings.ReplaceAll(string(acts[0].Details), " ", ""), `"from":3`) {
		t.Errorf("company.updated rows: %d %v", len(acts), acts)
	}
	iss := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
	for range 5 {
		failRun(t, e, iss, clasp.RunFailed, "x")
	}
	if got := getIssue(t, e.st, iss.ID); got.Status == clasp.IssueBlocked {
		t.Errorf("escalated with escalateAfterFailures 0")
	}
	_, err = e.st.CompanyUpdate(ctx, &store.CompanyUpdateParams{ID: "0190a0a0-0000-7000-8000-000000000000", EscalateAfterFailures: ptr(2), Actor: boardActor()})
	wantCode(t, "update missing", err, clasp.CodeNotFound)
}
