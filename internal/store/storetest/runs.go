package storetest

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// S19: R1 holds I1 and I2 (and I3's execution lock alone); R1 finishes
// failed: every lock naming it is cleared in the same transaction, one
// issue.lock_released {runId, runStatus} per issue (rule L6); R1 stays
// failed: a later touch or finish answers 409 run_not_live and its run
// token no longer authenticates.
func testS19FinishReleasesLocks(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	i2 := newIssue(t, e.st, e.co.ID, clasp.IssueBacklog, e.a.ID)
	i3 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
	p := runOpenParams(e.a, leaseTTL)
	r1, err := e.st.RunOpen(ctx, p)
	if err != nil {
		t.Fatalf("setup: open R1: %v", err)
	}
	mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
	mustCheckout(t, e.st, r1, i2.ID, clasp.IssueBacklog)
	if err := e.h.ForceIssueLocks(ctx, i3.ID, clasp.IssueTodo, &e.a.ID, nil, &r1.ID); err != nil {
		t.Fatalf("setup: execution lock on I3: %v", err)
	}

	got, err := e.st.RunFinish(ctx, &store.RunFinishParams{RunID: r1.ID, Status: clasp.RunFailed, ExitCode: ptr(3), Error: ptr("boom"), Actor: runActor(r1)})
	if err != nil {
		t.Fatalf("finish R1: %v", err)
	}
	if got.Status != clasp.RunFailed || got.FinishedAt == nil || deref(got.ExitCode) != 3 || deref(got.Error) != "boom" {
		t.Errorf("finished run: got status %s finishedAt %v exitCode %v error %q, want failed, set, 3, boom", got.Status, got.FinishedAt, deref(got.ExitCode), deref(got.Error))
	}
	for _, iss := range []*clasp.Issue{i1, i2, i3} {
		row := getIssue(t, e.st, iss.ID)
		if row.CheckoutRunID != nil || row.ExecutionRunID != nil {
			t.Errorf("%s after R1's finish: got locks %q/%q, want none", iss.Identifier, deref(row.CheckoutRunID), deref(row.ExecutionRunID))
		}
		checkL7(t, "after finish", row)
		a := e.oneActivity(t, iss.ID, clasp.ActionIssueLockReleased)
		wantDetails(t, iss.Identifier, a, map[string]string{"runId": r1.ID, "runStatus": string(clasp.RunFailed)})
	}
	e.wantLockActivity(t, "I1", i1.ID, map[string]int{clasp.ActionIssueCheckedOut: 1, clasp.ActionIssueLockReleased: 1})

	_, err = e.st.RunTouch(ctx, &store.RunTouchParams{RunID: r1.ID, AgentID: e.a.ID, LeaseTTL: leaseTTL, Force: true})
	wantCode(t, "touch after finish", err, clasp.CodeRunNotLive)
	_, err = e.st.RunFinish(ctx, &store.RunFinishParams{RunID: r1.ID, Status: clasp.RunSucceeded, Actor: runActor(r1)})
	wantCode(t, "second finish", err, clasp.CodeRunNotLive)
	_, err = e.st.RunFinish(ctx, &store.RunFinishParams{RunID: r1.ID, Status: clasp.RunCancelled, Actor: boardActor()})
	wantCode(t, "board finish of a terminal run", err, clasp.CodeRunNotLive)
	_, _, err = e.st.RunAuthenticate(ctx, p.TokenHash)
	wantCode(t, "run token after finish", err, clasp.CodeUnauthenticated)
	if r := getRun(t, e.st, r1.ID); r.Status != clasp.RunFailed || deref(r.ExitCode) != 3 {
		t.Errorf("R1 later: got status %s exitCode %v, want failed, 3", r.Status, deref(r.ExitCode))
	}
}

