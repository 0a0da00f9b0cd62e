package storetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// Terminating an agent (issue: it left its runs running and their locks
// held) ends, in the same transaction, its queued and running runs (lost
// ones too) as cancelled with errorCode agent_terminated, one run.finished
// row each, and clears every lock naming them with one issue.lock_released
// {runId, runStatus: cancelled} per issue (rule L6, as a finish); the
// issues it held are then unassigned and back to todo (checkoutEpoch
// kept). Its ended runs stay ended, their tokens stop working; other
// agents' runs and locks, and its own terminal runs, are untouched.
func testAgentTerminateEndsRunsAndLocks(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	i2 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	i3 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	p1 := runOpenParams(e.a, leaseTTL)
	r1, err := e.st.RunOpen(ctx, p1)
	if err != nil {
		t.Fatalf("setup: open R1: %v", err)
	}
	mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
	lost := openRun(t, e.st, e.a)
	mustCheckout(t, e.st, lost, i2.ID, clasp.IssueTodo)
	if err := e.h.ExpireRunLease(ctx, lost.ID); err != nil {
		t.Fatalf("setup: expire: %v", err)
	}
	queued := openRun(t, e.st, e.a)
	if err := e.h.SetRunStatus(ctx, queued.ID, clasp.RunQueued); err != nil {
		t.Fatalf("setup: queue: %v", err)
	}
	done := openRun(t, e.st, e.a)
	if _, err := finish(ctx, e.st, done, clasp.RunSucceeded); err != nil {
		t.Fatalf("setup: finish: %v", err)
	}
	rb := openRun(t, e.st, e.b)
	mustCheckout(t, e.st, rb, i3.ID, clasp.IssueTodo)

	a, err := e.st.AgentUpdate(ctx, &store.AgentUpdateParams{AgentID: e.a.ID, Status: ptr(clasp.AgentTerminated), Actor: boardActor()})
	if err != nil || a.Status != clasp.AgentTerminated {
		t.Fatalf("terminate A: got %+v, %v, want terminated", a, err)
	}
	for _, r := range []*clasp.Run{r1, lost, queued} {
		got := getRun(t, e.st, r.ID)
		if got.Status != clasp.RunCancelled || deref(got.ErrorCode) != clasp.RunErrorAgentTerminated || got.FinishedAt == nil {
			t.Errorf("run %s after termination: got status %s errorCode %q finishedAt %v, want cancelled, agent_terminated, set",
				r.ID, got.Status, deref(got.ErrorCode), got.FinishedAt)
		}
		fin := allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID, EntityID: r.ID, Action: clasp.ActionRunFinished})
		if len(fin) != 1 {
			t.Errorf("run.finished rows of run %s: got %d, want 1", r.ID, len(fin))
		} else {
			wantDetails(t, "run.finished", fin[0], map[string]string{"status": string(clasp.RunCancelled), "errorCode": clasp.RunErrorAgentTerminated})
		}
	}
	if got := getRun(t, e.st, done.ID); got.Status != clasp.RunSucceeded {
		t.Errorf("A's finished run: got status %s, want succeeded (terminal runs never change)", got.Status)
	}
	if got := getRun(t, e.st, rb.ID); got.Status != clasp.RunRunning {
		t.Errorf("B's run: got status %s, want running", got.Status)
	}
	for _, c := range []struct {
		iss *clasp.Issue
		run *clasp.Run
	}{{i1, r1}, {i2, lost}} {
		row := getIssue(t, e.st, c.iss.ID)
		wantLock(t, c.iss.Identifier+" after termination", row, lockState{Status: clasp.IssueTodo, Epoch: 1})
		checkL7(t, "after termination", row)
		rel := e.oneActivity(t, c.iss.ID, clasp.ActionIssueLockReleased)
		wantDetails(t, c.iss.Identifier, rel, map[string]string{"runId": c.run.ID, "runStatus": string(clasp.RunCancelled)})
		e.wantLockActivity(t, c.iss.Identifier, c.iss.ID, map[string]int{clasp.ActionIssueCheckedOut: 1, clasp.ActionIssueLockReleased: 1})
	}
	wantLock(t, "B's issue", getIssue(t, e.st, i3.ID), held(e.b.ID, rb.ID, 1))

	_, _, err = e.st.RunAuthenticate(ctx, p1.TokenHash)
	wantCode(t, "token of a run of a terminated agent", err, clasp.CodeUnauthenticated)
	_, err = e.st.RunTouch(ctx, &store.RunTouchParams{RunID: r1.ID, AgentID: e.a.ID, LeaseTTL: leaseTTL, Force: true})
	wantCode(t, "touch of a run of a terminated agent", err, clasp.CodeRunNotLive)
}

