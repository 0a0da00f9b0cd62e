package storetest

import (
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// S13: the holding run releases (rule L4): todo, locks empty, assignee kept
// (cleared with unassign), epoch kept, one issue.released. The board may
// release too. Releasing an unlocked issue is a no-op with no activity.
func testS13Release(t *testing.T, open opener) {
	cases := []struct {
		name     string
		unassign bool
		byBoard  bool
	}{
		{"keep_assignee", false, false},
		{"unassign", true, false},
		{"board", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, open)
			i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
			r1 := openRun(t, e.st, e.a)
			mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
			actor := runActor(r1)
			if tc.byBoard {
				actor = boardActor()
			}
			got, err := release(t.Context(), e.st, actor, i1.ID, tc.unassign)
			if err != nil {
				t.Fatalf("release: got error %v, want nil", err)
			}
			want := lockState{Status: clasp.IssueTodo, Assignee: e.a.ID, Epoch: 1}
			if tc.unassign {
				want.Assignee = ""
			}
			wantLock(t, "release answer", got, want)
			wantLock(t, "row", getIssue(t, e.st, i1.ID), want)
			if got.ExecutionAgentNameKey != nil || got.ExecutionLockedAt != nil {
				t.Errorf("execution lock after release: got name key %v, locked at %v, want both nil", deref(got.ExecutionAgentNameKey), got.ExecutionLockedAt)
			}
			e.wantLockActivity(t, "after release", i1.ID, map[string]int{clasp.ActionIssueCheckedOut: 1, clasp.ActionIssueReleased: 1})
		})
	}
	t.Run("no_lock_noop", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
		r1 := openRun(t, e.st, e.a)
		if _, err := release(t.Context(), e.st, runActor(r1), i1.ID, false); err != nil {
			t.Fatalf("release of an unlocked issue: got error %v, want nil", err)
		}
		wantUnchanged(t, "after no-op release", e.st, i1)
		e.wantLockActivity(t, "after no-op release", i1.ID, nil)
	})
}

// S14: R1 holds I1 and has failed (raw status change, locks left): B, not
// the assignee, gets 409 ownership_conflict; R2 of the assignee A releases
// (adopting the dead holder): todo, locks empty, assignee A, one
// issue.released; epoch equals the number of issue.checked_out rows.
func testS14ReleaseDeadHolder(t *testing.T, open opener) {
	e := newEnv(t, open)
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	r1 := openRun(t, e.st, e.a)
	mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
	if err := e.h.SetRunStatus(t.Context(), r1.ID, clasp.RunFailed); err != nil {
		t.Fatalf("setup: fail R1: %v", err)
	}
	before := getIssue(t, e.st, i1.ID)

	rb := openRun(t, e.st, e.b)
	_, err := release(t.Context(), e.st, runActor(rb), i1.ID, false)
	wantCode(t, "B's release", err, clasp.CodeOwnershipConflict)
	wantUnchanged(t, "after B's release", e.st, before)

	r2 := openRun(t, e.st, e.a)
	got, err := release(t.Context(), e.st, runActor(r2), i1.ID, false)
	if err != nil {
		t.Fatalf("R2's release: got error %v, want nil", err)
	}
	if got.Status != clasp.IssueTodo || deref(got.AssigneeAgentID) != e.a.ID || got.CheckoutRunID != nil || got.ExecutionRunID != nil {
		t.Errorf("after R2's release: got %+v, want todo, assignee A, no locks", lockOf(got))
	}
	c := lockCounts(t, e.st, e.co.ID, i1.ID)
	if c[clasp.ActionIssueReleased] != 1 {
		t.Errorf("issue.released rows: got %d, want 1", c[clasp.ActionIssueReleased])
	}
	if int64(c[clasp.ActionIssueCheckedOut]) != got.CheckoutEpoch || got.CheckoutEpoch < 1 {
		t.Errorf("epoch %d with %d issue.checked_out rows, want equal and >= 1", got.CheckoutEpoch, c[clasp.ActionIssueCheckedOut])
	}
	for _, a := range []string{clasp.ActionIssueLockReleased, clasp.ActionIssueStaleLockCleared, clasp.ActionIssueForceRelease} {
		if c[a] != 0 {
			t.Errorf("%s rows: got %d, want 0", a, c[a])
		}
	}
}

