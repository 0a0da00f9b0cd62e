package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
	"github.com/jackc/pgx/v5"
)

// A checkout decides on its statement's snapshot. When the issue changes
// between that snapshot and the checkout's write, the write must not
// happen on the strength of the old decision: here the snapshot shows a
// dead holder (adoptable), but before the checkout gets the row another
// transaction hands the issue to a run opened after the snapshot (so that
// run is not even visible in it, and would look "missing", i.e. dead). The
// checkout must then answer 409 held_by_live_run and leave the new holder
// in place (compare-and-set on the row version, then a fresh snapshot).
func TestCheckoutNeverAdoptsARunNewerThanItsSnapshot(t *testing.T) {
	t.Parallel()
	s, a, iss, openRun := newLockTest(t)
	ctx := t.Context()
	r1, r2 := openRun(), openRun()
	if _, err := s.IssueCheckout(ctx, &store.IssueCheckoutParams{Ref: iss.ID, AgentID: a.ID, ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}, Actor: agentOf(a, r1.ID)}); err != nil {
		t.Fatalf("R1 checkout: %v", err)
	}
	if err := (store.NewTestHooks(s.DB)).SetRunStatus(ctx, r1.ID, clasp.RunFailed); err != nil {
		t.Fatalf("fail R1: %v", err)
	}

	// Another transaction holds the issue's row lock.
	blocker, err := s.d.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(context.WithoutCancel(ctx))
	if _, err := blocker.Exec(ctx, `SELECT 1 FROM issues WHERE id = $1 FOR UPDATE`, iss.ID); err != nil {
		t.Fatal(err)
	}
	// R2's checkout takes its snapshot (R1 dead: adoptable) and waits for the row.
	done := make(chan error, 1)
	go func() {
		_, err := s.IssueCheckout(ctx, &store.IssueCheckoutParams{Ref: iss.ID, AgentID: a.ID, ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}, Actor: agentOf(a, r2.ID)})
		done <- err
	}()
	waitForLockWait(t, s.d, blocker, done)
	// Meanwhile a run opened after that snapshot takes the issue, and commits.
	r3 := openRun()
	if _, err := blocker.Exec(ctx, `UPDATE issues SET checkout_run_id = $1, execution_run_id = $1, checkout_epoch = checkout_epoch + 1 WHERE id = $2`, r3.ID, iss.ID); err != nil {
		t.Fatal(err)
	}
	if err := blocker.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	err = <-done
	if e := clasp.AsError(err); e == nil || e.Code != clasp.CodeCheckoutConflict || e.Details["reason"] != clasp.ReasonHeldByLiveRun || e.Details["checkoutRunId"] != r3.ID {
		t.Errorf("R2 checkout: got %v (details %v), want checkout_conflict held_by_live_run naming R3 %s", err, clasp.AsError(err), r3.ID)
	}
	got, err := s.IssueGet(ctx, "", iss.ID)
	if err != nil {
		t.Fatal(err)
	}
	if deref(got.CheckoutRunID) != r3.ID || deref(got.ExecutionRunID) != r3.ID {
		t.Errorf("issue after R2's checkout: got locks %s/%s, want R3 %s", deref(got.CheckoutRunID), deref(got.ExecutionRunID), r3.ID)
	}
}

// newLockTest opens a store with a company, its agent a and a todo issue
// iss; openRun opens a run of a with a lease of an hour.
func newLockTest(t *testing.T) (s *testStore, a *clasp.Agent, iss *clasp.Issue, openRun func() *clasp.Run) {
	t.Helper()
	s = openTest(t, Options{})
	ctx := t.Context()
	co, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Acme", IssuePrefix: "ACME", Actor: board})
	if err != nil {
		t.Fatal(err)
	}
	if a, err = s.AgentCreate(ctx, &store.AgentCreateParams{CompanyID: co.ID, Name: "alpha", Actor: board}); err != nil {
		t.Fatal(err)
	}
	if iss, err = s.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: "t", Status: clasp.IssueTodo, Actor: board}); err != nil {
		t.Fatal(err)
	}
	openRun = func() *clasp.Run {
		t.Helper()
		r, err := s.RunOpen(ctx, &store.RunOpenParams{AgentID: a.ID, LeaseTTL: time.Hour, Actor: agentOf(a, "")})
		if err != nil {
			t.Fatalf("open run: %v", err)
		}
		return r
	}
	return s, a, iss, openRun
}