// terminated is final (issue: un-terminating an agent revived its old run
// tokens): any other status answers 422 precondition_failed and changes
// nothing; terminating again is allowed. Pausing and resuming an agent
// leave its runs alone.
func testAgentTerminatedIsFinal(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	rb := openRun(t, e.st, e.b)
	for _, st := range []clasp.AgentStatus{clasp.AgentPaused, clasp.AgentActive} {
		if _, err := e.st.AgentUpdate(ctx, &store.AgentUpdateParams{AgentID: e.b.ID, Status: ptr(st), Actor: boardActor()}); err != nil {
			t.Fatalf("set B %s: %v", st, err)
		}
	}
	if got := getRun(t, e.st, rb.ID); got.Status != clasp.RunRunning {
		t.Errorf("B's run after pause and resume: got %s, want running", got.Status)
	}

	if _, err := e.st.AgentUpdate(ctx, &store.AgentUpdateParams{AgentID: e.a.ID, Status: ptr(clasp.AgentTerminated), Actor: boardActor()}); err != nil {
		t.Fatalf("terminate A: %v", err)
	}
	for _, st := range []clasp.AgentStatus{clasp.AgentActive, clasp.AgentPaused} {
		_, err := e.st.AgentUpdate(ctx, &store.AgentUpdateParams{AgentID: e.a.ID, Status: ptr(st), Actor: boardActor()})
		wantCode(t, "terminated to "+string(st), err, clasp.CodePreconditionFailed)
		if e := clasp.AsError(err); e != nil && e.Details["field"] != "status" {
			t.Errorf("terminated to %s: details %v, want field status", st, e.Details)
		}
	}
	if a, err := e.st.AgentGet(ctx, e.a.ID); err != nil || a.Status != clasp.AgentTerminated {
		t.Errorf("A after refused updates: got %+v, %v, want terminated", a, err)
	}
	if _, err := e.st.AgentUpdate(ctx, &store.AgentUpdateParams{AgentID: e.a.ID, Status: ptr(clasp.AgentTerminated), Actor: boardActor()}); err != nil {
		t.Errorf("terminate A again: got %v, want nil", err)
	}
	_, err := e.st.RunOpen(ctx, runOpenParams(e.a, leaseTTL))
	wantCode(t, "run of a terminated agent", err, clasp.CodeForbidden)
}

// causeAgentTerminated is the cause of the rows written for the issues a
// terminated agent was assigned.
const causeAgentTerminated = "agent_terminated"

