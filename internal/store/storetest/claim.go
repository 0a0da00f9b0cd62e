package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// Claim-next: Store.IssueClaim checks out the most urgent issue
// the run may take under L1, or answers (nil, nil).

// claim claims for run r with the given scope and expected statuses.
func claim(ctx context.Context, st store.Store, r *clasp.Run, scope store.ClaimScope, expected ...clasp.IssueStatus) (*clasp.Issue, error) {
	return st.IssueClaim(ctx, &store.IssueClaimParams{ExpectedStatuses: expected, Scope: scope, Actor: runActor(r)})
}

// claimID claims (scope any, expected default) and returns the identifier
// of the issue taken, "" for none.
func claimID(t *testing.T, st store.Store, r *clasp.Run, scope store.ClaimScope, expected ...clasp.IssueStatus) string {
	t.Helper()
	iss, err := claim(t.Context(), st, r, scope, expected...)
	if err != nil {
		t.Fatalf("claim by %s (scope %q): %v", r.ID, scope, err)
	}
	if iss == nil {
		return ""
	}
	return iss.Identifier
}

// Claim_PriorityThenAge: claims take critical before high before medium
// before low, and within a priority the oldest first; each answer is held
// by the run, epoch 1, with one issue.checked_out; none left answers nil.
func testClaimPriorityThenAge(t *testing.T, open opener) {
	e := newEnv(t, open)
	low := newIssueP(t, e.st, e.co.ID, clasp.IssueTodo, clasp.PriorityLow, "")
	med1 := newIssueP(t, e.st, e.co.ID, clasp.IssueTodo, clasp.PriorityMedium, "")
	crit := newIssueP(t, e.st, e.co.ID, clasp.IssueTodo, clasp.PriorityCritical, "")
	med2 := newIssueP(t, e.st, e.co.ID, clasp.IssueTodo, clasp.PriorityMedium, e.a.ID)
	high := newIssueP(t, e.st, e.co.ID, clasp.IssueTodo, clasp.PriorityHigh, "")
	newIssueP(t, e.st, e.co.ID, clasp.IssueBacklog, clasp.PriorityCritical, "")  // not expected
	newIssueP(t, e.st, e.co.ID, clasp.IssueTodo, clasp.PriorityCritical, e.b.ID) // another agent's

	r := openRun(t, e.st, e.a)
	var got []string
	for range 6 {
		iss, err := claim(t.Context(), e.st, r, "")
		if err != nil {
			t.Fatalf("claim: %v", err)
		}
		if iss == nil {
			break
		}
		wantLock(t, "claim answer "+iss.Identifier, iss, held(e.a.ID, r.ID, 1))
		wantLock(t, "row "+iss.Identifier, getIssue(t, e.st, iss.ID), held(e.a.ID, r.ID, 1))
		e.wantLockActivity(t, "after claim of "+iss.Identifier, iss.ID, map[string]int{clasp.ActionIssueCheckedOut: 1})
		co := e.oneActivity(t, iss.ID, clasp.ActionIssueCheckedOut)
		wantDetails(t, "checked_out", co, map[string]string{"agentId": e.a.ID, "runId": r.ID, "checkoutEpoch": "1"})
		if deref(co.RunID) != r.ID {
			t.Errorf("checked_out runId: got %q, want %q", deref(co.RunID), r.ID)
		}
		got = append(got, iss.Identifier)
	}
	want := []string{crit.Identifier, high.Identifier, med1.Identifier, med2.Identifier, low.Identifier}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("claim order mismatch (-want +got):\n%s", diff)
	}
}

