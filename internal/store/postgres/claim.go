package postgres

// Claim-next (issue 5): check out the most urgent issue the calling run may
// take under rule L1, picked and taken in ONE statement (one round trip):
//
//   - CTE lk locks the caller's run FOR SHARE and checks it is live and the
//     agent's (as checkout's lk: a concurrent finish of the run waits for
//     this statement and then clears the new lock, L6; the run is locked
//     before the issue, the order every lock rule keeps: no deadlock).
//   - CTE cand picks, for each status a claim may take, the first eligible
//     issue of one ordered index range (the company's unassigned issues,
//     issues_claim_unassigned; the agent's own, issues_assignee_status),
//     FOR UPDATE SKIP LOCKED, and keeps the most urgent of those few
//     (priority_rank, created_at, id). A row another claimer holds is
//     skipped, never waited for; a row changed by a claimer that committed
//     is re-checked on its latest version (READ COMMITTED) and skipped when
//     no longer eligible. So concurrent claimers never block on or conflict
//     with each other: each takes a different issue.
//   - CTE upd checks the picked row out (it is locked: no compare-and-set
//     needed), CTE act writes issue.checkout_lock_adopted when a dead holder
//     is displaced (L3) and issue.checked_out, and the statement answers the
//     issue with the adoption reason.
//
// No row means nothing was eligible (or the caller's run is not live: only
// then a second read explains which).

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// sqlClaimRange is the first eligible issue, locked FOR UPDATE SKIP
// LOCKED, of the index range selected by cond (for status s.st): each lock
// column empty, @run or a dead run, and not already held by @run (L2: a
// claim never answers what the run holds).
func sqlClaimRange(cond string) string {
	return `SELECT i.id, i.priority_rank, i.created_at, i.checkout_run_id, i.execution_run_id, ` + sqlLockStates + `
			FROM issues i
			WHERE ` + cond + ` AND i.status = s.st
				-- scalar subqueries, looked up by primary key per locked row (a
				-- NOT EXISTS here is planned as a hash of every live run)
				AND (i.checkout_run_id IS NULL OR i.checkout_run_id = @run::text
					OR NOT coalesce((SELECT ` + sqlLive("r") + ` FROM runs r WHERE r.id = i.checkout_run_id), false))
				AND (i.execution_run_id IS NULL OR i.execution_run_id = @run::text
					OR NOT coalesce((SELECT ` + sqlLive("r") + ` FROM runs r WHERE r.id = i.execution_run_id), false))
				AND NOT (i.checkout_run_id IS NOT DISTINCT FROM @run::text AND i.execution_run_id IS NOT DISTINCT FROM @run::text)
			ORDER BY i.priority_rank, i.created_at, i.id
			LIMIT 1
			FOR UPDATE OF i SKIP LOCKED`
}

// sqlClaim is claim-next for run @run of agent @agent: unassigned issues
// with a status in @unassigned, the agent's with a status in @mine (the
// expected statuses plus in_progress, L1's inbox adoption case); an empty
// array leaves a branch out (scope).
var sqlClaim = `WITH lk AS MATERIALIZED (
		SELECT r.id, r.company_id FROM runs r
		WHERE r.id = @run::text AND r.agent_id = @agent::text AND ` + sqlLive("r") + `
		FOR SHARE OF r
	),
	cand AS MATERIALIZED (
		SELECT x.* FROM (
			SELECT p.* FROM lk CROSS JOIN unnest(@unassigned::text[]) AS s(st) CROSS JOIN LATERAL (
				` + sqlClaimRange(`i.company_id = lk.company_id AND i.assignee_agent_id IS NULL`) + `
			) p
			UNION ALL
			SELECT p.* FROM lk CROSS JOIN unnest(@mine::text[]) AS s(st) CROSS JOIN LATERAL (
				` + sqlClaimRange(`i.assignee_agent_id = @agent::text AND i.company_id = lk.company_id`) + `
			) p
		) x
		ORDER BY x.priority_rank, x.created_at, x.id
		LIMIT 1
	),
	upd AS (
		UPDATE issues i SET
			status = 'in_progress',
			assignee_agent_id = @agent::text,
			checkout_run_id = @run::text,
			execution_run_id = @run::text,
			execution_agent_name_key = (SELECT a.name_key FROM agents a WHERE a.id = @agent::text),
			execution_locked_at = now(),
			started_at = coalesce(i.started_at, now()),
			checkout_epoch = i.checkout_epoch + 1, -- always a new acquisition: cand excludes what @run holds
			updated_at = now()
		FROM cand o
		WHERE i.id = o.id
		RETURNING ` + qualify("i", issueCols) + `
	),
	act AS (` + sqlActivityInto + `
		SELECT u.company_id, ` + sqlActorCols + `, a.action, 'issue', u.id, a.details
		FROM upd u, cand o, LATERAL (VALUES
			(1, 'issue.checkout_lock_adopted', ` + sqlDisplaced + `, ` + sqlAdoptedDetails + `),
			(2, 'issue.checked_out', true, ` + sqlCheckedOutDetails + `)
		) AS a(ord, action, keep, details)
		WHERE a.keep ORDER BY a.ord
	)
	SELECT u.*, CASE WHEN ` + sqlDisplaced + ` THEN ` + sqlWhy + ` ELSE '' END
	FROM upd u, cand o`