// L6: run.finished carries the finish as given: {status, exitCode, error},
// and errorCode when the finish names one (both stores write the same
// shape).
func testL6RunFinishedDetails(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	for _, tc := range []struct {
		name      string
		errorCode *string
	}{{"with_error_code", ptr(clasp.RunErrorSpawnFailed)}, {"without_error_code", nil}} {
		r, err := e.st.RunOpen(ctx, runOpenParams(e.a, leaseTTL))
		if err != nil {
			t.Fatalf("%s: open run: %v", tc.name, err)
		}
		if _, err := e.st.RunFinish(ctx, &store.RunFinishParams{RunID: r.ID, Status: clasp.RunFailed, ExitCode: ptr(7),
			Error: ptr("boom"), ErrorCode: tc.errorCode, Actor: runActor(r)}); err != nil {
			t.Fatalf("%s: finish run: %v", tc.name, err)
		}
		fin := allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID, EntityID: r.ID, Action: clasp.ActionRunFinished})
		if len(fin) != 1 {
			t.Fatalf("%s: got %d run.finished rows, want 1", tc.name, len(fin))
		}
		wantDetails(t, tc.name, fin[0], map[string]string{"status": string(clasp.RunFailed), "exitCode": "7", "error": "boom",
			"errorCode": deref(tc.errorCode)})
		if _, has := details(t, fin[0])["errorCode"]; has != (tc.errorCode != nil) {
			t.Errorf("%s: run.finished details %s: errorCode present %v, want %v", tc.name, fin[0].Details, has, tc.errorCode != nil)
		}
	}
}

// S20: R1 holds I1 and its lease expires: sweeper pass 1 fails R1
// (lease_expired, one run.lost), pass 2 clears I1's locks with one
// issue.stale_lock_cleared {clearedCheckoutRunId, clearedExecutionRunId,
// why}; a second sweep changes nothing.
func testS20SweepExpiredLease(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	r1 := openRun(t, e.st, e.a)
	mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
	if err := e.h.ExpireRunLease(ctx, r1.ID); err != nil {
		t.Fatalf("setup: expire R1: %v", err)
	}

	n, err := e.st.SweepExpiredRuns(ctx)
	if err != nil || n != 1 {
		t.Fatalf("pass 1: got %d, %v, want 1, nil", n, err)
	}
	r := getRun(t, e.st, r1.ID)
	if r.Status != clasp.RunFailed || deref(r.ErrorCode) != clasp.RunErrorLeaseExpired || r.FinishedAt == nil {
		t.Errorf("R1 after pass 1: got status %s errorCode %q finishedAt %v, want failed, lease_expired, set", r.Status, deref(r.ErrorCode), r.FinishedAt)
	}
	if rows := allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID, EntityID: r1.ID, Action: clasp.ActionRunLost}); len(rows) != 1 {
		t.Errorf("run.lost rows of R1: got %d, want 1", len(rows))
	}
	n, err = e.st.SweepStaleLocks(ctx)
	if err != nil || n != 1 {
		t.Fatalf("pass 2: got %d, %v, want 1, nil", n, err)
	}
	row := getIssue(t, e.st, i1.ID)
	if row.CheckoutRunID != nil || row.ExecutionRunID != nil {
		t.Errorf("I1 after sweep: got locks %q/%q, want none", deref(row.CheckoutRunID), deref(row.ExecutionRunID))
	}
	checkL7(t, "after sweep", row)
	e.wantLockActivity(t, "after sweep", i1.ID, map[string]int{clasp.ActionIssueCheckedOut: 1, clasp.ActionIssueStaleLockCleared: 1})
	a := e.oneActivity(t, i1.ID, clasp.ActionIssueStaleLockCleared)
	wantDetails(t, "stale lock", a, map[string]string{"clearedCheckoutRunId": r1.ID, "clearedExecutionRunId": r1.ID})
	if d := details(t, a); asString(d["why"]) == "" {
		t.Errorf("stale lock details %s: why missing", a.Details)
	}
	if a.ActorType != clasp.ActorSystem {
		t.Errorf("stale lock actorType: got %s, want system", a.ActorType)
	}

	if n, err := e.st.SweepExpiredRuns(ctx); err != nil || n != 0 {
		t.Errorf("second pass 1: got %d, %v, want 0, nil", n, err)
	}
	if n, err := e.st.SweepStaleLocks(ctx); err != nil || n != 0 {
		t.Errorf("second pass 2: got %d, %v, want 0, nil", n, err)
	}
	e.wantLockActivity(t, "after second sweep", i1.ID, map[string]int{clasp.ActionIssueCheckedOut: 1, clasp.ActionIssueStaleLockCleared: 1})
}

