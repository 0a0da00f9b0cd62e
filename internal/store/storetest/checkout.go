package storetest

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// S01: a todo, unassigned, unlocked issue checked out by a running run of A:
// in_progress, assignee A, both locks R1, epoch 1, one issue.checked_out
// {agentId, runId, checkoutEpoch} by A in R1 (rule L1).
func testS01CheckoutTodo(t *testing.T, open opener) {
	e := newEnv(t, open)
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	r1 := openRun(t, e.st, e.a)

	got := mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
	wantLock(t, "checkout answer", got, held(e.a.ID, r1.ID, 1))
	if got.ExecutionAgentNameKey == nil || *got.ExecutionAgentNameKey != e.a.NameKey {
		t.Errorf("executionAgentNameKey: got %v, want %q", deref(got.ExecutionAgentNameKey), e.a.NameKey)
	}
	if got.ExecutionLockedAt == nil {
		t.Errorf("executionLockedAt: got nil, want set")
	}
	if got.StartedAt == nil {
		t.Errorf("startedAt: got nil, want set")
	}
	if diff := cmp.Diff(got, getIssue(t, e.st, i1.ID)); diff != "" {
		t.Errorf("row differs from checkout answer (-answer +row):\n%s", diff)
	}
	e.wantLockActivity(t, "after checkout", i1.ID, map[string]int{clasp.ActionIssueCheckedOut: 1})
	a := e.oneActivity(t, i1.ID, clasp.ActionIssueCheckedOut)
	if a.ActorType != clasp.ActorAgent || a.ActorID != e.a.ID || deref(a.RunID) != r1.ID {
		t.Errorf("issue.checked_out actor: got (%s, %s, run %s), want (agent, %s, run %s)", a.ActorType, a.ActorID, deref(a.RunID), e.a.ID, r1.ID)
	}
	if a.EntityType != "issue" {
		t.Errorf("issue.checked_out entityType: got %q, want %q", a.EntityType, "issue")
	}
	wantDetails(t, "checked_out", a, map[string]string{"agentId": e.a.ID, "runId": r1.ID, "checkoutEpoch": "1"})
}

// S02: the holding run checks out again three times (rule L2): same answer,
// row unchanged, no activity at all, epoch stays 1.
func testS02SameRunRetry(t *testing.T, open opener) {
	e := newEnv(t, open)
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	r1 := openRun(t, e.st, e.a)
	first := mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
	nActivity := len(e.issueActivity(t, i1.ID, ""))

	for i := range 3 {
		got, res := checkoutResult(t, e.st, r1, i1.ID, clasp.IssueTodo, clasp.IssueBacklog, clasp.IssueBlocked, clasp.IssueInReview)
		if want := (store.CheckoutResult{SameRun: true}); res != want {
			t.Errorf("retry %d: checkout result %+v, want %+v", i+1, res, want)
		}
		if diff := cmp.Diff(first, got); diff != "" {
			t.Errorf("retry %d: answer differs from the first (-first +retry):\n%s", i+1, diff)
		}
	}
	wantUnchanged(t, "after retries", e.st, first)
	if n := len(e.issueActivity(t, i1.ID, "")); n != nActivity {
		t.Errorf("activity rows of the issue after retries: got %d, want %d (a same-run retry writes none)", n, nActivity)
	}
	e.wantLockActivity(t, "after retries", i1.ID, map[string]int{clasp.ActionIssueCheckedOut: 1})
}

// S03: two running runs of the same agent race for an issue assigned to it,
// 100 times on fresh issues: exactly one wins each time; the loser gets 409
// checkout_conflict naming the winner; the row names the winner.
func testS03TwoRunsSameAgentRace(t *testing.T, open opener) {
	e := newEnv(t, open)
	runs := []*clasp.Run{openRun(t, e.st, e.a), openRun(t, e.st, e.a)}
	const n = 100
	for k := range n {
		iss := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
		var got [2]*clasp.Issue
		var errs [2]error
		race(2, func(i int) { got[i], errs[i] = checkout(t.Context(), e.st, runs[i], iss.ID, clasp.IssueTodo) })

		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("round %d: got errors %v and %v, want exactly one success", k, errs[0], errs[1])
		}
		w, l := 0, 1
		if errs[0] != nil {
			w, l = 1, 0
		}
		what := fmt.Sprintf("round %d loser", k)
		wantConflict(t, what, errs[l], map[string]string{
			"issueId": iss.ID, "status": string(clasp.IssueInProgress), "assigneeAgentId": e.a.ID,
			"checkoutRunId": runs[w].ID, "executionRunId": runs[w].ID, "reason": clasp.ReasonHeldByLiveRun,
		})
		wantLock(t, fmt.Sprintf("round %d winner answer", k), got[w], held(e.a.ID, runs[w].ID, 1))
		wantLock(t, fmt.Sprintf("round %d row", k), getIssue(t, e.st, iss.ID), held(e.a.ID, runs[w].ID, 1))
		if t.Failed() {
			t.FailNow()
		}
	}
	rows := allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID, Action: clasp.ActionIssueCheckedOut})
	perIssue := map[string]int{}
	for _, a := range rows {
		perIssue[a.EntityID]++
	}
	if len(rows) != n || len(perIssue) != n {
		t.Errorf("issue.checked_out rows: got %d over %d issues, want %d over %d", len(rows), len(perIssue), n, n)
	}
}