// Terminating an agent (rule L6, agent terminated) also unassigns, in the
// same transaction, every issue assigned to it that is not done or
// cancelled: in_progress becomes todo, other statuses stay, any lock left
// on it (here the checkout of a run of its that failed before and was not
// swept) is cleared, checkoutEpoch stays; one issue.updated {changes,
// cause: agent_terminated} each, after an issue.released {unassigned,
// cause: agent_terminated} where a lock was cleared (L7). Closed issues
// keep it as their assignee, other agents' issues are untouched. Another
// agent can then check the issues out and claim them at once, without the
// board; terminating it again writes nothing.
func testAgentTerminateUnassignsOpenIssues(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	ra := openRun(t, e.st, e.a)
	mine := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	mustCheckout(t, e.st, ra, mine.ID, clasp.IssueTodo)
	dead := openRun(t, e.st, e.a)
	stale := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	mustCheckout(t, e.st, dead, stale.ID, clasp.IssueTodo)
	if err := e.h.SetRunStatus(ctx, dead.ID, clasp.RunFailed); err != nil {
		t.Fatalf("setup: fail run: %v", err)
	}
	todo := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
	blocked := newIssue(t, e.st, e.co.ID, clasp.IssueBlocked, e.a.ID)
	closed := newIssue(t, e.st, e.co.ID, clasp.IssueDone, e.a.ID)
	rb := openRun(t, e.st, e.b)
	ofB := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.b.ID)
	closedBefore, ofBBefore := getIssue(t, e.st, closed.ID), getIssue(t, e.st, ofB.ID)

	if _, err := e.st.AgentUpdate(ctx, &store.AgentUpdateParams{AgentID: e.a.ID, Status: ptr(clasp.AgentTerminated), Actor: boardActor()}); err != nil {
		t.Fatalf("terminate A: %v", err)
	}
	for _, c := range []struct {
		name       string
		iss        *clasp.Issue
		want       lockState
		from       clasp.IssueStatus // the status it had when it changed
		lockCounts map[string]int
		cleared    *clasp.Run // the run whose lock the unassignment cleared
	}{
		{"held by A's live run", mine, lockState{Status: clasp.IssueTodo, Epoch: 1}, clasp.IssueInProgress,
			map[string]int{clasp.ActionIssueCheckedOut: 1, clasp.ActionIssueLockReleased: 1}, nil},
		{"held by A's failed, unswept run", stale, lockState{Status: clasp.IssueTodo, Epoch: 1}, clasp.IssueInProgress,
			map[string]int{clasp.ActionIssueCheckedOut: 1, clasp.ActionIssueReleased: 1}, dead},
		{"todo of A", todo, lockState{Status: clasp.IssueTodo}, "", nil, nil},
		{"blocked of A", blocked, lockState{Status: clasp.IssueBlocked}, "", nil, nil},
	} {
		row := getIssue(t, e.st, c.iss.ID)
		wantLock(t, c.name+" after termination", row, c.want)
		checkL7(t, c.name+" after termination", row)
		e.wantLockActivity(t, c.name, c.iss.ID, c.lockCounts)
		var upd *clasp.Activity
		for _, a := range e.issueActivity(t, c.iss.ID, clasp.ActionIssueUpdated) {
			if asString(details(t, a)["cause"]) == causeAgentTerminated {
				if upd != nil {
					t.Fatalf("%s: two issue.updated rows with cause agent_terminated", c.name)
				}
				upd = a
			}
		}
		if upd == nil {
			t.Errorf("%s: no issue.updated row with cause agent_terminated", c.name)
			continue
		}
		changes, _ := details(t, upd)["changes"].(map[string]any)
		want := map[string]any{"assigneeAgentId": map[string]any{"from": e.a.ID, "to": nil}}
		if c.from != "" {
			want["status"] = map[string]any{"from": string(c.from), "to": string(c.want.Status)}
		}
		if diff := cmp.Diff(want, changes); diff != "" {
			t.Errorf("%s: issue.updated changes mismatch (-want +got):\n%s", c.name, diff)
		}
		if c.cleared != nil {
			wantDetails(t, c.name, upd, map[string]string{"locksCleared": "true",
				"previousCheckoutRunId": c.cleared.ID, "previousExecutionRunId": c.cleared.ID})
			rel := e.oneActivity(t, c.iss.ID, clasp.ActionIssueReleased)
			wantDetails(t, c.name, rel, map[string]string{"cause": causeAgentTerminated, "unassigned": "true",
				"previousCheckoutRunId": c.cleared.ID, "previousExecutionRunId": c.cleared.ID})
		} else if _, ok := details(t, upd)["locksCleared"]; ok {
			t.Errorf("%s: issue.updated %s says locksCleared, want no lock cleared", c.name, upd.Details)
		}
	}
	wantUnchanged(t, "done issue of A", e.st, closedBefore)
	wantUnchanged(t, "issue of B", e.st, ofBBefore)

	// Free for anyone: B's run checks out the issue A held (the next epoch)
	// and claims, oldest first, the two other todo issues A had.
	wantLock(t, "B's checkout of the issue A held", mustCheckout(t, e.st, rb, mine.ID, clasp.IssueTodo), held(e.b.ID, rb.ID, 2))
	if got := claimID(t, e.st, rb, store.ClaimUnassigned); got != stale.Identifier {
		t.Errorf("B's claim of unassigned work: got %q, want %s", got, stale.Identifier)
	}
	if got := claimID(t, e.st, rb, store.ClaimUnassigned); got != todo.Identifier {
		t.Errorf("B's second claim of unassigned work: got %q, want %s", got, todo.Identifier)
	}

	issueRows := func() (n int) {
		for _, a := range allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID}) {
			if a.EntityType == "issue" {
				n++
			}
		}
		return n
	}
	before, blockedBefore := issueRows(), getIssue(t, e.st, blocked.ID)
	if _, err := e.st.AgentUpdate(ctx, &store.AgentUpdateParams{AgentID: e.a.ID, Status: ptr(clasp.AgentTerminated), Actor: boardActor()}); err != nil {
		t.Fatalf("terminate A again: %v", err)
	}
	wantUnchanged(t, "blocked issue after terminating A again", e.st, blockedBefore)
	if got := issueRows(); got != before {
		t.Errorf("activity rows of issues after terminating A again: got %d, want %d (none new)", got, before)
	}
}