// S15: R1 of A holds I1 and is running: B's run releases: 409
// ownership_conflict, I1 unchanged, no activity.
func testS15ReleaseByOtherAgent(t *testing.T, open opener) {
	e := newEnv(t, open)
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	r1 := openRun(t, e.st, e.a)
	before := mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
	for _, unassign := range []bool{false, true} {
		rb := openRun(t, e.st, e.b)
		_, err := release(t.Context(), e.st, runActor(rb), i1.ID, unassign)
		wantCode(t, "B's release", err, clasp.CodeOwnershipConflict)
		wantUnchanged(t, "after B's release", e.st, before)
	}
	e.wantLockActivity(t, "end", i1.ID, map[string]int{clasp.ActionIssueCheckedOut: 1})
}

// S16: the board's PATCH to done clears the locks in the same write and sets
// completedAt; its PATCH of the assignee clears them too, B's run then
// checks out, R1's late release and PATCH answer 409 and change nothing, and
// R1's finish leaves I2 held by R2 (rule L6).
func testS16BoardPatchReleases(t *testing.T, open opener) {
	t.Run("done", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
		r1 := openRun(t, e.st, e.a)
		mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
		got, err := e.st.IssueUpdate(t.Context(), &store.IssueUpdateParams{Ref: i1.ID, Status: ptr(clasp.IssueDone), Actor: boardActor()})
		if err != nil {
			t.Fatalf("board PATCH done: %v", err)
		}
		wantLock(t, "after PATCH done", got, lockState{Status: clasp.IssueDone, Assignee: e.a.ID, Epoch: 1})
		if got.CompletedAt == nil {
			t.Errorf("completedAt: got nil, want set")
		}
		wantLock(t, "row", getIssue(t, e.st, i1.ID), lockState{Status: clasp.IssueDone, Assignee: e.a.ID, Epoch: 1})
		// The PATCH's lock change has its one row: a release (L6, L7).
		e.wantLockActivity(t, "after PATCH done", i1.ID, map[string]int{clasp.ActionIssueCheckedOut: 1, clasp.ActionIssueReleased: 1})
	})
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
		r1 := openRun(t, e.st, e.a)
		mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
		got, err := e.st.IssueUpdate(t.Context(), &store.IssueUpdateParams{Ref: i1.ID, Status: ptr(clasp.IssueCancelled), Actor: boardActor()})
		if err != nil {
			t.Fatalf("board PATCH cancelled: %v", err)
		}
		wantLock(t, "after PATCH cancelled", got, lockState{Status: clasp.IssueCancelled, Assignee: e.a.ID, Epoch: 1})
		if got.CancelledAt == nil {
			t.Errorf("cancelledAt: got nil, want set")
		}
	})
	t.Run("reassign", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		ctx := t.Context()
		i2 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
		r1 := openRun(t, e.st, e.a)
		mustCheckout(t, e.st, r1, i2.ID, clasp.IssueTodo)
		got, err := e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i2.ID, AssigneeAgentID: &e.b.ID, Actor: boardActor()})
		if err != nil {
			t.Fatalf("board PATCH assignee B: %v", err)
		}
		if deref(got.AssigneeAgentID) != e.b.ID || got.CheckoutRunID != nil || got.ExecutionRunID != nil {
			t.Errorf("after reassignment: got %+v, want assignee B and no locks", lockOf(got))
		}
		r2 := openRun(t, e.st, e.b)
		got = mustCheckout(t, e.st, r2, i2.ID, clasp.IssueTodo)
		wantLock(t, "B's checkout", got, held(e.b.ID, r2.ID, 2))

		_, err = release(ctx, e.st, runActor(r1), i2.ID, false)
		wantCode(t, "R1's late release", err, clasp.CodeOwnershipConflict)
		wantUnchanged(t, "after R1's late release", e.st, got)
		_, err = e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i2.ID, Description: ptr("late"), Actor: runActor(r1)})
		wantCode(t, "R1's late PATCH", err, clasp.CodeOwnershipConflict)
		wantUnchanged(t, "after R1's late PATCH", e.st, got)

		if _, err := finish(ctx, e.st, r1, clasp.RunSucceeded); err != nil {
			t.Fatalf("R1 finish: %v", err)
		}
		wantLock(t, "after R1's finish", getIssue(t, e.st, i2.ID), held(e.b.ID, r2.ID, 2))
		e.wantLockActivity(t, "end", i2.ID, map[string]int{clasp.ActionIssueCheckedOut: 2, clasp.ActionIssueReleased: 1})
	})
}

