package sqlite

// Claim-next (issue 5): check out the most urgent issue the calling run may
// take under rule L1, picked and taken in one conditional UPDATE on the
// single writer.
//
// The pick reads, for each status a claim may take, the first eligible
// issue of one ordered index range (the company's unassigned issues,
// issues_claim_unassigned; the agent's own, issues_assignee_status) and
// keeps the most urgent of those few: (priority_rank, created_at, id). Its
// cost does not grow with the number of issues, only with how many
// ineligible rows (issues held by live runs) precede the first eligible one
// in a range.
//
// SQLite's RETURNING yields only new values, and the adoption row of L3
// needs the old holders. So, as checkout does, the UPDATE first takes the
// picked issue only when it is unlocked (the common case: nothing is
// displaced, nothing to read); when the pick is a dead holder's issue it
// matches nothing, and the transaction reads the pick and checks it out
// with the checkout statement itself (t.checkout: adoption row, L3).
// Nothing changes between the statements: the transaction holds the
// database's write lock from its first statement.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// sqlClaimOK: issue alias i may be taken by run :run under L1/L3: each lock
// column is empty, names :run or a dead run, and :run does not already hold
// both (L2: a claim never answers what the run holds).
const sqlClaimOK = `(i.checkout_run_id IS NULL OR i.checkout_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r
			WHERE r.id = i.checkout_run_id AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
		AND (i.execution_run_id IS NULL OR i.execution_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r
			WHERE r.id = i.execution_run_id AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
		AND NOT (i.checkout_run_id IS :run AND i.execution_run_id IS :run)`

// sqlClaimPick selects the id of the most urgent issue of company :company
// that agent :agent's run :run may claim: unassigned with a status in the
// JSON array :unassigned, or assigned to :agent with a status in :mine (the
// expected statuses plus in_progress, L1's inbox adoption case); empty
// arrays leave a branch out (scope). One index range per status, first
// eligible row of each, then the most urgent of those.
const sqlClaimPick = `SELECT c.id FROM issues c WHERE c.id IN (
		SELECT (SELECT i.id FROM issues i INDEXED BY issues_claim_unassigned
			WHERE i.company_id = :company AND i.assignee_agent_id IS NULL AND i.status = s.value AND ` + sqlClaimOK + `
			ORDER BY i.priority_rank, i.created_at, i.id LIMIT 1)
		FROM json_each(:unassigned) s
		UNION ALL
		SELECT (SELECT i.id FROM issues i INDEXED BY issues_assignee_status
			WHERE i.assignee_agent_id = :agent AND i.status = s.value AND i.company_id = :company AND ` + sqlClaimOK + `
			ORDER BY i.priority_rank, i.created_at, i.id LIMIT 1)
		FROM json_each(:mine) s)
	ORDER BY c.priority_rank, c.created_at, c.id LIMIT 1`

// sqlClaim is the claim: L1 checkout of the picked issue by run :run of
// agent :agent, when the pick is unlocked and :run is live and :agent's (in
// the issue's company). It sets what checkout sets; the epoch always goes
// up (the pick excludes what :run holds).
const sqlClaim = `UPDATE issues SET
		status = 'in_progress',
		assignee_agent_id = :agent,
		checkout_run_id = :run,
		execution_run_id = :run,
		execution_agent_name_key = (SELECT a.name_key FROM agents a WHERE a.id = :agent),
		execution_locked_at = :now,
		started_at = coalesce(started_at, :now),
		checkout_epoch = checkout_epoch + 1,
		updated_at = :now
	WHERE id = (` + sqlClaimPick + `)
		-- fast path: only an unlocked issue, whose old lock columns need no read
		AND checkout_run_id IS NULL AND execution_run_id IS NULL
		-- L1: the caller's run is live and the agent's
		AND ` + sqlCallerRunLive + `
	RETURNING ` + issueCols

// claimArgs validates a claim and returns its statement arguments besides
// :run, :agent and :now: the company, the two JSON status arrays and the
// ",s1,s2," expected list of the checkout statement.
type claimArgs struct {
	company, unassigned, mine, expected string
}

func newClaimArgs(p *store.IssueClaimParams) (*claimArgs, error) {
	a := p.Actor
	scope := p.Scope
	if scope == "" {
		scope = store.ClaimAny
	}
	if !scope.Valid() {
		return nil, clasp.InvalidField("scope", "scope %q: want mine, unassigned or any.", scope)
	}
	statuses := p.ExpectedStatuses
	if statuses == nil {
		statuses = []clasp.IssueStatus{clasp.IssueTodo}
	}
	expected, err := expectedList(statuses)
	if err != nil {
		return nil, err
	}
	switch {
	case a.Type != clasp.ActorAgent:
		return nil, clasp.Errorf(clasp.CodeForbidden, "Only an agent, in a run, claims issues.")
	case a.RunID == "":
		return nil, clasp.Errorf(clasp.CodeRunIDRequired, "A claim needs the run it is made in (header X-Clasp-Run-Id or X-Paperclip-Run-Id).")
	}
	var unassigned, mine []string
	for _, st := range statuses {
		if scope != store.ClaimMine {
			unassigned = append(unassigned, string(st))
		}
		if scope != store.ClaimUnassigned && st != clasp.IssueInProgress {
			mine = append(mine, string(st))
		}
	}
	if scope != store.ClaimUnassigned {
		mine = append(mine, string(clasp.IssueInProgress)) // L1: in_progress and the agent's
	}
	u, _ := json.Marshal(nonNil(unassigned))
	m, _ := json.Marshal(nonNil(mine))
	return &claimArgs{company: a.CompanyID, unassigned: string(u), mine: string(m), expected: expected}, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// IssueClaim is claim-next (issue 5, see store.IssueClaimParams): the most
// urgent issue that run Actor.RunID may check out under L1 is checked out
// for it, with issue.checked_out (and issue.checkout_lock_adopted when a
// dead holder is displaced, L3) in the same transaction. It answers the
// issue after the write, or (nil, nil) when no issue is eligible. Errors:
// 400 invalid_request (scope, expectedStatuses), 422 precondition_failed
// (closed status expected), 403 forbidden (not an agent), 401
// run_id_required, and the caller's run problems (422 run_not_found, 403
// run_not_owned, 409 run_not_live).
func (s *Store) IssueClaim(ctx context.Context, p *store.IssueClaimParams) (*clasp.Issue, error) {
	ca, err := newClaimArgs(p)
	if err != nil {
		return nil, err
	}
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
	iss, err := scanIssue(t.queryRow(ctx, qClaim, args...))
	switch {
	case err == nil:
		if err := t.logActivity(ctx, iss.CompanyID, a, clasp.ActionIssueCheckedOut, "issue", iss.ID, checkedOutDetails{
			AgentID: a.AgentID, RunID: a.RunID, CheckoutEpoch: iss.CheckoutEpoch,
		}); err != nil {
			return nil, err
		}
		return iss, nil
	case !errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("claim an issue: %w", err)
	}
	// No unlocked pick: nothing is eligible, the caller's run is not live,
	// or the pick is a dead holder's issue (L3: checkout adopts it).
	if err := t.callerRunProblem(ctx, a.RunID, a.AgentID, a.CompanyID); err != nil {
		return nil, err
	}
	var id string
	err = t.queryRow(ctx, qClaimPick, args...).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim an issue: %w", err)
	}
	return t.checkout(ctx, id, a.AgentID, ca.expected, a, res)
}