// S20, the lease running out between the passes: R1 holds I1 and is live
// at pass 1, which fails nothing; its lease expires before pass 2, which
// finds R1 dead (lost) and clears I1's locks, why lost, while R1 still
// reads running. The next sweep's pass 1 fails R1 (lease_expired, one
// run.lost) though it holds no lock any more, and its pass 2 clears
// nothing: between two sweeps a swept issue's lost run may still read
// running (RULES.md, The sweeper), and one sweep later it is failed.
func testS20LeaseExpiresBetweenPasses(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	r1 := openRun(t, e.st, e.a)
	mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)

	if n, err := e.st.SweepExpiredRuns(ctx); err != nil || n != 0 {
		t.Fatalf("pass 1 while R1 is live: got %d, %v, want 0, nil", n, err)
	}
	if err := e.h.ExpireRunLease(ctx, r1.ID); err != nil {
		t.Fatalf("setup: expire R1: %v", err)
	}
	if n, err := e.st.SweepStaleLocks(ctx); err != nil || n != 1 {
		t.Fatalf("pass 2 after R1's lease ran out: got %d, %v, want 1, nil", n, err)
	}
	row := getIssue(t, e.st, i1.ID)
	if row.CheckoutRunID != nil || row.ExecutionRunID != nil {
		t.Errorf("I1 after pass 2: got locks %q/%q, want none", deref(row.CheckoutRunID), deref(row.ExecutionRunID))
	}
	checkL7(t, "after pass 2", row)
	a := e.oneActivity(t, i1.ID, clasp.ActionIssueStaleLockCleared)
	wantDetails(t, "stale lock", a, map[string]string{"clearedCheckoutRunId": r1.ID, "clearedExecutionRunId": r1.ID, "why": "lost"})
	if r := getRun(t, e.st, r1.ID); r.Status != clasp.RunRunning || r.FinishedAt != nil {
		t.Errorf("R1 after pass 2: got status %s finishedAt %v, want running (lost, not yet failed by a pass 1)", r.Status, r.FinishedAt)
	}

	res, err := sweepOnce(ctx, e.st)
	if err != nil {
		t.Fatalf("next sweep: %v", err)
	}
	if res != (store.SweepResult{RunsExpired: 1}) {
		t.Errorf("next sweep: got %+v, want R1 expired and no lock cleared", res)
	}
	r := getRun(t, e.st, r1.ID)
	if r.Status != clasp.RunFailed || deref(r.ErrorCode) != clasp.RunErrorLeaseExpired || r.FinishedAt == nil {
		t.Errorf("R1 after the next sweep: got status %s errorCode %q finishedAt %v, want failed, lease_expired, set", r.Status, deref(r.ErrorCode), r.FinishedAt)
	}
	if rows := allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID, EntityID: r1.ID, Action: clasp.ActionRunLost}); len(rows) != 1 {
		t.Errorf("run.lost rows of R1: got %d, want 1", len(rows))
	}
	e.wantLockActivity(t, "end", i1.ID, map[string]int{clasp.ActionIssueCheckedOut: 1, clasp.ActionIssueStaleLockCleared: 1})
	if res, err := sweepOnce(ctx, e.st); err != nil || res != (store.SweepResult{}) {
		t.Errorf("third sweep: got %+v, %v, want nothing changed", res, err)
	}
}