// S04: 32 runs of 32 agents race for one unassigned todo issue, round after
// round (200, or 25 with -short or -race): exactly one winner per round,
// every loser 409 checkout_conflict, the epoch rises by one per round. The
// winner releases with unassign to reset the issue for the next round.
func testS04ManyAgentsRace(t *testing.T, open opener) {
	st, _ := open(t)
	co := newCompany(t, st, "RACE")
	const nAgents = 32
	rounds := scale(200, 25)
	runs := make([]*clasp.Run, nAgents)
	for i := range runs {
		runs[i] = openRun(t, st, newAgent(t, st, co.ID, fmt.Sprintf("agent-%02d", i)))
	}
	iss := newIssue(t, st, co.ID, clasp.IssueTodo, "")

	for round := 1; round <= rounds; round++ {
		var errs [nAgents]error
		race(nAgents, func(i int) { _, errs[i] = checkout(t.Context(), st, runs[i], iss.ID, clasp.IssueTodo) })
		winner := -1
		for i, err := range errs {
			switch clasp.ErrorCode(err) {
			case "":
				if winner >= 0 {
					t.Fatalf("round %d: runs %d and %d both won", round, winner, i)
				}
				winner = i
			case clasp.CodeCheckoutConflict:
			default:
				t.Fatalf("round %d: run %d got error %v, want nil or %s", round, i, err, clasp.CodeCheckoutConflict)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no winner", round)
		}
		w := runs[winner]
		wantLock(t, fmt.Sprintf("round %d row", round), getIssue(t, st, iss.ID), held(w.AgentID, w.ID, int64(round)))
		rel, err := release(t.Context(), st, runActor(w), iss.ID, true)
		if err != nil {
			t.Fatalf("round %d: winner's release: %v", round, err)
		}
		wantLock(t, fmt.Sprintf("round %d after release", round), rel, lockState{Status: clasp.IssueTodo, Epoch: int64(round)})
		if t.Failed() {
			t.FailNow()
		}
	}
	got := lockCounts(t, st, co.ID, iss.ID)
	want := map[string]int{clasp.ActionIssueCheckedOut: rounds, clasp.ActionIssueReleased: rounds}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lock activity counts mismatch (-want +got):\n%s", diff)
	}
}

// S05: an issue held by a live run R1 of A: R2 (A, running) gets 409
// held_by_live_run on checkout and 409 ownership_conflict on PATCH and
// release, the issue unchanged; R1's own PATCH succeeds and keeps the lock.
func testS05HeldByLiveRun(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	r1, r2 := openRun(t, e.st, e.a), openRun(t, e.st, e.a)
	before := mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)

	_, err := checkout(ctx, e.st, r2, i1.ID, clasp.IssueTodo)
	wantConflict(t, "R2 checkout", err, map[string]string{
		"issueId": i1.ID, "status": string(clasp.IssueInProgress), "assigneeAgentId": e.a.ID,
		"checkoutRunId": r1.ID, "executionRunId": r1.ID, "reason": clasp.ReasonHeldByLiveRun,
	})
	wantUnchanged(t, "after R2 checkout", e.st, before)

	_, err = e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i1.ID, Title: ptr("taken over"), Actor: runActor(r2)})
	wantCode(t, "R2 PATCH", err, clasp.CodeOwnershipConflict)
	wantUnchanged(t, "after R2 PATCH", e.st, before)

	_, err = release(ctx, e.st, runActor(r2), i1.ID, false)
	wantCode(t, "R2 release", err, clasp.CodeOwnershipConflict)
	wantUnchanged(t, "after R2 release", e.st, before)

	got, err := e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i1.ID, Description: ptr("R1 at work"), Actor: runActor(r1)})
	if err != nil {
		t.Fatalf("R1 PATCH: got error %v, want nil", err)
	}
	if got.Description != "R1 at work" {
		t.Errorf("R1 PATCH description: got %q, want %q", got.Description, "R1 at work")
	}
	wantLock(t, "after R1 PATCH", got, held(e.a.ID, r1.ID, 1))
	e.wantLockActivity(t, "end", i1.ID, map[string]int{clasp.ActionIssueCheckedOut: 1})
}