// S17: the board's force-release of an issue held by a live run clears every
// lock, keeps (or with clearAssignee clears) the assignee and writes
// issue.admin_force_release {previousCheckoutRunId, previousExecutionRunId,
// reason}; an agent calling it gets 403 forbidden. The next checkout is a
// new acquisition (epoch 2).
func testS17ForceRelease(t *testing.T, open opener) {
	for _, clear := range []bool{false, true} {
		name := "keep_assignee"
		if clear {
			name = "clear_assignee"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, open)
			ctx := t.Context()
			i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
			r1 := openRun(t, e.st, e.a)
			before := mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)

			_, err := e.st.IssueForceRelease(ctx, &store.IssueForceReleaseParams{Ref: i1.ID, Reason: "mine now", Actor: runActor(r1)})
			wantCode(t, "agent force-release", err, clasp.CodeForbidden)
			wantUnchanged(t, "after agent force-release", e.st, before)

			got, err := e.st.IssueForceRelease(ctx, &store.IssueForceReleaseParams{Ref: i1.ID, Reason: "stuck", ClearAssignee: clear, Actor: boardActor()})
			if err != nil {
				t.Fatalf("board force-release: %v", err)
			}
			if got.CheckoutRunID != nil || got.ExecutionRunID != nil || got.ExecutionAgentNameKey != nil || got.ExecutionLockedAt != nil {
				t.Errorf("after force-release: got %+v, want every lock column empty", lockOf(got))
			}
			if wantA := map[bool]string{false: e.a.ID, true: ""}[clear]; deref(got.AssigneeAgentID) != wantA {
				t.Errorf("assignee after force-release: got %q, want %q", deref(got.AssigneeAgentID), wantA)
			}
			if got.CheckoutEpoch != 1 {
				t.Errorf("epoch after force-release: got %d, want 1", got.CheckoutEpoch)
			}
			checkL7(t, "after force-release", got)
			e.wantLockActivity(t, "after force-release", i1.ID, map[string]int{clasp.ActionIssueCheckedOut: 1, clasp.ActionIssueForceRelease: 1})
			a := e.oneActivity(t, i1.ID, clasp.ActionIssueForceRelease)
			wantDetails(t, "force-release", a, map[string]string{"previousCheckoutRunId": r1.ID, "previousExecutionRunId": r1.ID, "reason": "stuck"})
			if a.ActorType != clasp.ActorBoard {
				t.Errorf("force-release actorType: got %s, want board", a.ActorType)
			}

			if !clear {
				got = mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
				wantLock(t, "R1 checks out again", got, held(e.a.ID, r1.ID, 2))
			}
		})
	}
}

// L5: an agent never moves an issue into in_progress with a PATCH: 422
// precondition_failed, issue unchanged.
func testL5AgentPatchIntoInProgress(t *testing.T, open opener) {
	e := newEnv(t, open)
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
	r1 := openRun(t, e.st, e.a)
	_, err := e.st.IssueUpdate(t.Context(), &store.IssueUpdateParams{Ref: i1.ID, Status: ptr(clasp.IssueInProgress), Actor: runActor(r1)})
	wantCode(t, "agent PATCH in_progress", err, clasp.CodePreconditionFailed)
	wantUnchanged(t, "after agent PATCH", e.st, i1)
	e.wantLockActivity(t, "end", i1.ID, nil)
}

