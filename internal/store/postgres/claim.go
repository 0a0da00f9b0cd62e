package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

var _ store.ClaimBatcher = (*Driver)(nil)

// IssueClaim is one try of claim-next (store.ClaimDriver): statement Claim
// of sql/claim.sql, on its own (again on deadlock), checks out the most
// urgent issue run r.Actor.RunID may take under L1 and L3 with its
// activity rows, answering the issue and the adoption reason (L3). Claim
// skips rows other statements hold locked; so when it takes nothing and
// r.Look, statement ClaimSeen reads (no locks) whether an eligible issue
// is visible (Seen). Errors: the database's, translated.
func (d *Driver) IssueClaim(ctx context.Context, r *store.ClaimRequest) (*store.ClaimAnswer, error) {
	a := r.Actor
	args := actorArgs(namedArgs{"run": a.RunID, "agent": a.AgentID, "unassigned": r.Unassigned, "mine": r.Mine}, a)
	ans := &store.ClaimAnswer{}
	var iss clasp.Issue
	err := d.retry(ctx, func() error {
		err := d.pool.QueryRow(ctx, q("Claim"), args).Scan(append(store.IssueDest(&iss), &ans.AdoptedWhy)...)
		ans.Issue = nil
		if err == nil {
			ans.Issue = &iss
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // nothing taken: not an error to retry or translate
		}
		return err
	})
	if err == nil && ans.Issue == nil && r.Look {
		seenArgs := namedArgs{"run": a.RunID, "agent": a.AgentID, "unassigned": r.Unassigned, "mine": r.Mine}
		err = d.retryQuiet(ctx, func() error { return d.pool.QueryRow(ctx, q("ClaimSeen"), seenArgs).Scan(&ans.Seen) })
	}
	if err != nil {
		return nil, wrap(err, "claim an issue")
	}
	return ans, nil
}

// IssueClaimBatch is store.ClaimBatcher.IssueClaimBatch: statement
// ClaimBatch, whose rows are (ordinal of the actor served, from 1, the
// issue, the adoption reason). Its LIMIT is store.ClaimBatchMax.
func (d *Driver) IssueClaimBatch(ctx context.Context, companyID string, unassigned []string, actors []store.Actor) ([]*store.ClaimAnswer, error) {
	n := len(actors)
	runs, agents, types, ids, requests := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, a := range actors {
		runs[i], agents[i], types[i], ids[i], requests[i] = a.RunID, a.AgentID, string(a.Type), a.ID(), a.RequestID
	}
	args := namedArgs{"company": companyID, "unassigned": unassigned, "runs": runs, "agents": agents,
		"actor_types": types, "actor_ids": ids, "actor_runs": runs, "actor_requests": requests}
	got := make([]*store.ClaimAnswer, n)
	err := d.retry(ctx, func() error {
		clear(got)
		rows, err := d.pool.Query(ctx, q("ClaimBatch"), args)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var ord int64
			v := &store.ClaimAnswer{Issue: new(clasp.Issue)}
			if err := rows.Scan(append(append([]any{&ord}, store.IssueDest(v.Issue)...), &v.AdoptedWhy)...); err != nil {
				return err
			}
			if ord >= 1 && ord <= int64(n) {
				got[ord-1] = v
			}
		}
		return rows.Err()
	})
	if err != nil {
		return nil, wrap(err, "claim issues for %d calls", n)
	}
	return got, nil
}