// S21: a run with a real 300 ms lease that renews it every 100 ms
// (RunTouch with Force) for 5 TTLs while sweepers run without pause is never
// swept and keeps its lock (the lease counts from the last sign of life).
// No assertion depends on timing alone: if the renewing goroutine itself
// was starved for a whole TTL (a loaded machine), the lease may have lapsed
// legitimately and the test is skipped rather than failed.
func testS21RenewedRunNeverSwept(t *testing.T, open opener) {
	const ttl = 300 * time.Millisecond
	e := newEnv(t, open)
	ctx := t.Context()
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	start := time.Now()
	r1 := openRunTTL(t, e.st, e.a, ttl)
	mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)

	// maxGap is the longest time from the start of one renewal (or the
	// open) to the end of the next one: if it stays under the TTL, the
	// lease never lapsed.
	var maxGap time.Duration
	var touchErr error
	stop := make(chan struct{})
	var sweeps struct {
		sync.Mutex
		runs, locks int
		err         error
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, err := e.st.SweepExpiredRuns(ctx)
			m, err2 := e.st.SweepStaleLocks(ctx)
			sweeps.Lock()
			sweeps.runs += n
			sweeps.locks += m
			if err == nil {
				err = err2
			}
			if err != nil && sweeps.err == nil {
				sweeps.err = err
			}
			sweeps.Unlock()
			time.Sleep(10 * time.Millisecond)
		}
	})
	prevStart := start
	for time.Since(start) < 5*ttl {
		time.Sleep(ttl / 3)
		s := time.Now()
		_, err := e.st.RunTouch(ctx, &store.RunTouchParams{RunID: r1.ID, AgentID: e.a.ID, LeaseTTL: ttl, Force: true})
		end := time.Now()
		maxGap = max(maxGap, end.Sub(prevStart))
		prevStart = s
		if err != nil {
			touchErr = err
			break
		}
	}
	close(stop)
	wg.Wait()

	sweeps.Lock()
	defer sweeps.Unlock()
	if sweeps.err != nil {
		t.Fatalf("sweep: %v", sweeps.err)
	}
	r := getRun(t, e.st, r1.ID)
	row := getIssue(t, e.st, i1.ID)
	swept := touchErr != nil || sweeps.runs != 0 || sweeps.locks != 0 || r.Status != clasp.RunRunning || deref(row.CheckoutRunID) != r1.ID
	if swept && maxGap >= ttl {
		t.Skipf("renewals were %v apart at worst, more than the %v TTL (machine too loaded): the lease may have lapsed, cannot judge", maxGap, ttl)
	}
	if touchErr != nil {
		t.Errorf("renewal: got error %v, want nil (worst renewal gap %v < TTL %v)", touchErr, maxGap, ttl)
	}
	if sweeps.runs != 0 || sweeps.locks != 0 {
		t.Errorf("sweeps: got %d runs expired and %d locks cleared, want 0 and 0 (worst renewal gap %v < TTL %v)", sweeps.runs, sweeps.locks, maxGap, ttl)
	}
	if r.Status != clasp.RunRunning {
		t.Errorf("R1: got status %s (%s), want running", r.Status, deref(r.ErrorCode))
	}
	wantLock(t, "I1", row, held(e.a.ID, r1.ID, 1))
	t.Logf("worst renewal gap %v for a %v TTL", maxGap, ttl)
}

// S22: the sweeper leaves alone locks naming a running, healthy run, and an
// issue whose checkout lock names a terminal run while its execution lock
// names a live one, or whose execution lock alone names a live run.
func testS22SweepLeavesLiveHolders(t *testing.T, open opener) {
	sweepNothing := func(t *testing.T, e *env, before *clasp.Issue) {
		t.Helper()
		if n, err := e.st.SweepExpiredRuns(t.Context()); err != nil || n != 0 {
			t.Errorf("pass 1: got %d, %v, want 0, nil", n, err)
		}
		if n, err := e.st.SweepStaleLocks(t.Context()); err != nil || n != 0 {
			t.Errorf("pass 2: got %d, %v, want 0, nil", n, err)
		}
		wantUnchanged(t, "after sweep", e.st, before)
		if c := lockCounts(t, e.st, e.co.ID, before.ID); c[clasp.ActionIssueStaleLockCleared] != 0 {
			t.Errorf("issue.stale_lock_cleared rows: got %d, want 0", c[clasp.ActionIssueStaleLockCleared])
		}
	}
	t.Run("live_holder", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
		r1 := openRun(t, e.st, e.a)
		before := mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
		sweepNothing(t, e, before)
	})
	t.Run("terminal_checkout_live_execution", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		ctx := t.Context()
		i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.a.ID)
		r1, r2 := openRun(t, e.st, e.a), openRun(t, e.st, e.a)
		if _, err := finish(ctx, e.st, r1, clasp.RunSucceeded); err != nil {
			t.Fatalf("setup: finish R1: %v", err)
		}
		if err := e.h.ForceIssueLocks(ctx, i1.ID, clasp.IssueInProgress, &e.a.ID, &r1.ID, &r2.ID); err != nil {
			t.Skipf("the store refuses locks that differ (L7 enforced by the database: %v): this S22 state cannot exist in it", err)
		}
		sweepNothing(t, e, getIssue(t, e.st, i1.ID))
	})
	t.Run("live_execution_only", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, open)
		ctx := t.Context()
		i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, e.b.ID)
		r1 := openRun(t, e.st, e.a)
		if err := e.h.ForceIssueLocks(ctx, i1.ID, clasp.IssueTodo, &e.b.ID, nil, &r1.ID); err != nil {
			t.Fatalf("setup: force locks: %v", err)
		}
		sweepNothing(t, e, getIssue(t, e.st, i1.ID))
	})
}