// S06: an issue whose holder R1 is dead (terminal, missing or lost) is
// adopted by R2 of the same agent in its checkout (rule L3): both locks R2,
// epoch 2, one issue.checkout_lock_adopted {previousCheckoutRunId,
// previousExecutionRunId, why} besides the second issue.checked_out.
func testS06AdoptDeadHolder(t *testing.T, open opener) {
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
			i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
			r1 := openRun(t, e.st, e.a)
			mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
			if err := tc.kill(e, t, r1.ID); err != nil {
				t.Fatalf("setup: make R1 %s: %v", tc.why, err)
			}
			r2 := openRun(t, e.st, e.a)
			got, res := checkoutResult(t, e.st, r2, i1.ID, clasp.IssueTodo)
			if want := (store.CheckoutResult{AdoptedWhy: tc.why}); res != want {
				t.Errorf("checkout result: got %+v, want %+v", res, want)
			}
			wantLock(t, "R2 checkout answer", got, held(e.a.ID, r2.ID, 2))
			wantLock(t, "row", getIssue(t, e.st, i1.ID), held(e.a.ID, r2.ID, 2))
			e.wantLockActivity(t, "after adoption", i1.ID, map[string]int{clasp.ActionIssueCheckedOut: 2, clasp.ActionIssueLockAdopted: 1})
			a := e.oneActivity(t, i1.ID, clasp.ActionIssueLockAdopted)
			wantDetails(t, "adoption", a, map[string]string{"previousCheckoutRunId": r1.ID, "previousExecutionRunId": r1.ID, "why": tc.why})
			if deref(a.RunID) != r2.ID {
				t.Errorf("adoption runId: got %q, want %q", deref(a.RunID), r2.ID)
			}
			co := e.issueActivity(t, i1.ID, clasp.ActionIssueCheckedOut)
			wantDetails(t, "newest checked_out", co[0], map[string]string{"agentId": e.a.ID, "runId": r2.ID, "checkoutEpoch": "2"})
			if co[0].ID <= a.ID { // the adoption is written first
				t.Errorf("activity order: issue.checked_out %d is not after issue.checkout_lock_adopted %d", co[0].ID, a.ID)
			}
		})
	}
}

// S07: a todo issue assigned to B whose execution lock names a succeeded
// run of A (checkout lock empty) is checked out by B's R2: both locks R2,
// and the dead execution holder is adopted (why terminal). An execution lock
// naming a live run, by contrast, blocks the checkout (held_by_live_run).
func testS07DeadExecutionLock(t *testing.T, open opener) {
	t.Run("dead", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.b.ID)
		r1 := openRun(t, e.st, e.a)
		if _, err := finish(t.Context(), e.st, r1, clasp.RunSucceeded); err != nil {
			t.Fatalf("setup: finish R1: %v", err)
		}
		if err := e.h.ForceIssueLocks(t.Context(), i1.ID, clasp.IssueTodo, &e.b.ID, nil, &r1.ID); err != nil {
			t.Fatalf("setup: force locks: %v", err)
		}
		r2 := openRun(t, e.st, e.b)
		got := mustCheckout(t, e.st, r2, i1.ID, clasp.IssueTodo)
		wantLock(t, "R2 checkout", got, held(e.b.ID, r2.ID, 1))
		e.wantLockActivity(t, "after checkout", i1.ID, map[string]int{clasp.ActionIssueCheckedOut: 1, clasp.ActionIssueLockAdopted: 1})
		a := e.oneActivity(t, i1.ID, clasp.ActionIssueLockAdopted)
		wantDetails(t, "adoption", a, map[string]string{"previousCheckoutRunId": "", "previousExecutionRunId": r1.ID, "why": "terminal"})
	})
	t.Run("live", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.b.ID)
		r1 := openRun(t, e.st, e.a)
		if err := e.h.ForceIssueLocks(t.Context(), i1.ID, clasp.IssueTodo, &e.b.ID, nil, &r1.ID); err != nil {
			t.Fatalf("setup: force locks: %v", err)
		}
		before := getIssue(t, e.st, i1.ID)
		r2 := openRun(t, e.st, e.b)
		_, err := checkout(t.Context(), e.st, r2, i1.ID, clasp.IssueTodo)
		wantConflict(t, "R2 checkout", err, map[string]string{
			"issueId": i1.ID, "status": string(clasp.IssueTodo), "assigneeAgentId": e.b.ID,
			"checkoutRunId": "", "executionRunId": r1.ID, "reason": clasp.ReasonHeldByLiveRun,
		})
		wantUnchanged(t, "after R2 checkout", e.st, before)
		e.wantLockActivity(t, "after refused checkout", i1.ID, nil)
	})
}

