package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// IssueClaim is claim-next (store.IssueClaimParams, statement Claim): the
// most urgent issue that run Actor.RunID may check out under L1 is checked
// out for it in one statement, with issue.checked_out (and
// issue.checkout_lock_adopted when a dead holder is displaced, L3). It
// answers the issue after the write, or (nil, nil) when no issue is
// eligible. Errors: those of store.ValidateClaim, and the caller's run
// problems (store.LockState.CallerProblem).
func (s *Store) IssueClaim(ctx context.Context, p *store.IssueClaimParams) (*clasp.Issue, error) {
	unassigned, mine, _, err := store.ValidateClaim(p)
	if err != nil {
		return nil, err
	}
	a := p.Actor
	args := actorArgs(namedArgs{"run": a.RunID, "agent": a.AgentID, "unassigned": unassigned, "mine": mine}, a)
	var (
		iss   clasp.Issue
		why   string
		taken bool
	)
	err = s.retry(ctx, func() error {
		err := s.pool.QueryRow(ctx, q("Claim"), args).Scan(append(store.IssueDest(&iss), &why)...)
		taken = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // nothing taken: not an error to retry or translate
		}
		return err
	})
	if err != nil {
		return nil, wrap(err, "claim an issue")
	}
	if taken {
		if why != "" && p.Result != nil {
			p.Result.AdoptedWhy = why
		}
		return &iss, nil
	}
	// Nothing taken: explain a caller's run that is not live, else none.
	r, err := callerRun(ctx, s.pool, a.RunID)
	if err != nil {
		return nil, err
	}
	return nil, r.CallerProblem(a.RunID, a.AgentID, a.CompanyID)
}