// S23: two sweepers run at the same moment over 1,000 issues (200 with
// -short or -race) locked by one run whose lease expired: the run is failed
// once, each issue is cleared once, exactly one issue.stale_lock_cleared
// each; a second pass clears nothing.
func testS23ConcurrentSweepers(t *testing.T, open opener) {
	n := scale(1000, 200)
	e := newEnv(t, open)
	ctx := t.Context()
	r1 := openRun(t, e.st, e.a)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "").ID
		mustCheckout(t, e.st, r1, ids[i], clasp.IssueTodo)
	}
	if err := e.h.ExpireRunLease(ctx, r1.ID); err != nil {
		t.Fatalf("setup: expire R1: %v", err)
	}

	var res [2]store.SweepResult
	var errs [2]error
	race(2, func(i int) { res[i], errs[i] = sweepOnce(ctx, e.st) })
	for i, err := range errs {
		if err != nil {
			t.Fatalf("sweeper %d: %v", i, err)
		}
	}
	if got := res[0].RunsExpired + res[1].RunsExpired; got != 1 {
		t.Errorf("runs expired by both sweepers: got %d (%d+%d), want 1", got, res[0].RunsExpired, res[1].RunsExpired)
	}
	if got := res[0].LocksCleared + res[1].LocksCleared; got != n {
		t.Errorf("locks cleared by both sweepers: got %d (%d+%d), want %d", got, res[0].LocksCleared, res[1].LocksCleared, n)
	}
	rows := allActivity(t, e.st, store.ActivityListParams{CompanyID: e.co.ID, Action: clasp.ActionIssueStaleLockCleared})
	per := map[string]int{}
	for _, a := range rows {
		per[a.EntityID]++
	}
	for _, id := range ids {
		if per[id] != 1 {
			t.Errorf("issue %s: got %d issue.stale_lock_cleared rows, want 1", id, per[id])
		}
	}
	if len(rows) != n {
		t.Errorf("issue.stale_lock_cleared rows: got %d, want %d", len(rows), n)
	}
	issues, _, err := e.st.IssueList(ctx, &store.IssueListParams{CompanyID: e.co.ID, Statuses: []clasp.IssueStatus{clasp.IssueInProgress, clasp.IssueTodo}, Page: store.Page{Limit: 1000}})
	if err != nil {
		t.Fatalf("list issues: %v", err)
	}
	for _, iss := range issues {
		if iss.CheckoutRunID != nil || iss.ExecutionRunID != nil {
			t.Errorf("%s after sweeps: got locks %q/%q, want none", iss.Identifier, deref(iss.CheckoutRunID), deref(iss.ExecutionRunID))
		}
	}
	if again, err := sweepOnce(ctx, e.st); err != nil || again != (store.SweepResult{}) {
		t.Errorf("second sweep: got %+v, %v, want nothing changed", again, err)
	}
}

// sweepOnce is one sweeper pass (RULES.md, The sweeper): pass 1 then pass 2.
func sweepOnce(ctx context.Context, st store.Store) (store.SweepResult, error) {
	var res store.SweepResult
	var err error
	if res.RunsExpired, err = st.SweepExpiredRuns(ctx); err != nil {
		return res, err
	}
	res.LocksCleared, err = st.SweepStaleLocks(ctx)
	return res, err
}