// waitForLockWait waits until a session waits, in a lock rule's statement
// (the checkout under test, which must not end before: done), for a lock
// that transaction holder holds. Only a wait on holder counts: tests in
// parallel run checkouts of their own in the same database.
func waitForLockWait(t *testing.T, s *Driver, holder pgx.Tx, done <-chan error) {
	t.Helper()
	var pid int
	if err := holder.QueryRow(t.Context(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatalf("read the holder's backend pid: %v", err)
	}
	for range 2000 {
		select {
		case err := <-done:
			t.Fatalf("the checkout ended before waiting for the row lock: %v", err)
		default:
		}
		var n int
		err := s.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'WITH old AS%'
				AND $1::int = ANY(pg_blocking_pids(pid))`, pid).Scan(&n)
		if err != nil {
			t.Fatalf("read pg_stat_activity: %v", err)
		}
		if n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the checkout never waited for the row lock")
}

// A run's checkout and the run's finish interleave so: the checkout's
// snapshot sees the run live and decides to take the issue, then the
// finish commits before the checkout locks the run. The finish cleared
// the locks of the issues whose committed rows named the run, and this
// issue's did not yet, so the checkout must write nothing (a lock never
// outlives its run, L6) and say why in its answer (run_ended, outcome
// store.LockRunEnded); the store then runs it again and refuses with 409
// run_not_live.
func TestCheckoutRunEndedAfterSnapshot(t *testing.T) {
	t.Parallel()
	s, a, iss, openRun := newLockTest(t)
	ctx := t.Context()
	r := openRun()

	// The finish holds the run's row, not committed yet.
	finish, err := s.d.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer finish.Rollback(context.WithoutCancel(ctx))
	if _, err := finish.Exec(ctx, `UPDATE runs SET status = 'succeeded', finished_at = now() WHERE id = $1`, r.ID); err != nil {
		t.Fatal(err)
	}
	// The checkout's statement takes its snapshot (the run live) and waits for the run.
	args := lockArgs(iss.ID, agentOf(a, r.ID))
	args["agent"], args["expected"] = a.ID, []string{string(clasp.IssueTodo)}
	answers := make(chan *store.LockAnswer, 1)
	done := make(chan error, 1)
	go func() {
		l, err := scanLockAnswer("Checkout", s.d.pool.QueryRow(ctx, q("Checkout"), args))
		answers <- l
		done <- err
	}()
	waitForLockWait(t, s.d, finish, done)
	if err := finish.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	l := <-answers
	if err := <-done; err != nil {
		t.Fatalf("checkout statement: %v", err)
	}
	if got := l.Outcome(); got != store.LockRunEnded || !l.OK || l.Changed {
		t.Errorf("checkout answer: got outcome %d (changed %v, ok %v, run_ended %v), want LockRunEnded (changed false, ok true, run_ended true)",
			got, l.Changed, l.OK, l.RunEnded)
	}
	got, err := s.IssueGet(ctx, "", iss.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.CheckoutRunID != nil || got.ExecutionRunID != nil || got.Status != clasp.IssueTodo || got.CheckoutEpoch != iss.CheckoutEpoch {
		t.Errorf("issue after the checkout: got status %s, locks %s/%s, epoch %d; want it unchanged (todo, no lock, epoch %d)",
			got.Status, deref(got.CheckoutRunID), deref(got.ExecutionRunID), got.CheckoutEpoch, iss.CheckoutEpoch)
	}
	var n int
	if err := s.d.pool.QueryRow(ctx, `SELECT count(*) FROM activity WHERE entity_id = $1 AND action LIKE 'issue.check%'`, iss.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("checkout activity rows: got %d, want 0", n)
	}

	// Through the store, the next try sees the run ended and refuses.
	_, err = s.IssueCheckout(ctx, &store.IssueCheckoutParams{Ref: iss.ID, AgentID: a.ID, ExpectedStatuses: []clasp.IssueStatus{clasp.IssueTodo}, Actor: agentOf(a, r.ID)})
	if code := clasp.ErrorCode(err); code != clasp.CodeRunNotLive {
		t.Errorf("store checkout after the finish: got %v, want 409 run_not_live", err)
	}
}