// sqlClaimCaller reads the caller's run after a claim that took nothing.
var sqlClaimCaller = `SELECT r.agent_id, r.company_id, ` + runState("r") + ` FROM runs r WHERE r.id = @run::text`

// claimStatuses validates a claim's scope and expected statuses and
// returns the status arrays of its two branches.
func claimStatuses(p *store.IssueClaimParams) (unassigned, mine []string, err error) {
	scope := p.Scope
	if scope == "" {
		scope = store.ClaimAny
	}
	if !scope.Valid() {
		return nil, nil, clasp.InvalidField("scope", "scope %q: want mine, unassigned or any.", scope)
	}
	statuses := p.ExpectedStatuses
	if statuses == nil {
		statuses = []clasp.IssueStatus{clasp.IssueTodo}
	}
	expected, err := expectedList(statuses)
	if err != nil {
		return nil, nil, err
	}
	unassigned, mine = []string{}, []string{}
	for _, st := range expected {
		if scope != store.ClaimMine {
			unassigned = append(unassigned, st)
		}
		if scope != store.ClaimUnassigned && st != string(clasp.IssueInProgress) {
			mine = append(mine, st)
		}
	}
	if scope != store.ClaimUnassigned {
		mine = append(mine, string(clasp.IssueInProgress)) // L1: in_progress and the agent's
	}
	return unassigned, mine, nil
}

// IssueClaim is claim-next (issue 5, see store.IssueClaimParams): the most
// urgent issue that run Actor.RunID may check out under L1 is checked out
// for it in one statement, with issue.checked_out (and
// issue.checkout_lock_adopted when a dead holder is displaced, L3). It
// answers the issue after the write, or (nil, nil) when no issue is
// eligible. Errors: 400 invalid_request (scope, expectedStatuses), 422
// precondition_failed (closed status expected), 403 forbidden (not an
// agent), 401 run_id_required, and the caller's run problems (422
// run_not_found, 403 run_not_owned, 409 run_not_live).
func (s *Store) IssueClaim(ctx context.Context, p *store.IssueClaimParams) (*clasp.Issue, error) {
	unassigned, mine, err := claimStatuses(p)
	if err != nil {
		return nil, err
	}
	a := p.Actor
	switch {
	case a.Type != clasp.ActorAgent:
		return nil, clasp.Errorf(clasp.CodeForbidden, "Only an agent, in a run, claims issues.")
	case a.RunID == "":
		return nil, clasp.Errorf(clasp.CodeRunIDRequired, "A claim needs the run it is made in (header X-Clasp-Run-Id or X-Paperclip-Run-Id).")
	}
	args := actorArgs(namedArgs{"run": a.RunID, "agent": a.AgentID, "unassigned": unassigned, "mine": mine}, a)
	var (
		iss   clasp.Issue
		why   string
		taken bool
	)
	err = s.retry(ctx, func() error {
		err := s.pool.QueryRow(ctx, sqlClaim, args).Scan(append(issueDest(&iss), &why)...)
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
		fixIssue(&iss)
		if why != "" && p.Result != nil {
			p.Result.AdoptedWhy = why
		}
		return &iss, nil
	}
	// Nothing taken: explain a caller's run that is not live, else none.
	l := &lockRow{companyID: a.CompanyID}
	err = s.pool.QueryRow(ctx, sqlClaimCaller, namedArgs{"run": a.RunID}).Scan(&l.callerAgent, &l.callerCompany, &l.callerState)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, wrap(err, "claim an issue: read run %s", a.RunID)
	}
	if err := l.callerProblem(a.RunID, a.AgentID); err != nil {
		return nil, err
	}
	return nil, nil
}
