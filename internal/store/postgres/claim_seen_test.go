package postgres

import (
	"sync/atomic"
	"testing"

	"github.com/clasp-dev/clasp/internal/store"
)

// TestClaimWaitsForLockedEligibleIssue holds the only eligible issue's row
// locked in a transaction, as a concurrent claimer does with the first
// eligible row of each status it walks while it takes another one, and
// claims for a live run with each scope that takes it. The claim must not
// answer none while the issue is free a moment later: once the claim has
// seen it locked (ClaimSeen true), the transaction ends without changing
// the row, and the claim takes it. A claim with no eligible issue at all
// answers none without a second run of Claim.
func TestClaimWaitsForLockedEligibleIssue(t *testing.T) {
	t.Parallel()
	for _, scope := range []store.ClaimScope{store.ClaimAny, store.ClaimUnassigned} {
		t.Run(string(scope), func(t *testing.T) {
			e := newBatchEnv(t, 1)
			ctx := t.Context()
			ids := e.issues(t, 1)
			tx, err := e.s.d.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, `SELECT id FROM issues WHERE id = $1 FOR UPDATE`, ids[0]); err != nil {
				t.Fatal(err)
			}
			var seen atomic.Int32
			e.s.SetSeenHook(func(try int) {
				if seen.Add(1) == 1 {
					if err := tx.Rollback(ctx); err != nil {
						t.Errorf("end the locking transaction: %v", err)
					}
				}
			})
			c := &claimCallResult{run: e.runs[0], request: "req-seen"}
			iss, err := e.s.IssueClaim(ctx, &store.IssueClaimParams{Scope: scope, Actor: c.actor(), Result: &c.res})
			if err != nil {
				t.Fatal(err)
			}
			if iss == nil {
				t.Fatalf("claim answered none while issue %s, locked by a transaction that then ended, was eligible (ClaimSeen true %d times)", ids[0], seen.Load())
			}
			if iss.ID != ids[0] {
				t.Fatalf("claim took %s, want %s", iss.ID, ids[0])
			}
			if seen.Load() == 0 {
				t.Errorf("claim took the locked issue without seeing it locked: the test did not reach the state it is about")
			}
			c.iss = iss
			e.wantCheckedOut(t, c, "issue.checked_out")

			// Nothing eligible now (the run holds the only issue): none, at once.
			seen.Store(0)
			iss, err = e.s.IssueClaim(ctx, &store.IssueClaimParams{Scope: scope, Actor: c.actor()})
			if err != nil || iss != nil {
				t.Fatalf("claim with nothing eligible = %v, %v; want none", iss, err)
			}
			if n := seen.Load(); n != 0 {
				t.Errorf("claim with nothing eligible saw an eligible issue %d times", n)
			}
		})
	}
}

// TestClaimSeenBounded holds the only eligible issue's row locked for the
// whole claim: the claim answers none after store.ClaimSeenTries runs of
// Claim (store.ClaimSeenTries-1 sightings), leaving the issue as it was.
func TestClaimSeenBounded(t *testing.T) {
	t.Parallel()
	e := newBatchEnv(t, 1)
	ctx := t.Context()
	ids := e.issues(t, 1)
	tx, err := e.s.d.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT id FROM issues WHERE id = $1 FOR UPDATE`, ids[0]); err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int32
	e.s.SetSeenHook(func(int) { seen.Add(1) })
	c := &claimCallResult{run: e.runs[0], request: "req-bounded"}
	iss, err := e.s.IssueClaim(ctx, &store.IssueClaimParams{Scope: store.ClaimAny, Actor: c.actor()})
	if err != nil || iss != nil {
		t.Fatalf("claim of an issue locked throughout = %v, %v; want none", iss, err)
	}
	if n := seen.Load(); n != store.ClaimSeenTries-1 {
		t.Errorf("claim saw the locked issue %d times, want store.ClaimSeenTries-1 = %d", n, store.ClaimSeenTries-1)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := e.activity(t, ids[0]); len(got) != 1 {
		t.Errorf("issue %s has %d activity rows after a claim that took nothing, want its creation only: %+v", ids[0], len(got), got)
	}
}
