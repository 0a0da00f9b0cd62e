package sqlite

// Claim-next (L1, statements ClaimPick and Claim of sql/claim.sql): check
// out the most urgent issue the calling run may take, on the single
// writer. SQLite's RETURNING yields only new values, and the adoption row
// of L3 needs the old holders. So, as checkout does, Claim first takes the
// picked issue only when it is unlocked (the common case: nothing is
// displaced, nothing to read); when the pick is a dead holder's issue it
// matches nothing, and the transaction reads the pick and checks it out
// with the checkout rule's own try (t.checkout: adoption row, L3).
// Nothing changes between the statements: the transaction holds the
// database's write lock from its first statement.

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// claimArgs are a claim's statement arguments besides :run, :agent and
// :now: the company, the two JSON status arrays, and the expected statuses
// of the checkout statement.
type claimArgs struct {
	company, unassigned, mine string
	expected                  []string
}

// IssueClaim is claim-next (store.IssueClaimParams): the most urgent issue
// that run Actor.RunID may check out under L1 is checked out for it, with
// issue.checked_out (and issue.checkout_lock_adopted when a dead holder is
// displaced, L3) in the same transaction. It answers the issue after the
// write, or (nil, nil) when no issue is eligible. Errors: those of
// store.ValidateClaim, and the caller's run problems
// (store.RunState.CallerProblem).
func (s *Driver) IssueClaim(ctx context.Context, p *store.IssueClaimParams) (*clasp.Issue, error) {
	unassigned, mine, expected, err := store.ValidateClaim(p)
	if err != nil {
		return nil, err
	}
	u, err := json.Marshal(unassigned)
	if err != nil {
		return nil, err
	}
	m, err := json.Marshal(mine)
	if err != nil {
		return nil, err
	}
	ca := &claimArgs{company: p.Actor.CompanyID, unassigned: string(u), mine: string(m), expected: expected}
	a := p.Actor
	var out *clasp.Issue
	err = s.write(ctx, func(tx *wtx) error {
		var err error
		out, err = tx.claim(ctx, ca, a, p.Result)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (t *wtx) claim(ctx context.Context, ca *claimArgs, a store.Actor, res *store.CheckoutResult) (*clasp.Issue, error) {
	args := []any{sql.Named("company", ca.company), sql.Named("unassigned", ca.unassigned), sql.Named("mine", ca.mine),
		sql.Named("agent", a.AgentID), sql.Named("run", a.RunID), sql.Named("now", t.now)}
	iss, err := store.ScanIssue(t.queryRow(ctx, "Claim", args...))
	switch {
	case err == nil:
		rows, _ := store.CheckoutActivity(&store.LockState{}, iss, a.AgentID, a.RunID) // unlocked: nothing displaced
		return iss, t.logAll(ctx, a, rows...)
	case !errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("claim an issue: %w", err)
	}
	// No unlocked pick: nothing is eligible, the caller's run is not live,
	// or the pick is a dead holder's issue (L3: checkout adopts it).
	r, err := t.callerRun(ctx, a.RunID)
	if err != nil {
		return nil, err
	}
	if err := r.CallerProblem(a.RunID, a.AgentID, a.CompanyID); err != nil {
		return nil, err
	}
	var id string
	err = t.queryRow(ctx, "ClaimPick", args...).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim an issue: %w", err)
	}
	ans, err := t.checkout(ctx, &store.LockRequest{Ref: id, Actor: a, AgentID: a.AgentID, Expected: ca.expected})
	if err != nil {
		return nil, err
	}
	if !ans.Changed { // the pick is eligible in this transaction: a refusal here is a fault
		_, err := store.CheckoutRefused(&ans.LockState, a.AgentID, a.RunID, ca.expected)
		return nil, cmp.Or(err, fmt.Errorf("claim issue %s: the checkout of the pick changed nothing", id))
	}
	if why, ok := ans.Displaced(a.RunID); ok && res != nil { // L3
		res.AdoptedWhy = why
	}
	return ans.Issue, nil
}