// L5: the board may move an issue into in_progress only with an assignee
// (else 422); the issue is then unlocked until the assignee's run checks it
// out.
func testL5BoardPatchIntoInProgress(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	_, err := e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i1.ID, Status: ptr(clasp.IssueInProgress), Actor: boardActor()})
	wantCode(t, "board PATCH in_progress without assignee", err, clasp.CodePreconditionFailed)
	wantUnchanged(t, "after refused PATCH", e.st, i1)

	got, err := e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i1.ID, Status: ptr(clasp.IssueInProgress), AssigneeAgentID: &e.a.ID, Actor: boardActor()})
	if err != nil {
		t.Fatalf("board PATCH in_progress with assignee: %v", err)
	}
	wantLock(t, "board PATCH", got, lockState{Status: clasp.IssueInProgress, Assignee: e.a.ID})

	r1 := openRun(t, e.st, e.a)
	got = mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
	wantLock(t, "A's checkout", got, held(e.a.ID, r1.ID, 1))
}

// L5: the holder's PATCH of title, priority, description and a comment keeps
// the lock and the epoch; the comment is written with it.
func testL5HolderPatchKeepsLock(t *testing.T, open opener) {
	e := newEnv(t, open)
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	r1 := openRun(t, e.st, e.a)
	mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
	got, err := e.st.IssueUpdate(t.Context(), &store.IssueUpdateParams{
		Ref: i1.ID, Title: ptr("renamed"), Priority: ptr(clasp.PriorityHigh), Description: ptr("d"), Comment: ptr("progress"), Actor: runActor(r1),
	})
	if err != nil {
		t.Fatalf("holder PATCH: %v", err)
	}
	if got.Title != "renamed" || got.Priority != clasp.PriorityHigh || got.Description != "d" {
		t.Errorf("holder PATCH: got title %q priority %s description %q, want renamed, high, d", got.Title, got.Priority, got.Description)
	}
	wantLock(t, "holder PATCH", got, held(e.a.ID, r1.ID, 1))
	cs, err := e.st.CommentList(t.Context(), &store.CommentListParams{Ref: i1.ID, Limit: 100})
	if err != nil {
		t.Fatalf("list comments: %v", err)
	}
	if len(cs) != 1 || cs[0].Body != "progress" || deref(cs[0].AuthorAgentID) != e.a.ID || deref(cs[0].RunID) != r1.ID {
		t.Errorf("comments after PATCH with comment: got %d (%+v), want one \"progress\" by A in R1", len(cs), cs)
	}
	e.wantLockActivity(t, "end", i1.ID, map[string]int{clasp.ActionIssueCheckedOut: 1})
}

// L5 with a dead holder: the assignee's live run may write the issue (it
// adopts the dead holder, as L3); the result keeps L7 and, if locked, names
// the writing run.
func testL5DeadHolderPatch(t *testing.T, open opener) {
	e := newEnv(t, open)
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	r1 := openRun(t, e.st, e.a)
	mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
	if err := e.h.SetRunStatus(t.Context(), r1.ID, clasp.RunFailed); err != nil {
		t.Fatalf("setup: fail R1: %v", err)
	}
	r2 := openRun(t, e.st, e.a)
	got, err := e.st.IssueUpdate(t.Context(), &store.IssueUpdateParams{Ref: i1.ID, Description: ptr("picked up"), Actor: runActor(r2)})
	if err != nil {
		t.Fatalf("R2 PATCH over dead holder: got error %v, want nil", err)
	}
	if got.Description != "picked up" {
		t.Errorf("description: got %q, want %q", got.Description, "picked up")
	}
	checkL7(t, "after PATCH", got)
	if got.CheckoutRunID != nil && *got.CheckoutRunID != r2.ID {
		t.Errorf("checkoutRunId after R2's PATCH: got %s (dead R1 = %s), want R2 %s or empty", *got.CheckoutRunID, r1.ID, r2.ID)
	}
	c := lockCounts(t, e.st, e.co.ID, i1.ID)
	if int64(c[clasp.ActionIssueCheckedOut]) != got.CheckoutEpoch {
		t.Errorf("epoch %d with %d issue.checked_out rows, want equal", got.CheckoutEpoch, c[clasp.ActionIssueCheckedOut])
	}
}

