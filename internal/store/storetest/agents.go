package storetest

import (
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// Terminating an agent (issue: it left its runs running and their locks
// held) ends, in the same transaction, its queued and running runs (lost
// ones too) as cancelled with errorCode agent_terminated, one run.finished
// row each, and clears every lock naming them with one issue.lock_released
// {runId, runStatus: cancelled} per issue (rule L6, as a finish). Its ended
// runs stay ended, their tokens stop working; other agents' runs and
// locks, and its own terminal runs, are untouched.
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
		wantLock(t, c.iss.Identifier+" after termination", row, lockState{Status: clasp.IssueInProgress, Assignee: e.a.ID, Epoch: 1})
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
