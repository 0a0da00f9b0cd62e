package storetest

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// batchCall is one checkout of a batch: its run, and what it got.
type batchCall struct {
	run *clasp.Run
	iss *clasp.Issue
	res store.CheckoutResult
	err error
}

// checkoutAll runs the checkouts of ref by runs (a run may appear more than
// once) at once, from a barrier, and returns what each got.
func checkoutAll(ctx context.Context, st store.Store, ref string, runs []*clasp.Run) []batchCall {
	calls := make([]batchCall, len(runs))
	race(len(runs), func(i int) {
		c := &calls[i]
		c.run = runs[i]
		c.iss, c.err = st.IssueCheckout(ctx, &store.IssueCheckoutParams{Ref: ref, AgentID: c.run.AgentID,
			ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}, LeaseTTL: leaseTTL, Actor: runActor(c.run), Result: &c.res})
	})
	return calls
}

// wantOneWinner checks a batch of checkouts of issue iss whose calls all
// expected todo: exactly one run won, every call of that run answered 200
// holding the issue at epoch (a repeat of the winning run: L2, SameRun),
// every other call 409 checkout_conflict naming the winner (reason
// held_by_live_run for a run of the winner's agent, else
// assigned_to_other_agent); the row names the winner. It returns the winning run.
func wantOneWinner(t *testing.T, what string, st store.Store, iss *clasp.Issue, calls []batchCall, epoch int64) *clasp.Run {
	t.Helper()
	var winner *clasp.Run
	for _, c := range calls {
		if c.err == nil {
			if winner != nil && winner.ID != c.run.ID {
				t.Fatalf("%s: runs %s and %s both won", what, winner.ID, c.run.ID)
			}
			winner = c.run
		}
	}
	if winner == nil {
		t.Fatalf("%s: no call won (first error %v)", what, calls[0].err)
	}
	fresh := 0
	for i, c := range calls {
		who := fmt.Sprintf("%s: call %d (run %s)", what, i, c.run.ID)
		if c.run.ID != winner.ID {
			reason := clasp.ReasonHeldByLiveRun
			if c.run.AgentID != winner.AgentID {
				reason = clasp.ReasonAssignedToOtherAgent
			}
			wantConflict(t, who, c.err, map[string]string{
				"issueId": iss.ID, "status": string(clasp.IssueInProgress), "assigneeAgentId": winner.AgentID,
				"checkoutRunId": winner.ID, "executionRunId": winner.ID, "reason": reason,
			})
			continue
		}
		if c.err != nil {
			t.Errorf("%s: the winning run's call got %v, want 200 (L2 for a repeat)", who, c.err)
			continue
		}
		wantLock(t, who, c.iss, held(winner.AgentID, winner.ID, epoch))
		if !c.res.SameRun {
			fresh++
		}
	}
	wantLock(t, what+": row", getIssue(t, st, iss.ID), held(winner.AgentID, winner.ID, epoch))
	if fresh > 1 {
		t.Errorf("%s: %d calls of the winning run took the lock anew, want at most 1 (the others L2)", what, fresh)
	}
	return winner
}

// L1-L2, a batch of concurrent checkouts of one issue, round after round
// (30, or 8 with -short or -race): 16 runs of 4 agents, the first run
// twice. On a free issue exactly one run wins, every call of it 200, every
// other call 409 naming the winner; on an issue the first run already
// holds, both of its calls 200 (L2, epoch unchanged) and every other call
// 409 naming it.
func testL1CheckoutBatch(t *testing.T, open opener) {
	st, _ := open(t)
	co := newCompany(t, st, "BATCH")
	agents := make([]*clasp.Agent, 4)
	for i := range agents {
		agents[i] = newAgent(t, st, co.ID, fmt.Sprintf("agent-%02d", i))
	}
	runs := make([]*clasp.Run, 16)
	for i := range runs {
		runs[i] = openRun(t, st, agents[i%len(agents)])
	}
	calls := append([]*clasp.Run{runs[0]}, runs...)
	iss := newIssue(t, st, co.ID, clasp.IssueTodo, "")
	epoch := int64(0)
	for round := 1; round <= scale(30, 8); round++ {
		what := fmt.Sprintf("round %d, free issue", round)
		epoch++
		w := wantOneWinner(t, what, st, iss, checkoutAll(t.Context(), st, iss.ID, calls), epoch)
		if _, err := release(t.Context(), st, runActor(w), iss.ID, true); err != nil {
			t.Fatalf("%s: winner's release: %v", what, err)
		}

		what = fmt.Sprintf("round %d, held by the repeated run", round)
		epoch++
		mustCheckout(t, st, runs[0], iss.ID, clasp.IssueTodo)
		if w := wantOneWinner(t, what, st, iss, checkoutAll(t.Context(), st, iss.ID, calls), epoch); w.ID != runs[0].ID {
			t.Errorf("%s: run %s won, want the holder %s", what, w.ID, runs[0].ID)
		}
		if _, err := release(t.Context(), st, runActor(runs[0]), iss.ID, true); err != nil {
			t.Fatalf("%s: release: %v", what, err)
		}
		if t.Failed() {
			t.FailNow()
		}
	}
}