// S24 (store level): A's run R1 holding I1 is lost (its lease expired, no
// sweep yet): A's new run checks I1 out at once by adoption (why lost).
// The next sweep fails R1 and leaves R2's lock alone.
func testS24AdoptLostHolderBeforeSweep(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	i1 := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
	r1 := openRun(t, e.st, e.a)
	mustCheckout(t, e.st, r1, i1.ID, clasp.IssueTodo)
	if err := e.h.ExpireRunLease(ctx, r1.ID); err != nil {
		t.Fatalf("setup: expire R1: %v", err)
	}
	r2 := openRun(t, e.st, e.a)
	got := mustCheckout(t, e.st, r2, i1.ID, clasp.IssueTodo)
	wantLock(t, "R2 adopts", got, held(e.a.ID, r2.ID, 2))
	a := e.oneActivity(t, i1.ID, clasp.ActionIssueLockAdopted)
	wantDetails(t, "adoption", a, map[string]string{"previousCheckoutRunId": r1.ID, "previousExecutionRunId": r1.ID, "why": "lost"})

	res, err := sweepOnce(ctx, e.st)
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if res != (store.SweepResult{RunsExpired: 1}) {
		t.Errorf("sweep: got %+v, want R1 expired and no lock cleared", res)
	}
	wantLock(t, "after sweep", getIssue(t, e.st, i1.ID), held(e.a.ID, r2.ID, 2))
	e.wantLockActivity(t, "end", i1.ID, map[string]int{clasp.ActionIssueCheckedOut: 2, clasp.ActionIssueLockAdopted: 1})
}

// L6_RunFinishDuringCheckout: a run's checkout and its own finish race,
// round after round, on a fresh todo issue and on one whose execution lock
// the run already holds alone; whatever the interleaving, no lock names the
// run once both are done (a lock never outlives its run: the checkout
// either comes first and the finish clears its lock, or comes second and
// is refused with run_not_live), the checkout's other outcome is success,
// and L7 holds.
func testL6RunFinishDuringCheckout(t *testing.T, open opener) {
	e := newEnv(t, open)
	ctx := t.Context()
	rounds := scale(60, 16)
	outcomes := map[string]int{}
	for round := range rounds {
		a := newAgent(t, e.st, e.co.ID, "racer-"+strconv.Itoa(round))
		r := openRun(t, e.st, a)
		iss := newIssue(t, e.st, e.co.ID, clasp.IssueTodo, "")
		if round%2 == 1 {
			if err := e.h.ForceIssueLocks(ctx, iss.ID, clasp.IssueInProgress, &a.ID, nil, &r.ID); err != nil {
				t.Fatalf("round %d: setup: execution lock of the run on %s: %v", round, iss.Identifier, err)
			}
		}
		var coErr, finErr error
		race(2, func(i int) {
			if i == 0 {
				_, coErr = checkout(ctx, e.st, r, iss.ID, clasp.IssueTodo)
			} else {
				_, finErr = finish(ctx, e.st, r, clasp.RunSucceeded)
			}
		})
		if finErr != nil {
			t.Fatalf("round %d: finish: %v", round, finErr)
		}
		switch code := clasp.ErrorCode(coErr); {
		case coErr == nil:
			outcomes["checkout first"]++
		case code == clasp.CodeRunNotLive:
			outcomes["finish first"]++
		default:
			t.Fatalf("round %d: checkout: got %v, want success or 409 run_not_live", round, coErr)
		}
		got := getIssue(t, e.st, iss.ID)
		if deref(got.CheckoutRunID) == r.ID || deref(got.ExecutionRunID) == r.ID {
			t.Errorf("round %d (%s): %s still locked by the finished run: %+v (checkout error %v)", round,
				map[bool]string{false: "unlocked issue", true: "execution lock held"}[round%2 == 1], got.Identifier, lockOf(got), coErr)
		}
		checkL7(t, "after the race", got)
	}
	t.Logf("outcomes over %d rounds: %v", rounds, outcomes)
}