// S08: an in_progress issue assigned to A with no lock: B's run gets 409
// assigned_to_other_agent; A's R1 checks it out with [todo] (the
// in_progress-and-mine clause of L1); B's run still gets
// assigned_to_other_agent.
func testS08InProgressUnlocked(t *testing.T, open opener) {
	e := newEnv(t, open)
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
	if err := e.h.ForceIssueLocks(t.Context(), i1.ID, clasp.IssueInProgress, &e.a.ID, nil, nil); err != nil {
		t.Fatalf("setup: force in_progress: %v", err)
	}
	before := getIssue(t, e.st, i1.ID)
	r1, r2 := openRun(t, e.st, e.a), openRun(t, e.st, e.b)

	_, err := checkout(t.Context(), e.st, r2, i1.ID, clasp.IssueTodo)
	wantConflict(t, "B checkout before", err, map[string]string{
		"issueId": i1.ID, "status": string(clasp.IssueInProgress), "assigneeAgentId": e.a.ID,
		"checkoutRunId": "", "executionRunId": "", "reason": clasp.ReasonAssignedToOtherAgent,
	})
	wantUnchanged(t, "after B checkout", e.st, before)

	got := mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
	wantLock(t, "A checkout", got, held(e.a.ID, r1.ID, 1))

	_, err = checkout(t.Context(), e.st, r2, i1.ID, clasp.IssueTodo)
	wantConflict(t, "B checkout after", err, map[string]string{
		"issueId": i1.ID, "assigneeAgentId": e.a.ID, "checkoutRunId": r1.ID, "reason": clasp.ReasonAssignedToOtherAgent,
	})
	e.wantLockActivity(t, "end", i1.ID, map[string]int{clasp.ActionIssueCheckedOut: 1})
}

// S09: an issue assigned to A: B's run gets 409 assigned_to_other_agent and
// the issue is unchanged. (The agent_mismatch half of S09 is checked by the
// caller before the store, see store.IssueCheckoutParams.)
func testS09AssignedToOtherAgent(t *testing.T, open opener) {
	e := newEnv(t, open)
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
	rb := openRun(t, e.st, e.b)
	_, err := checkout(t.Context(), e.st, rb, i1.ID, clasp.IssueTodo)
	wantConflict(t, "B checkout", err, map[string]string{
		"issueId": i1.ID, "status": string(clasp.IssueTodo), "assigneeAgentId": e.a.ID,
		"checkoutRunId": "", "executionRunId": "", "reason": clasp.ReasonAssignedToOtherAgent,
	})
	wantUnchanged(t, "after B checkout", e.st, i1)
	e.wantLockActivity(t, "end", i1.ID, nil)
}

// S10 (store level): expecting a closed status is 422 precondition_failed
// with the issue unchanged; a done issue checked out expecting todo is 409
// status_not_expected.
func testS10ClosedStatuses(t *testing.T, open opener) {
	e := newEnv(t, open)
	r1 := openRun(t, e.st, e.a)
	for _, status := range []clasp.IssueStatus{clasp.IssueDone, clasp.IssueCancelled} {
		iss := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
		iss, err := e.st.IssueUpdate(t.Context(), &store.IssueUpdateParams{Ref: iss.ID, Status: &status, Actor: boardActor()})
		if err != nil {
			t.Fatalf("setup: board PATCH status %s: %v", status, err)
		}
		for _, expected := range [][]clasp.IssueStatus{
			{clasp.IssueDone}, {clasp.IssueCancelled}, {clasp.IssueTodo, clasp.IssueDone}, {clasp.IssueCancelled, clasp.IssueBacklog},
		} {
			what := fmt.Sprintf("%s issue, expected %v", status, expected)
			_, err := checkout(t.Context(), e.st, r1, iss.ID, expected...)
			wantCode(t, what, err, clasp.CodePreconditionFailed)
			wantUnchanged(t, what, e.st, iss)
		}
		_, err = checkout(t.Context(), e.st, r1, iss.ID, clasp.IssueTodo)
		wantConflict(t, fmt.Sprintf("%s issue, expected [todo]", status), err, map[string]string{
			"issueId": iss.ID, "status": string(status), "assigneeAgentId": "",
			"checkoutRunId": "", "executionRunId": "", "reason": clasp.ReasonStatusNotExpected,
		})
		wantUnchanged(t, "after [todo]", e.st, iss)
		e.wantLockActivity(t, string(status), iss.ID, nil)
	}
}

