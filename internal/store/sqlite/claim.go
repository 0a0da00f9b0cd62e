package sqlite

// Claim-next's driver (store.ClaimDriver; statements Claim and ClaimPick
// of sql/claim.sql): one try checks out the most urgent issue the calling
// run may take, in one write transaction. SQLite's RETURNING yields only
// new values, and the adoption row of L3 needs the old holders. So, as
// checkout does, Claim first takes the picked issue only when it is
// unlocked (the common case: nothing is displaced, nothing to read); when
// the pick is a dead holder's issue it matches nothing, and the
// transaction reads the pick and checks it out with the checkout rule's
// own try (t.checkout: adoption row, L3). Nothing changes between the
// statements: the transaction holds the database's write lock from its
// first statement, so a try never sees an issue it cannot take (Seen is
// false).

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/clasp-dev/clasp/internal/store"
)

// IssueClaim is one try of claim-next (store.ClaimDriver) in one write
// transaction: statement Claim (an unlocked pick, with its
// issue.checked_out), else statement ClaimPick and the checkout rule's try
// on the pick (a dead holder's issue, L3). It takes nothing when no issue
// is eligible or the caller's run is not live. Errors: the database's,
// translated; a refused checkout of the pick is a fault.
func (d driver) IssueClaim(ctx context.Context, r *store.ClaimRequest) (*store.ClaimAnswer, error) {
	u, err := json.Marshal(r.Unassigned)
	if err != nil {
		return nil, err
	}
	m, err := json.Marshal(r.Mine)
	if err != nil {
		return nil, err
	}
	var ans *store.ClaimAnswer
	err = d.s.write(ctx, func(t *wtx) error {
		var err error
		ans, err = t.claim(ctx, r, string(u), string(m))
		return err
	})
	return ans, err
}

// claim is IssueClaim's try in write transaction t; unassigned and mine
// are r's statuses as JSON arrays.
func (t *wtx) claim(ctx context.Context, r *store.ClaimRequest, unassigned, mine string) (*store.ClaimAnswer, error) {
	a := r.Actor
	args := []any{sql.Named("company", a.CompanyID), sql.Named("unassigned", unassigned), sql.Named("mine", mine),
		sql.Named("agent", a.AgentID), sql.Named("run", a.RunID), sql.Named("now", t.now)}
	iss, err := store.ScanIssue(t.queryRow(ctx, "Claim", args...))
	switch {
	case err == nil:
		rows, _ := store.CheckoutActivity(&store.LockState{}, iss, a.AgentID, a.RunID) // unlocked: nothing displaced
		return &store.ClaimAnswer{Issue: iss}, t.logAll(ctx, a, rows...)
	case !errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("claim an issue: %w", err)
	}
	// No unlocked pick: nothing is eligible, the caller's run is not live,
	// or the pick is a dead holder's issue (L3: checkout adopts it).
	var id string
	err = t.queryRow(ctx, "ClaimPick", args...).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return &store.ClaimAnswer{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim an issue: %w", err)
	}
	ans, err := t.checkout(ctx, &store.LockRequest{Ref: id, Actor: a, AgentID: a.AgentID, Expected: r.Expected})
	if err != nil {
		return nil, err
	}
	if !ans.Changed { // the pick is eligible in this transaction: a refusal here is a fault
		_, err := store.CheckoutRefused(&ans.LockState, a.AgentID, a.RunID, r.Expected)
		return nil, cmp.Or(err, fmt.Errorf("claim issue %s: the checkout of the pick changed nothing", id))
	}
	why, _ := ans.Displaced(a.RunID) // L3
	return &store.ClaimAnswer{Issue: ans.Issue, AdoptedWhy: why}, nil
}