// Claim_Scopes: scope mine takes only the agent's issues, unassigned only
// unassigned ones, any both; expectedStatuses widens the statuses; bad
// scope and closed statuses are refused; the agent's in_progress issue
// with no live lock is taken under every scope but unassigned (L1).
func testClaimScopes(t *testing.T, open opener) {
	e := newEnv(t, open)
	mine := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
	free := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	blocked := newIssue(t, e.st, e.co.ID, clasp.IssueBlocked, "")
	r := openRun(t, e.st, e.a)

	_, err := claim(t.Context(), e.st, r, "everything")
	wantCode(t, "bad scope", err, clasp.CodeInvalidRequest)
	if d := clasp.AsError(err); d != nil && asString(d.Details["field"]) != "scope" {
		t.Errorf("bad scope: details.field %v, want scope", d.Details["field"])
	}
	_, err = claim(t.Context(), e.st, r, store.ClaimAny, clasp.IssueDone)
	wantCode(t, "expect done", err, clasp.CodePreconditionFailed)
	_, err = e.st.IssueClaim(t.Context(), &store.IssueClaimParams{Actor: agentActor(e.a)})
	wantCode(t, "no run", err, clasp.CodeRunIDRequired)

	if got := claimID(t, e.st, r, store.ClaimUnassigned); got != free.Identifier {
		t.Errorf("unassigned: got %q, want %s", got, free.Identifier)
	}
	if got := claimID(t, e.st, r, store.ClaimUnassigned); got != "" {
		t.Errorf("unassigned again: got %q, want none", got)
	}
	if got := claimID(t, e.st, r, store.ClaimMine); got != mine.Identifier {
		t.Errorf("mine: got %q, want %s", got, mine.Identifier)
	}
	if got := claimID(t, e.st, r, store.ClaimAny); got != "" {
		t.Errorf("any, todo: got %q, want none", got)
	}
	if got := claimID(t, e.st, r, store.ClaimAny, clasp.IssueTodo, clasp.IssueBlocked); got != blocked.Identifier {
		t.Errorf("any, todo+blocked: got %q, want %s", got, blocked.Identifier)
	}

	// The inbox adoption case: in_progress, A's, its run finished (locks released, L6).
	ip := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
	r1 := openRun(t, e.st, e.a)
	mustCheckout(t, e.st, r1, ip.ID, clasp.IssueTodo)
	if got := claimID(t, e.st, r, store.ClaimAny); got != "" {
		t.Errorf("in_progress held by live R1: got %q, want none", got)
	}
	if _, err := finish(t.Context(), e.st, r1, clasp.RunSucceeded); err != nil {
		t.Fatalf("setup: finish R1: %v", err)
	}
	if got := claimID(t, e.st, r, store.ClaimUnassigned); got != "" {
		t.Errorf("unassigned with A's unlocked in_progress: got %q, want none", got)
	}
	rb := openRun(t, e.st, e.b)
	if got := claimID(t, e.st, rb, store.ClaimAny); got != "" {
		t.Errorf("B claims A's in_progress: got %q, want none", got)
	}
	if got := claimID(t, e.st, r, store.ClaimMine); got != ip.Identifier {
		t.Errorf("mine, A's unlocked in_progress: got %q, want %s", got, ip.Identifier)
	}
	wantLock(t, "adopted in_progress", getIssue(t, e.st, ip.ID), held(e.a.ID, r.ID, 2))
	// The run never claims what it holds (L2): nothing left.
	if got := claimID(t, e.st, r, store.ClaimAny, clasp.IssueTodo, clasp.IssueBlocked, clasp.IssueInProgress); got != "" {
		t.Errorf("everything held: got %q, want none", got)
	}
}

// Claim_AdoptsDeadHolder: an issue whose holder is dead (terminal, missing,
// lost) is claimed with issue.checkout_lock_adopted (why) and
// issue.checked_out, epoch 2; an issue held by a live run is never
// claimed; a claim from a run that is not live is refused.
func testClaimAdoptsDeadHolder(t *testing.T, open opener) {
	cases := []struct {
		why  string
		kill func(e *env, t *testing.T, runID string) error
	}{
		{"terminal", func(e *env, t *testing.T, id string) error { return e.h.SetRunStatus(t.Context(), id, clasp.RunFailed) }},
		{"missing", func(e *env, t *testing.T, id string) error { return e.h.DeleteRun(t.Context(), id) }},
		{"lost", func(e *env, t *testing.T, id string) error { return e.h.ExpireRunLease(t.Context(), id) }},
	}
	for _, tc := range cases {
		t.Run(tc.why, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, open)
			live := newIssueP(t, e.st, e.co.ID, clasp.IssueTodo, clasp.PriorityCritical, "")
			dead := newIssueP(t, e.st, e.co.ID, clasp.IssueTodo, clasp.PriorityHigh, "")
			other := newIssueP(t, e.st, e.co.ID, clasp.IssueTodo, clasp.PriorityLow, "")
			rb := openRun(t, e.st, e.b)
			mustCheckout(t, e.st, rb, live.ID, clasp.IssueTodo)
			r1 := openRun(t, e.st, e.a)
			mustCheckout(t, e.st, r1, dead.ID, clasp.IssueTodo)
			if err := tc.kill(e, t, r1.ID); err != nil {
				t.Fatalf("setup: make R1 %s: %v", tc.why, err)
			}
			liveBefore := getIssue(t, e.st, live.ID)

			r2 := openRun(t, e.st, e.a)
			var res store.CheckoutResult
			got, err := e.st.IssueClaim(t.Context(), &store.IssueClaimParams{Actor: runActor(r2), Result: &res})
			if err != nil {
				t.Fatalf("claim: %v", err)
			}
			if got == nil || got.ID != dead.ID {
				t.Fatalf("claim: got %v, want the dead holder's %s", got, dead.Identifier)
			}
			if res.AdoptedWhy != tc.why {
				t.Errorf("claim result: AdoptedWhy %q, want %q", res.AdoptedWhy, tc.why)
			}
			wantLock(t, "claim answer", got, held(e.a.ID, r2.ID, 2))
			e.wantLockActivity(t, "after adoption", dead.ID, map[string]int{clasp.ActionIssueCheckedOut: 2, clasp.ActionIssueLockAdopted: 1})
			a := e.oneActivity(t, dead.ID, clasp.ActionIssueLockAdopted)
			wantDetails(t, "adoption", a, map[string]string{"previousCheckoutRunId": r1.ID, "previousExecutionRunId": r1.ID, "why": tc.why})
			co := e.issueActivity(t, dead.ID, clasp.ActionIssueCheckedOut)
			wantDetails(t, "newest checked_out", co[0], map[string]string{"agentId": e.a.ID, "runId": r2.ID, "checkoutEpoch": "2"})

			if id := claimID(t, e.st, r2, store.ClaimAny); id != other.Identifier {
				t.Errorf("second claim: got %q, want %s (never the live holder's)", id, other.Identifier)
			}
			if id := claimID(t, e.st, r2, store.ClaimAny); id != "" {
				t.Errorf("third claim: got %q, want none", id)
			}
			wantUnchanged(t, "issue held by live run", e.st, liveBefore)

			// The dead run itself cannot claim.
			if tc.why != "missing" {
				newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
				_, err := claim(t.Context(), e.st, r1, store.ClaimAny)
				wantCode(t, "claim by dead run", err, clasp.CodeRunNotLive)
			}
		})
	}
}