// S11 (store level): RunTouch answers 422 run_not_found for an unknown run,
// 403 run_not_owned for another agent's run, 409 run_not_live for a terminal
// or lost run, and renews a live run's lease.
func testS11RunTouchCodes(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	touch := func(runID, agentID string) (*clasp.Run, error) {
		return e.st.RunTouch(ctx, &store.RunTouchParams{RunID: runID, AgentID: agentID, LeaseTTL: 2 * leaseTTL, Force: true})
	}
	_, err := touch("00000000-0000-4000-8000-000000000000", e.a.ID)
	wantCode(t, "unknown run", err, clasp.CodeRunNotFound)

	rb := openRun(t, e.st, e.b)
	_, err = touch(rb.ID, e.a.ID)
	wantCode(t, "B's run named by A", err, clasp.CodeRunNotOwned)

	done := openRun(t, e.st, e.a)
	if _, err := finish(ctx, e.st, done, clasp.RunSucceeded); err != nil {
		t.Fatalf("setup: finish: %v", err)
	}
	_, err = touch(done.ID, e.a.ID)
	wantCode(t, "succeeded run", err, clasp.CodeRunNotLive)

	lost := openRun(t, e.st, e.a)
	if err := e.h.ExpireRunLease(ctx, lost.ID); err != nil {
		t.Fatalf("setup: expire: %v", err)
	}
	_, err = touch(lost.ID, e.a.ID)
	wantCode(t, "lost run", err, clasp.CodeRunNotLive)
	if r := getRun(t, e.st, lost.ID); r.Status != clasp.RunRunning {
		t.Errorf("lost run after refused touch: got status %s, want running (only the sweeper fails it)", r.Status)
	}

	live := openRun(t, e.st, e.a)
	got, err := touch(live.ID, e.a.ID)
	if err != nil {
		t.Fatalf("live run touch: got error %v, want nil", err)
	}
	if got.Status != clasp.RunRunning || got.LeaseExpiresAt == nil || live.LeaseExpiresAt == nil || !got.LeaseExpiresAt.After(*live.LeaseExpiresAt) {
		t.Errorf("live run touch: got status %s lease %v, want running with lease after %v", got.Status, got.LeaseExpiresAt, live.LeaseExpiresAt)
	}
	if got.LastSignOfLifeAt == nil {
		t.Errorf("live run touch: lastSignOfLifeAt nil, want set")
	}
	if r := getRun(t, e.st, live.ID); r.LeaseExpiresAt == nil || !r.LeaseExpiresAt.Equal(*got.LeaseExpiresAt) {
		t.Errorf("stored lease: got %v, want %v", r.LeaseExpiresAt, got.LeaseExpiresAt)
	}
}

// S12: the board checks out an issue for A: in_progress, assignee A, no lock,
// epoch unchanged; A's run then checks it out and holds it.
func testS12BoardCheckout(t *testing.T, open opener) {
	e := newEnv(t, open)
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	got, err := e.st.IssueCheckout(t.Context(), &store.IssueCheckoutParams{
		Ref: i1.ID, AgentID: e.a.ID, ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}, LeaseTTL: leaseTTL, Actor: boardActor(),
	})
	if err != nil {
		t.Fatalf("board checkout: got error %v, want nil", err)
	}
	wantLock(t, "board checkout", got, lockState{Status: clasp.IssueInProgress, Assignee: e.a.ID})
	before := lockCounts(t, e.st, e.co.ID, i1.ID)

	r1 := openRun(t, e.st, e.a)
	got = mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
	wantLock(t, "A's checkout", got, held(e.a.ID, r1.ID, 1))
	after := lockCounts(t, e.st, e.co.ID, i1.ID)
	if d := after[clasp.ActionIssueCheckedOut] - before[clasp.ActionIssueCheckedOut]; d != 1 {
		t.Errorf("issue.checked_out rows written by A's checkout: got %d, want 1", d)
	}
	if d := after[clasp.ActionIssueLockAdopted] - before[clasp.ActionIssueLockAdopted]; d != 0 {
		t.Errorf("adoption rows written by A's checkout: got %d, want 0 (no holder to adopt)", d)
	}
}