// waitFor yields until cond holds.
func waitFor(cond func() bool) {
	for !cond() {
		runtime.Gosched()
	}
}

// holdAndCheckout holds the store's checkout queue of ref, starts the
// checkouts of ref by runs, waits until they all wait in the queue, runs
// meanwhile (a change made while they wait), then lets them go and
// returns what each got.
func holdAndCheckout(t *testing.T, h Hooks, st store.Store, companyID, ref string, runs []*clasp.Run, meanwhile func()) []batchCall {
	t.Helper()
	waiting, let, err := h.HoldCheckouts(t.Context(), companyID, ref)
	if err != nil {
		t.Fatalf("hold the checkout queue of %s: %v", ref, err)
	}
	out := make(chan []batchCall, 1)
	go func() { out <- checkoutAll(t.Context(), st, ref, runs) }()
	waitFor(func() bool { return waiting() == len(runs) })
	meanwhile()
	let()
	return <-out
}

// L1-L3, checkouts that waited for another checkout of the same issue and
// were released together decide on a state read after they were
// released, never on one from before they began: (a) an issue held by
// R0: R0's two calls 200 (L2), the others 409 naming R0, and a run that
// finished while it waited 409 run_not_live; (b) the holder released the
// issue while they waited: exactly one of them wins; (c) another call
// (by identifier, a reference not queued) took the free issue while they
// waited: every one of them 409 naming it.
func testL1CheckoutWaitersDecideAfterRelease(t *testing.T, open opener) {
	st, h := open(t)
	ctx := t.Context()
	co := newCompany(t, st, "WAIT")
	runs := make([]*clasp.Run, 7)
	for i := range runs {
		runs[i] = openRun(t, st, newAgent(t, st, co.ID, fmt.Sprintf("agent-%02d", i)))
	}

	t.Run("held", func(t *testing.T) {
		iss := newIssue(t, st, co.ID, clasp.IssueTodo, "")
		mustCheckout(t, st, runs[0], iss.ID, clasp.IssueTodo)
		ending := runs[6]
		calls := holdAndCheckout(t, h, st, co.ID, iss.ID, append([]*clasp.Run{runs[0]}, runs...), func() {
			if _, err := finish(ctx, st, ending, clasp.RunSucceeded); err != nil {
				t.Fatalf("finish run %s: %v", ending.ID, err)
			}
		})
		for i, c := range calls {
			who := fmt.Sprintf("call %d (run %s)", i, c.run.ID)
			switch c.run.ID {
			case runs[0].ID:
				if c.err != nil || !c.res.SameRun {
					t.Errorf("%s of the holder: got %v, SameRun %v; want 200, SameRun (L2)", who, c.err, c.res.SameRun)
				} else {
					wantLock(t, who, c.iss, held(runs[0].AgentID, runs[0].ID, 1))
				}
			case ending.ID:
				wantCode(t, who+", its run finished while it waited", c.err, clasp.CodeRunNotLive)
			default:
				wantConflict(t, who, c.err, map[string]string{"checkoutRunId": runs[0].ID, "reason": clasp.ReasonAssignedToOtherAgent})
			}
		}
		wantLock(t, "row", getIssue(t, st, iss.ID), held(runs[0].AgentID, runs[0].ID, 1))
	})

	t.Run("released while waiting", func(t *testing.T) {
		iss := newIssue(t, st, co.ID, clasp.IssueTodo, "")
		mustCheckout(t, st, runs[0], iss.ID, clasp.IssueTodo)
		calls := holdAndCheckout(t, h, st, co.ID, iss.ID, runs[1:6], func() {
			if _, err := release(ctx, st, runActor(runs[0]), iss.ID, true); err != nil {
				t.Fatalf("release by the holder: %v", err)
			}
		})
		wantOneWinner(t, "waiters after the holder released", st, iss, calls, 2)
	})

	t.Run("taken while waiting", func(t *testing.T) {
		iss := newIssue(t, st, co.ID, clasp.IssueTodo, "")
		calls := holdAndCheckout(t, h, st, co.ID, iss.ID, runs[1:6], func() {
			mustCheckout(t, st, runs[0], iss.Identifier, clasp.IssueTodo)
		})
		for i, c := range calls {
			wantConflict(t, fmt.Sprintf("call %d (run %s)", i, c.run.ID), c.err, map[string]string{
				"issueId": iss.ID, "checkoutRunId": runs[0].ID, "executionRunId": runs[0].ID, "reason": clasp.ReasonAssignedToOtherAgent,
			})
		}
		wantLock(t, "row", getIssue(t, st, iss.ID), held(runs[0].AgentID, runs[0].ID, 1))
	})
}