// L6: the holder's PATCH out of in_progress clears both locks in the same
// write and keeps the assignee and epoch.
func testL6HolderPatchLeavesInProgress(t *testing.T, open opener) {
	e := newEnv(t, open)
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	r1 := openRun(t, e.st, e.a)
	mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
	got, err := e.st.IssueUpdate(t.Context(), &store.IssueUpdateParams{Ref: i1.ID, Status: ptr(clasp.IssueInReview), Actor: runActor(r1)})
	if err != nil {
		t.Fatalf("holder PATCH in_review: %v", err)
	}
	want := lockState{Status: clasp.IssueInReview, Assignee: e.a.ID, Epoch: 1}
	wantLock(t, "after PATCH", got, want)
	wantLock(t, "row", getIssue(t, e.st, i1.ID), want)
	if got.ExecutionAgentNameKey != nil || got.ExecutionLockedAt != nil {
		t.Errorf("execution lock after PATCH: got %v, %v, want nil", deref(got.ExecutionAgentNameKey), got.ExecutionLockedAt)
	}
}

// L1, L6 and the run checks (RULES.md, Actors and credentials): a run that is over (finished, or lost) takes no
// lock and writes nothing: its checkout answers 409 run_not_live; its late
// release and PATCH of an issue it no longer holds answer 409
// (run_not_live or ownership_conflict); the issue is unchanged.
func testL1CallerRunMustBeLive(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	i2 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	finished, lost := openRun(t, e.st, e.a), openRun(t, e.st, e.a)
	mustCheckout(t, e.st, finished, i2.ID, clasp.IssueTodo)
	if _, err := finish(ctx, e.st, finished, clasp.RunSucceeded); err != nil {
		t.Fatalf("setup: finish: %v", err)
	}
	if err := e.h.ExpireRunLease(ctx, lost.ID); err != nil {
		t.Fatalf("setup: expire: %v", err)
	}
	before1, before2 := getIssue(t, e.st, i1.ID), getIssue(t, e.st, i2.ID)
	for _, r := range []*clasp.Run{finished, lost} {
		name := map[bool]string{true: "finished run", false: "lost run"}[r == finished]
		_, err := checkout(ctx, e.st, r, i1.ID, clasp.IssueTodo)
		wantCode(t, name+" checkout", err, clasp.CodeRunNotLive)
		wantUnchanged(t, name+" checkout", e.st, before1)
		_, err = release(ctx, e.st, runActor(r), i2.ID, false)
		if code := clasp.ErrorCode(err); code != clasp.CodeRunNotLive && code != clasp.CodeOwnershipConflict && code != "" {
			t.Errorf("%s release of an unlocked issue: got %v, want nil (no-op) or a 409", name, err)
		}
		wantUnchanged(t, name+" release", e.st, before2)
	}
	r2 := openRun(t, e.st, e.a)
	mustCheckout(t, e.st, r2, i2.ID, clasp.IssueTodo)
	before2 = getIssue(t, e.st, i2.ID)
	for _, r := range []*clasp.Run{finished, lost} {
		_, err := release(ctx, e.st, runActor(r), i2.ID, false)
		if code := clasp.ErrorCode(err); code != clasp.CodeRunNotLive && code != clasp.CodeOwnershipConflict {
			t.Errorf("late release by a dead run: got %v, want 409 run_not_live or ownership_conflict", err)
		}
		_, err = e.st.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i2.ID, Status: ptr(clasp.IssueDone), Actor: runActor(r)})
		if code := clasp.ErrorCode(err); code != clasp.CodeRunNotLive && code != clasp.CodeOwnershipConflict {
			t.Errorf("late PATCH by a dead run: got %v, want 409 run_not_live or ownership_conflict", err)
		}
		wantUnchanged(t, "after late calls", e.st, before2)
	}
	e.wantLockActivity(t, "I1", i1.ID, nil)
}
