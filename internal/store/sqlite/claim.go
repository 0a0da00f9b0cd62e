package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/clasp-dev/clasp/internal/store"
)

// IssueClaim is one try of claim-next (store.ClaimDriver; statements Claim
// and ClaimPick of sql/claim.sql) in one write transaction, which holds
// the database's write lock from its first statement, so nothing changes
// between its statements and no eligible issue is ever held locked (Seen
// is false). SQLite's RETURNING yields only new values, and the adoption
// row of L3 needs the old holders: so Claim takes the pick only when it is
// unlocked (nothing displaced: its issue.checked_out needs no read); else
// ClaimPick names the pick, a dead holder's issue, and the checkout rule's
// own try takes it (t.checkout: adoption row, L3). Nothing is taken when
// none is eligible or the run is not live. Errors: the database's,
// translated; a refused checkout of the pick is a fault.
func (d *Driver) IssueClaim(ctx context.Context, r *store.ClaimRequest) (*store.ClaimAnswer, error) {
	a := r.Actor
	args := store.Args{"company": a.CompanyID, "unassigned": r.Unassigned, "mine": r.Mine, "agent": a.AgentID, "run": a.RunID}
	var ans *store.ClaimAnswer
	err := d.write(ctx, func(t *wtx) error {
		ans = &store.ClaimAnswer{}
		iss, err := store.ScanIssue(writer{t}.QueryRow(ctx, "Claim", args))
		if err == nil {
			ans.Issue = iss
			return t.checkoutActivity(ctx, a, a.AgentID, iss.ID, &store.LockState{}) // unlocked: nothing displaced
		}
		var id string
		if errors.Is(err, sql.ErrNoRows) {
			err = writer{t}.QueryRow(ctx, "ClaimPick", args).Scan(&id)
		}
		if errors.Is(err, sql.ErrNoRows) {
			return nil // nothing eligible, or the run is not live
		} else if err != nil {
			return fmt.Errorf("claim an issue: %w", err)
		}
		co, err := t.checkout(ctx, &store.LockRequest{Ref: id, Actor: a, AgentID: a.AgentID, Expected: r.Expected})
		if err != nil {
			return err
		}
		if !co.Changed { // the pick is eligible in this transaction: a refusal here is a fault
			return fmt.Errorf("claim issue %s: the checkout of the pick, eligible in the same transaction, changed nothing", id)
		}
		ans.Issue = co.Issue
		ans.AdoptedWhy, _ = co.Displaced(a.RunID) // L3
		return nil
	})
	return ans, err
}