// Claim_ManyClaimersOncePerIssue: 64 agents claim concurrently until none
// is left over 500 unassigned issues: every issue is claimed exactly once,
// no claim fails, every epoch is 1, one issue.checked_out per issue.
func testClaimManyClaimers(t *testing.T, open opener) {
	st, _ := open(t)
	co := newCompany(t, st, "SWARM")
	nAgents, nIssues := 64, scale(500, 120)
	prios := []clasp.Priority{clasp.PriorityCritical, clasp.PriorityHigh, clasp.PriorityMedium, clasp.PriorityLow}
	want := map[string]bool{}
	for i := range nIssues {
		want[newIssueP(t, st, co.ID, clasp.IssueTodo, prios[i%len(prios)], "").ID] = true
	}
	runs := make([]*clasp.Run, nAgents)
	for i := range runs {
		runs[i] = openRun(t, st, newAgent(t, st, co.ID, fmt.Sprintf("claimer-%02d", i)))
	}
	var (
		mu      sync.Mutex
		claimed = map[string]string{} // issue id -> run id
		errs    []error
		dups    []string
	)
	race(nAgents, func(i int) {
		for {
			iss, err := claim(context.Background(), st, runs[i], store.ClaimAny)
			mu.Lock()
			switch {
			case err != nil:
				errs = append(errs, err)
			case iss != nil:
				if prev, ok := claimed[iss.ID]; ok {
					dups = append(dups, fmt.Sprintf("%s by %s and %s", iss.Identifier, prev, runs[i].ID))
				}
				claimed[iss.ID] = runs[i].ID
				if iss.CheckoutEpoch != 1 || deref(iss.CheckoutRunID) != runs[i].ID {
					errs = append(errs, fmt.Errorf("%s: epoch %d holder %s, want 1 and %s", iss.Identifier, iss.CheckoutEpoch, deref(iss.CheckoutRunID), runs[i].ID))
				}
			}
			mu.Unlock()
			if err != nil || iss == nil {
				return
			}
		}
	})
	for _, err := range errs {
		t.Errorf("claim: %v", err)
	}
	for _, d := range dups {
		t.Errorf("claimed twice: %s", d)
	}
	if len(claimed) != nIssues {
		t.Errorf("claimed %d issues, want %d", len(claimed), nIssues)
	}
	n := 0
	for _, a := range allActivity(t, st, store.ActivityListParams{CompanyID: co.ID, Action: clasp.ActionIssueCheckedOut}) {
		n++
		if !want[a.EntityID] {
			t.Errorf("checked_out for unknown issue %s", a.EntityID)
		}
	}
	if n != nIssues {
		t.Errorf("%d issue.checked_out rows, want %d (one per issue)", n, nIssues)
	}
	for id := range want {
		iss := getIssue(t, st, id)
		if iss.CheckoutEpoch != 1 || deref(iss.CheckoutRunID) != claimed[id] {
			t.Errorf("%s: epoch %d holder %q, want 1 and %q", iss.Identifier, iss.CheckoutEpoch, deref(iss.CheckoutRunID), claimed[id])
		}
		checkL7(t, "after the claims", iss)
	}
}
