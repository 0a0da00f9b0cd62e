package sqlite

// The lock rules of SPEC section 4 (L1-L6; L7 is also a CHECK in the
// schema) and the sweeper of SPEC section 5, side by side. Each rule is ONE
// conditional UPDATE whose WHERE clause is the decision; its activity rows
// are written in the same write transaction (BEGIN IMMEDIATE on the single
// writer connection).
//
// SQLite's RETURNING yields only new values, but the audit details need the
// old lock columns (previous holders, why they were dead). So each rule's
// UPDATE runs first restricted to the common case in which the old lock
// columns are known without reading them (checkout: the issue is unlocked;
// release and PATCH by an agent: its run holds both locks). Only when that
// matches nothing does the transaction read the old lock columns
// (sqlLockRead) and run the same UPDATE unrestricted; the read fills the
// audit details and classifies a refusal, it never decides. Nothing can
// change between the statements: the transaction holds the database's
// write lock from its first statement.
//
// A run is live iff it exists and is queued, or running with a lease that
// has not expired at :now (SPEC section 1). A holder is dead when its run is
// terminal, lost (running with an expired lease) or missing.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

const (
	// sqlLiveCheckout and sqlLiveExecution: the run named by the issue's
	// checkout (execution) lock column is live.
	sqlLiveCheckout = `EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.checkout_run_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now)))`
	sqlLiveExecution = `EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.execution_run_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now)))`
	// sqlCallerRunLive: the caller's run :run is live and is agent :agent's,
	// in the issue's company.
	sqlCallerRunLive = `EXISTS (SELECT 1 FROM runs r WHERE r.id = :run AND r.agent_id = :agent
		AND r.company_id = issues.company_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now)))`
	// sqlOwnerOrDeadHolder: run :run of agent :agent may write as the
	// issue's owner: it is live, each lock column is empty, :run, or names a
	// dead run, and :run holds a lock or :agent is the assignee adopting a
	// dead holder (L3, L4, L5).
	sqlOwnerOrDeadHolder = sqlCallerRunLive + `
		AND (checkout_run_id IS NULL OR checkout_run_id = :run OR NOT ` + sqlLiveCheckout + `)
		AND (execution_run_id IS NULL OR execution_run_id = :run OR NOT ` + sqlLiveExecution + `)
		AND (checkout_run_id IS :run OR execution_run_id IS :run OR assignee_agent_id IS :agent)`

	// sqlRunState classifies run r: live, lost or terminal (missing when no row).
	sqlRunState = `CASE WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now) THEN 'live'
		WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END`

	// sqlLockRead reads an issue's old lock columns and the state of the runs
	// they name, for audit details and refusal classification only.
	sqlLockRead = `SELECT i.id, i.company_id, i.status, i.assignee_agent_id, i.checkout_run_id, i.execution_run_id,
		CASE WHEN i.checkout_run_id IS NOT NULL THEN
			coalesce((SELECT ` + sqlRunState + ` FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END,
		CASE WHEN i.execution_run_id IS NOT NULL THEN
			coalesce((SELECT ` + sqlRunState + ` FROM runs r WHERE r.id = i.execution_run_id), 'missing') END
	FROM issues i
	WHERE (i.id = :rid OR i.identifier = :rident) AND (:company = '' OR i.company_id = :company)`

	// sqlCallerRunRead classifies the caller's run after a refusal.
	sqlCallerRunRead = `SELECT r.agent_id, r.company_id, ` + sqlRunState + ` FROM runs r WHERE r.id = :run`

	// L1 checkout and L3 adoption of a dead holder, one conditional write.
	// L2: when :run already holds both locks the WHERE matches nothing (no
	// write, no activity, epoch unchanged) and the caller answers the row.
	sqlCheckout = `UPDATE issues SET
		status = 'in_progress',
		assignee_agent_id = :agent,
		checkout_run_id = :run,
		execution_run_id = :run,
		execution_agent_name_key = (SELECT a.name_key FROM agents a WHERE a.id = :agent),
		execution_locked_at = :now,
		started_at = coalesce(started_at, :now),
		checkout_epoch = checkout_epoch + 1, -- always a new acquisition: L2 is excluded below
		updated_at = :now
	WHERE (id = :rid OR identifier = :rident) AND (:company = '' OR company_id = :company)
		-- fast path: only an unlocked issue, whose old lock columns need no read
		AND (NOT :unlocked_only OR (checkout_run_id IS NULL AND execution_run_id IS NULL))
		-- L1: the caller's run is live and the agent's
		AND ` + sqlCallerRunLive + `
		-- L1: the issue is A's or unassigned
		AND (assignee_agent_id IS NULL OR assignee_agent_id = :agent)
		-- L1: its status is expected, or it is in_progress and A's
		AND (instr(:expected, ',' || status || ',') > 0 OR (status = 'in_progress' AND assignee_agent_id = :agent))
		-- L1/L3: each lock column is empty, the caller's run, or names a dead run
		AND (checkout_run_id IS NULL OR checkout_run_id = :run OR NOT ` + sqlLiveCheckout + `)
		AND (execution_run_id IS NULL OR execution_run_id = :run OR NOT ` + sqlLiveExecution + `)
		-- L2: the same run again changes nothing
		AND NOT (checkout_run_id IS :run AND execution_run_id IS :run)
	RETURNING ` + issueCols

	// S12 board checkout: assign to :agent and set in_progress, taking no
	// lock; refused as L1 would refuse it (a live holder, another assignee,
	// an unexpected status). Dead lock columns are left for the assignee's
	// run to adopt (L3) or the sweeper to clear. Already in_progress and
	// :agent's: no write.
	sqlBoardCheckout = `UPDATE issues SET
		status = 'in_progress',
		assignee_agent_id = :agent,
		started_at = coalesce(started_at, :now),
		updated_at = :now
	WHERE id = :id
		AND EXISTS (SELECT 1 FROM agents a WHERE a.id = :agent AND a.company_id = issues.company_id AND a.status <> 'terminated')
		AND (assignee_agent_id IS NULL OR assignee_agent_id = :agent)
		AND (instr(:expected, ',' || status || ',') > 0 OR (status = 'in_progress' AND assignee_agent_id = :agent))
		AND (checkout_run_id IS NULL OR NOT ` + sqlLiveCheckout + `)
		AND (execution_run_id IS NULL OR NOT ` + sqlLiveExecution + `)
		AND NOT (status = 'in_progress' AND assignee_agent_id IS :agent)
	RETURNING ` + issueCols

	// L4 release: by the holding run, by a live run of the assignee when the
	// holder is dead (adoption, L3), or by the board. Clears both locks;
	// in_progress becomes todo; the assignee stays unless :unassign. An
	// unlocked issue matches nothing (the caller answers the no-op).
	sqlRelease = `UPDATE issues SET
		checkout_run_id = NULL,
		execution_run_id = NULL,
		execution_agent_name_key = NULL,
		execution_locked_at = NULL,
		status = CASE WHEN status = 'in_progress' THEN 'todo' ELSE status END,
		assignee_agent_id = CASE WHEN :unassign THEN NULL ELSE assignee_agent_id END,
		updated_at = :now
	WHERE (id = :rid OR identifier = :rident) AND (:company = '' OR company_id = :company)
		-- fast path: only an issue whose both locks are the caller's run
		AND (NOT :held_only OR (checkout_run_id IS :run AND execution_run_id IS :run))
		AND (checkout_run_id IS NOT NULL OR execution_run_id IS NOT NULL)
		AND (:board OR (` + sqlOwnerOrDeadHolder + `))
	RETURNING ` + issueCols

	// sqlPatchReleases: the PATCH moves the issue out of in_progress or
	// changes its assignee (L6: both locks are cleared).
	sqlPatchReleases = `(coalesce(:status, status) <> 'in_progress' OR (:set_assignee AND :assignee IS NOT assignee_agent_id))`
	// sqlPatchAdopts: an agent's run writes over lock columns that are not
	// all its own; the WHERE has checked that the others name dead runs, so
	// it takes both locks over (L5 "adopt a dead holder, as L3").
	sqlPatchAdopts = `(NOT :board AND (checkout_run_id IS NOT NULL OR execution_run_id IS NOT NULL)
		AND NOT (checkout_run_id IS :run AND execution_run_id IS :run))`

	// L5 owner-only write and L6 release on leaving in_progress or changing
	// the assignee, one conditional statement. While the issue is locked an
	// agent's PATCH must come from the holding run or adopt a dead holder;
	// the board may write anything. Entering in_progress needs an assignee
	// (agents never get here with in_progress: they must use checkout).
	sqlPatch = `UPDATE issues SET
		title = coalesce(:title, title),
		description = coalesce(:description, description),
		priority = coalesce(:priority, priority),
		priority_rank = coalesce(:priority_rank, priority_rank),
		status = coalesce(:status, status),
		assignee_agent_id = CASE WHEN :set_assignee THEN :assignee ELSE assignee_agent_id END,
		started_at = CASE WHEN :status IS 'in_progress' THEN coalesce(started_at, :now) ELSE started_at END,
		completed_at = CASE WHEN :status IS 'done' AND status <> 'done' THEN :now ELSE completed_at END,
		cancelled_at = CASE WHEN :status IS 'cancelled' AND status <> 'cancelled' THEN :now ELSE cancelled_at END,
		-- L6 clears, L5/L3 adoption takes over, otherwise unchanged
		checkout_run_id = CASE WHEN ` + sqlPatchReleases + ` THEN NULL WHEN ` + sqlPatchAdopts + ` THEN :run ELSE checkout_run_id END,
		execution_run_id = CASE WHEN ` + sqlPatchReleases + ` THEN NULL WHEN ` + sqlPatchAdopts + ` THEN :run ELSE execution_run_id END,
		execution_agent_name_key = CASE WHEN ` + sqlPatchReleases + ` THEN NULL
			WHEN ` + sqlPatchAdopts + ` THEN (SELECT a.name_key FROM agents a WHERE a.id = :agent)
			ELSE execution_agent_name_key END,
		execution_locked_at = CASE WHEN ` + sqlPatchReleases + ` THEN NULL WHEN ` + sqlPatchAdopts + ` THEN :now ELSE execution_locked_at END,
		checkout_epoch = CASE WHEN NOT ` + sqlPatchReleases + ` AND ` + sqlPatchAdopts + ` THEN checkout_epoch + 1 ELSE checkout_epoch END,
		updated_at = :now
	WHERE (id = :rid OR identifier = :rident) AND (:company = '' OR company_id = :company)
		-- fast path: only an issue whose both locks are the caller's run
		AND (NOT :held_only OR (checkout_run_id IS :run AND execution_run_id IS :run))
		-- L5: the board, an unlocked issue, or the holding run (or a live run of the assignee over a dead holder)
		AND (:board OR (checkout_run_id IS NULL AND execution_run_id IS NULL) OR (` + sqlOwnerOrDeadHolder + `))
		-- L5: entering in_progress takes an assignee
		AND NOT (:status IS 'in_progress' AND status <> 'in_progress'
			AND (CASE WHEN :set_assignee THEN :assignee ELSE assignee_agent_id END) IS NULL)
		-- a new assignee is an agent of the issue's company
		AND (NOT :set_assignee OR :assignee IS NULL
			OR EXISTS (SELECT 1 FROM agents a WHERE a.id = :assignee AND a.company_id = issues.company_id))
	RETURNING ` + issueCols

	// Board force-release: clears every lock (and the assignee when asked);
	// in_progress becomes todo. Audited by the caller.
	sqlForceRelease = `UPDATE issues SET
		checkout_run_id = NULL,
		execution_run_id = NULL,
		execution_agent_name_key = NULL,
		execution_locked_at = NULL,
		status = CASE WHEN status = 'in_progress' THEN 'todo' ELSE status END,
		assignee_agent_id = CASE WHEN :clear_assignee THEN NULL ELSE assignee_agent_id END,
		updated_at = :now
	WHERE id = :id
	RETURNING ` + issueCols

	// L6 end of a run (finish): the run's row, guarded so that a terminal
	// run never changes again. An agent may end only its own live run.
	sqlRunFinish = `UPDATE runs SET
		status = :status,
		finished_at = :now,
		exit_code = :exit_code,
		error = :error,
		error_code = :error_code
	WHERE id = :run AND status IN ('queued', 'running')
		AND (:board OR (agent_id = :agent AND company_id = :company
			AND (status = 'queued' OR lease_expires_at > :now)))
	RETURNING ` + runCols

	// L6: when a run ends, every lock naming it is cleared in one statement
	// scoped by its run id (both columns, through the partial indexes). The
	// issue's status stays: its assignee may adopt it (L1, S08).
	sqlReleaseRunLocks = `UPDATE issues SET
		checkout_run_id = CASE WHEN checkout_run_id = :run THEN NULL ELSE checkout_run_id END,
		execution_run_id = CASE WHEN execution_run_id = :run THEN NULL ELSE execution_run_id END,
		execution_agent_name_key = CASE WHEN execution_run_id = :run THEN NULL ELSE execution_agent_name_key END,
		execution_locked_at = CASE WHEN execution_run_id = :run THEN NULL ELSE execution_locked_at END,
		updated_at = :now
	WHERE checkout_run_id = :run OR execution_run_id = :run
	RETURNING id, company_id`

	// Sweeper pass 1: running runs whose lease expired become failed
	// (lease_expired), a bounded batch at a time. The outer WHERE re-checks
	// status and lease, so a renewal that commits first wins.
	sqlSweepExpiredRuns = `UPDATE runs SET
		status = 'failed',
		error_code = 'lease_expired',
		error = coalesce(error, 'lease expired: no sign of life before the lease ran out'),
		finished_at = :now
	WHERE id IN (SELECT id FROM runs WHERE status = 'running' AND lease_expires_at <= :now
			ORDER BY lease_expires_at LIMIT :limit)
		AND status = 'running' AND lease_expires_at <= :now
	RETURNING id, company_id, agent_id, lease_expires_at`

	// Sweeper pass 2, candidates: locked issues (through the partial
	// indexes) whose every referenced run is dead. Read on a reader
	// connection; the write below decides.
	sqlStaleLockCandidates = `SELECT id, company_id, checkout_run_id, execution_run_id, c_state, e_state FROM (
		SELECT i.id, i.company_id, i.checkout_run_id, i.execution_run_id,
			coalesce((SELECT ` + sqlRunState + ` FROM runs r WHERE r.id = i.checkout_run_id), 'missing') AS c_state,
			CASE WHEN i.execution_run_id IS NOT NULL THEN
				coalesce((SELECT ` + sqlRunState + ` FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state
		FROM issues i INDEXED BY issues_checkout_run WHERE i.checkout_run_id IS NOT NULL
		UNION ALL -- the execution lock alone (the branches are disjoint)
		SELECT i.id, i.company_id, NULL, i.execution_run_id, NULL,
			coalesce((SELECT ` + sqlRunState + ` FROM runs r WHERE r.id = i.execution_run_id), 'missing')
		FROM issues i INDEXED BY issues_execution_run WHERE i.execution_run_id IS NOT NULL AND i.checkout_run_id IS NULL)
	WHERE coalesce(c_state, '') <> 'live' AND coalesce(e_state, '') <> 'live'
	LIMIT :limit`

	// Sweeper pass 2, the write: clear one issue's locks, compare-and-set
	// on the old lock values with deadness re-checked in the same
	// statement, so a concurrent sweeper or a checkout that landed first
	// makes it match nothing. It never touches an issue with a live
	// referenced run. The status stays (the assignee may adopt, L1).
	sqlClearStaleLock = `UPDATE issues SET
		checkout_run_id = NULL,
		execution_run_id = NULL,
		execution_agent_name_key = NULL,
		execution_locked_at = NULL,
		updated_at = :now
	WHERE id = :id
		AND checkout_run_id IS :old_checkout AND execution_run_id IS :old_execution
		AND (checkout_run_id IS NOT NULL OR execution_run_id IS NOT NULL)
		AND (checkout_run_id IS NULL OR NOT ` + sqlLiveCheckout + `)
		AND (execution_run_id IS NULL OR NOT ` + sqlLiveExecution + `)`
)

// sweepBatch bounds the rows one sweeper transaction changes.
const sweepBatch = 500

// lockRow is an issue's lock state read before a lock rule's UPDATE: the
// columns and the state of the runs they name ("live", "lost", "terminal",
// "missing"; NULL when the column is empty).
type lockRow struct {
	id, companyID, status         string
	assignee, checkout, execution sql.NullString
	checkoutState, executionState sql.NullString
}

func (l *lockRow) locked() bool { return l.checkout.Valid || l.execution.Valid }

// heldBy reports whether run holds both locks.
func (l *lockRow) heldBy(runID string) bool {
	return runID != "" && l.checkout.String == runID && l.execution.String == runID
}

// displaced reports whether taking both locks for run displaces another
// run, and why that holder was dead (its checkout lock's reason first).
func (l *lockRow) displaced(runID string) (why string, ok bool) {
	c := l.checkout.Valid && l.checkout.String != runID
	e := l.execution.Valid && l.execution.String != runID
	switch {
	case c:
		return l.checkoutState.String, true
	case e:
		return l.executionState.String, true
	}
	return "", false
}

// liveOther reports whether a lock column names a live run other than runID.
func (l *lockRow) liveOther(runID string) bool {
	return (l.checkout.Valid && l.checkout.String != runID && l.checkoutState.String == "live") ||
		(l.execution.Valid && l.execution.String != runID && l.executionState.String == "live")
}

// lockRead reads the lock state of issue ref (UUID or identifier) visible
// in company ("" for any); 404 not_found if there is none.
func (t *wtx) lockRead(ctx context.Context, ref, company string) (*lockRow, error) {
	rid, rident := splitRef(ref)
	var l lockRow
	err := t.queryRow(ctx, qLockRead, sql.Named("rid", rid), sql.Named("rident", rident),
		sql.Named("company", company), sql.Named("now", t.now)).
		Scan(&l.id, &l.companyID, &l.status, &l.assignee, &l.checkout, &l.execution, &l.checkoutState, &l.executionState)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("issue", ref)
	}
	if err != nil {
		return nil, fmt.Errorf("read issue %s: %w", ref, err)
	}
	return &l, nil
}

// callerRunProblem explains why the caller's run did not qualify: 422
// run_not_found if it does not exist, 403 run_not_owned if it is another
// agent's, 404 if it is of another company than companyID, 409 run_not_live
// if it is terminal or lost. nil when the run is live and agentID's.
func (t *wtx) callerRunProblem(ctx context.Context, runID, agentID, companyID string) error {
	var owner, company, state string
	err := t.queryRow(ctx, qCallerRunRead, sql.Named("run", runID), sql.Named("now", t.now)).Scan(&owner, &company, &state)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return clasp.Errorf(clasp.CodeRunNotFound, "Run %s does not exist.", runID).WithDetails("runId", runID)
	case err != nil:
		return fmt.Errorf("read run %s: %w", runID, err)
	case owner != agentID:
		return clasp.Errorf(clasp.CodeRunNotOwned, "Run %s belongs to another agent.", runID).WithDetails("runId", runID)
	case company != companyID:
		return clasp.Errorf(clasp.CodeRunNotOwned, "Run %s belongs to another company.", runID).WithDetails("runId", runID)
	case state != "live":
		return clasp.Errorf(clasp.CodeRunNotLive, "Run %s is %s: it can no longer act; open a new run.", runID, state).
			WithDetails("runId", runID)
	}
	return nil
}

// IssueCheckout applies rules L1-L3 (SPEC section 4): for an agent actor,
// its run Actor.RunID takes both locks of issue Ref in one conditional
// write; for the board (S12) the issue is assigned to AgentID and set
// in_progress with no lock. It answers the issue after the write (or, L2,
// as it stands). Errors: 400 invalid_request (expectedStatuses empty or
// unknown, agentId missing), 422 precondition_failed (a closed status
// expected, or the board names no agent of the issue's company), 404
// not_found, 401 run_id_required, 403 agent_mismatch / run_not_owned, 422
// run_not_found, 409 run_not_live, 409 checkout_conflict with details
// {issueId, status, assigneeAgentId, checkoutRunId, executionRunId, reason}.
func (s *Store) IssueCheckout(ctx context.Context, p *store.IssueCheckoutParams) (*clasp.Issue, error) {
	expected, err := expectedList(p.ExpectedStatuses)
	if err != nil {
		return nil, err
	}
	if p.AgentID == "" {
		return nil, clasp.InvalidField("agentId", "agentId is required: the agent that takes the issue.")
	}
	a := p.Actor
	switch {
	case a.Type == clasp.ActorAgent && a.RunID == "":
		return nil, clasp.Errorf(clasp.CodeRunIDRequired, "A checkout needs the run it is made in (header X-Clasp-Run-Id or X-Paperclip-Run-Id).")
	case a.Type == clasp.ActorAgent && p.AgentID != a.AgentID:
		return nil, store.ErrAgentMismatch(a.AgentID, p.AgentID)
	case a.Type != clasp.ActorAgent && !a.IsBoard():
		return nil, clasp.Errorf(clasp.CodeForbidden, "Only agents and the board check issues out.")
	}
	var out *clasp.Issue
	err = s.write(ctx, func(tx *wtx) error {
		if a.IsBoard() {
			old, err := tx.lockRead(ctx, p.Ref, "")
			if err == nil {
				out, err = tx.boardCheckout(ctx, old, p.AgentID, expected, a)
			}
			return err
		}
		var err error
		out, err = tx.checkout(ctx, p.Ref, p.AgentID, expected, a, p.Result)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// expectedList validates checkout's expected statuses and renders them as
// ",s1,s2," for the statements' instr(:expected, ...).
func expectedList(statuses []clasp.IssueStatus) (string, error) {
	if len(statuses) == 0 {
		return "", clasp.InvalidField("expectedStatuses", "expectedStatuses must list at least one status.")
	}
	var b strings.Builder
	b.WriteByte(',')
	for _, st := range statuses {
		if !st.Valid() {
			return "", clasp.InvalidField("expectedStatuses", "expectedStatuses: %q is not an issue status.", st)
		}
		if st.Closed() {
			return "", clasp.Errorf(clasp.CodePreconditionFailed,
				"A checkout cannot expect %s: a closed issue is never checked out.", st).WithDetails("field", "expectedStatuses")
		}
		b.WriteString(string(st))
		b.WriteByte(',')
	}
	return b.String(), nil
}

// checkout is L1-L3 for agent agentID's run a.RunID on issue ref.
func (t *wtx) checkout(ctx context.Context, ref, agentID, expected string, a store.Actor, res *store.CheckoutResult) (*clasp.Issue, error) {
	rid, rident := splitRef(ref)
	checkout := func(rid, rident, company string, unlockedOnly bool) (*clasp.Issue, error) {
		return scanIssue(t.queryRow(ctx, qCheckout, sql.Named("rid", rid), sql.Named("rident", rident), sql.Named("company", company),
			sql.Named("unlocked_only", unlockedOnly), sql.Named("agent", agentID), sql.Named("run", a.RunID),
			sql.Named("expected", expected), sql.Named("now", t.now)))
	}
	// Fast path: an unlocked issue; nothing is displaced, nothing to read.
	iss, err := checkout(rid, rident, scope(a), true)
	old := &lockRow{}
	if errors.Is(err, sql.ErrNoRows) {
		if old, err = t.lockRead(ctx, ref, scope(a)); err != nil {
			return nil, err
		}
		iss, err = checkout(old.id, "", "", false)
		if errors.Is(err, sql.ErrNoRows) {
			iss, err = t.checkoutRefused(ctx, old, agentID, a.RunID, expected)
			if err == nil && res != nil {
				res.SameRun = true // checkoutRefused answers a row only for L2
			}
			return iss, err
		}
	}
	if err != nil {
		return nil, fmt.Errorf("check out issue %s: %w", ref, err)
	}
	if why, ok := old.displaced(a.RunID); ok { // L3
		if res != nil {
			res.AdoptedWhy = why
		}
		if err := t.logActivity(ctx, iss.CompanyID, a, clasp.ActionIssueLockAdopted, "issue", iss.ID, lockAdoptedDetails{
			PreviousCheckoutRunID: orNil(old.checkout), PreviousExecutionRunID: orNil(old.execution), Why: why,
		}); err != nil {
			return nil, err
		}
	}
	if err := t.logActivity(ctx, iss.CompanyID, a, clasp.ActionIssueCheckedOut, "issue", iss.ID, checkedOutDetails{
		AgentID: agentID, RunID: a.RunID, CheckoutEpoch: iss.CheckoutEpoch,
	}); err != nil {
		return nil, err
	}
	return iss, nil
}

// checkoutRefused explains a checkout whose UPDATE matched no row: the
// caller's run problem, L2 (answer the row as it stands), or a 409
// checkout_conflict whose reason is, in this order, assigned_to_other_agent,
// held_by_live_run, status_not_expected.
func (t *wtx) checkoutRefused(ctx context.Context, old *lockRow, agentID, runID, expected string) (*clasp.Issue, error) {
	if runID != "" {
		if err := t.callerRunProblem(ctx, runID, agentID, old.companyID); err != nil {
			return nil, err
		}
		if old.heldBy(runID) { // L2
			return t.issueByID(ctx, old.id)
		}
	}
	var reason string
	switch {
	case old.assignee.Valid && old.assignee.String != agentID:
		reason = clasp.ReasonAssignedToOtherAgent
	case old.liveOther(runID):
		reason = clasp.ReasonHeldByLiveRun
	case !strings.Contains(expected, ","+old.status+",") && (old.status != string(clasp.IssueInProgress) || old.assignee.String != agentID):
		reason = clasp.ReasonStatusNotExpected
	default:
		return nil, fmt.Errorf("check out issue %s: refused for no known reason", old.id)
	}
	return nil, clasp.Errorf(clasp.CodeCheckoutConflict, "Issue %s cannot be checked out: %s.", old.id, strings.ReplaceAll(reason, "_", " ")).
		WithDetails("issueId", old.id, "status", old.status, "assigneeAgentId", orNil(old.assignee),
			"checkoutRunId", orNil(old.checkout), "executionRunId", orNil(old.execution), "reason", reason)
}

// boardCheckout is S12: the board assigns the issue read as old to agentID
// and sets it in_progress with no lock.
func (t *wtx) boardCheckout(ctx context.Context, old *lockRow, agentID, expected string, a store.Actor) (*clasp.Issue, error) {
	iss, err := scanIssue(t.queryRow(ctx, qBoardCheckout, sql.Named("id", old.id), sql.Named("agent", agentID),
		sql.Named("expected", expected), sql.Named("now", t.now)))
	if errors.Is(err, sql.ErrNoRows) {
		if err := t.agentInCompany(ctx, agentID, old.companyID, "agentId"); err != nil {
			return nil, err
		}
		if old.status == string(clasp.IssueInProgress) && old.assignee.String == agentID && !old.liveOther("") {
			return t.issueByID(ctx, old.id) // already so: nothing to write
		}
		return t.checkoutRefused(ctx, old, agentID, "", expected)
	}
	if err != nil {
		return nil, fmt.Errorf("board checkout of issue %s: %w", old.id, err)
	}
	changes := map[string]any{}
	if old.status != string(clasp.IssueInProgress) {
		changes["status"] = map[string]any{"from": old.status, "to": clasp.IssueInProgress}
	}
	if old.assignee.String != agentID {
		changes["assigneeAgentId"] = map[string]any{"from": orNil(old.assignee), "to": agentID}
	}
	err = t.logActivity(ctx, old.companyID, a, clasp.ActionIssueUpdated, "issue", old.id, map[string]any{
		"changes": changes, "boardCheckout": true,
	})
	return iss, err
}

// agentInCompany answers 422 precondition_failed (naming field) unless
// agentID is a non-terminated agent of companyID.
func (t *wtx) agentInCompany(ctx context.Context, agentID, companyID, field string) error {
	var status string
	err := t.queryRow(ctx, qAgentStatusInCompany, agentID, companyID).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) || status == string(clasp.AgentTerminated) {
		return clasp.Errorf(clasp.CodePreconditionFailed, "%s %q is not an active agent of the issue's company.", field, agentID).
			WithDetails("field", field)
	}
	if err != nil {
		return fmt.Errorf("read agent %s: %w", agentID, err)
	}
	return nil
}

// IssueRelease applies rule L4: the holding run, a live run of the
// assignee over a dead holder, or the board clears both locks; in_progress
// becomes todo; the assignee stays unless Unassign. Releasing an unlocked
// issue answers it unchanged (no activity) when the caller is the board,
// its assignee, or it is unassigned. Errors: 404 not_found, 409
// ownership_conflict (a live non-holder, or not the assignee), and the
// caller's run problems (422 run_not_found, 403 run_not_owned, 409
// run_not_live).
func (s *Store) IssueRelease(ctx context.Context, p *store.IssueReleaseParams) (*clasp.Issue, error) {
	a := p.Actor
	if a.Type != clasp.ActorAgent && !a.IsBoard() {
		return nil, clasp.Errorf(clasp.CodeForbidden, "Only agents and the board release issues.")
	}
	rid, rident := splitRef(p.Ref)
	var out *clasp.Issue
	err := s.write(ctx, func(tx *wtx) error {
		release := func(rid, rident, company string, heldOnly bool) (*clasp.Issue, error) {
			return scanIssue(tx.queryRow(ctx, qRelease, sql.Named("rid", rid), sql.Named("rident", rident), sql.Named("company", company),
				sql.Named("held_only", heldOnly), sql.Named("unassign", p.Unassign), sql.Named("board", a.IsBoard()),
				sql.Named("run", a.RunID), sql.Named("agent", a.AgentID), sql.Named("now", tx.now)))
		}
		// Fast path: the caller's run holds both locks, so they are the previous holders.
		old := &lockRow{checkout: sql.NullString{String: a.RunID, Valid: true}, execution: sql.NullString{String: a.RunID, Valid: true}}
		err := sql.ErrNoRows
		if a.RunID != "" {
			out, err = release(rid, rident, scope(a), true)
		}
		if errors.Is(err, sql.ErrNoRows) {
			if old, err = tx.lockRead(ctx, p.Ref, scope(a)); err != nil {
				return err
			}
			out, err = release(old.id, "", "", false)
			if errors.Is(err, sql.ErrNoRows) {
				out, err = tx.releaseRefused(ctx, old, a)
				return err
			}
		}
		if err != nil {
			return fmt.Errorf("release issue %s: %w", p.Ref, err)
		}
		return tx.logActivity(ctx, out.CompanyID, a, clasp.ActionIssueReleased, "issue", out.ID, releasedDetails{
			PreviousCheckoutRunID: orNil(old.checkout), PreviousExecutionRunID: orNil(old.execution), Unassigned: p.Unassign,
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// releaseRefused explains a release whose UPDATE matched no row.
func (t *wtx) releaseRefused(ctx context.Context, old *lockRow, a store.Actor) (*clasp.Issue, error) {
	if !old.locked() {
		if a.IsBoard() || !old.assignee.Valid || old.assignee.String == a.AgentID {
			return t.issueByID(ctx, old.id) // L4: releasing an unlocked issue is a no-op
		}
		return nil, ownershipConflict(old, "it is assigned to another agent")
	}
	if a.RunID != "" {
		if err := t.callerRunProblem(ctx, a.RunID, a.AgentID, old.companyID); err != nil {
			return nil, err
		}
	}
	return nil, ownershipConflict(old, "another run holds it, or you are not its assignee")
}

// ownershipConflict is the 409 of rules L4/L5 for the issue read as old.
func ownershipConflict(old *lockRow, why string) error {
	return clasp.Errorf(clasp.CodeOwnershipConflict, "Issue %s cannot be changed by this run: %s.", old.id, why).
		WithDetails("issueId", old.id, "status", old.status, "assigneeAgentId", orNil(old.assignee),
			"checkoutRunId", orNil(old.checkout), "executionRunId", orNil(old.execution))
}

// IssueForceRelease is the board's audited force-release: every lock of
// issue Ref is cleared (and the assignee when ClearAssignee), in_progress
// becomes todo, and issue.admin_force_release {previousCheckoutRunId,
// previousExecutionRunId, reason} is written. 403 forbidden for any actor
// but the board; 404 not_found.
func (s *Store) IssueForceRelease(ctx context.Context, p *store.IssueForceReleaseParams) (*clasp.Issue, error) {
	if !p.Actor.IsBoard() {
		return nil, clasp.Errorf(clasp.CodeForbidden, "Only the board may force-release an issue.")
	}
	var out *clasp.Issue
	err := s.write(ctx, func(tx *wtx) error {
		old, err := tx.lockRead(ctx, p.Ref, "")
		if err != nil {
			return err
		}
		if out, err = scanIssue(tx.queryRow(ctx, qForceRelease, sql.Named("id", old.id),
			sql.Named("clear_assignee", p.ClearAssignee), sql.Named("now", tx.now))); err != nil {
			return fmt.Errorf("force-release issue %s: %w", old.id, err)
		}
		return tx.logActivity(ctx, old.companyID, p.Actor, clasp.ActionIssueForceRelease, "issue", old.id, forceReleaseDetails{
			PreviousCheckoutRunID: orNil(old.checkout), PreviousExecutionRunID: orNil(old.execution),
			Reason: p.Reason, ClearAssignee: p.ClearAssignee,
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// IssueUpdate applies a PATCH under rules L5 and L6 in one conditional
// statement; Comment, when set, is written in the same transaction. While
// the issue is locked an agent's PATCH must come from the holding run (or a
// live run of the assignee over a dead holder, which then takes both locks
// over, as L3); moving the issue out of in_progress or changing its
// assignee clears both locks. Errors: 400 invalid_request (bad field), 404
// not_found, 422 precondition_failed (an agent moving it into in_progress;
// the board doing so without an assignee; an assignee that is no agent of
// the company), 409 ownership_conflict, the caller's run problems, 422
// idempotency_key_reused. With p.Idempotency the key is looked up and
// recorded in the same write transaction (store.IssueUpdateParams): a
// replay writes nothing and answers the issue as it is now.
func (s *Store) IssueUpdate(ctx context.Context, p *store.IssueUpdateParams) (*clasp.Issue, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var out *clasp.Issue
	err := s.write(ctx, func(tx *wtx) error {
		if id, err := tx.idempotencyLookup(ctx, p.Idempotency, idemIssueUpdate); err != nil || id != "" {
			if err != nil {
				return err
			}
			out, err = tx.issueByID(ctx, id)
			p.Idempotency.Replayed = err == nil
			return err
		}
		var err error
		if out, err = tx.issueUpdate(ctx, p); err != nil {
			return err
		}
		return tx.idempotencyRecord(ctx, p.Idempotency, idemIssueUpdate, out.ID)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (t *wtx) issueUpdate(ctx context.Context, p *store.IssueUpdateParams) (*clasp.Issue, error) {
	a := p.Actor
	var status, priority, rank any
	if p.Status != nil {
		status = string(*p.Status)
	}
	if p.Priority != nil {
		priority, rank = string(*p.Priority), p.Priority.Rank()
	}
	var assignee any
	if p.AssigneeAgentID != nil {
		assignee = nullable(*p.AssigneeAgentID)
	}
	patch := func(rid, rident, company string, heldOnly bool) (*clasp.Issue, error) {
		return scanIssue(t.queryRow(ctx, qPatch, sql.Named("rid", rid), sql.Named("rident", rident), sql.Named("company", company),
			sql.Named("held_only", heldOnly), sql.Named("title", nullString(p.Title)), sql.Named("description", nullString(p.Description)),
			sql.Named("priority", priority), sql.Named("priority_rank", rank), sql.Named("status", status),
			sql.Named("set_assignee", p.AssigneeAgentID != nil), sql.Named("assignee", assignee),
			sql.Named("board", a.IsBoard()), sql.Named("run", a.RunID), sql.Named("agent", a.AgentID), sql.Named("now", t.now)))
	}
	// The fields as they were, for the audit row (issue.updated {changes}).
	before, err := t.auditFields(ctx, p.Ref, scope(a))
	if err != nil {
		return nil, err
	}
	// Fast path: the caller's run holds both locks, so they are the old lock columns.
	old := &lockRow{checkout: sql.NullString{String: a.RunID, Valid: true}, execution: sql.NullString{String: a.RunID, Valid: true}}
	var iss *clasp.Issue
	err = sql.ErrNoRows
	if a.Type == clasp.ActorAgent && a.RunID != "" {
		rid, rident := splitRef(p.Ref)
		iss, err = patch(rid, rident, scope(a), true)
	}
	if errors.Is(err, sql.ErrNoRows) {
		if old, err = t.lockRead(ctx, p.Ref, scope(a)); err != nil {
			return nil, err
		}
		iss, err = patch(old.id, "", "", false)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, t.patchRefused(ctx, old, p)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("update issue %s: %w", p.Ref, err)
	}

	// Lock activity: one row per lock change (L7).
	switch {
	case old.locked() && iss.CheckoutRunID == nil && iss.ExecutionRunID == nil: // L6
		err = t.logActivity(ctx, iss.CompanyID, a, clasp.ActionIssueReleased, "issue", iss.ID, releasedDetails{
			PreviousCheckoutRunID: orNil(old.checkout), PreviousExecutionRunID: orNil(old.execution),
			Unassigned: p.AssigneeAgentID != nil && *p.AssigneeAgentID == "", Cause: "update",
		})
	case a.RunID != "" && old.locked() && !old.heldBy(a.RunID) && iss.CheckoutRunID != nil && *iss.CheckoutRunID == a.RunID: // L5 adoption
		if why, ok := old.displaced(a.RunID); ok {
			err = t.logActivity(ctx, iss.CompanyID, a, clasp.ActionIssueLockAdopted, "issue", iss.ID, lockAdoptedDetails{
				PreviousCheckoutRunID: orNil(old.checkout), PreviousExecutionRunID: orNil(old.execution), Why: why,
			})
		}
		if err == nil {
			err = t.logActivity(ctx, iss.CompanyID, a, clasp.ActionIssueCheckedOut, "issue", iss.ID, checkedOutDetails{
				AgentID: a.AgentID, RunID: a.RunID, CheckoutEpoch: iss.CheckoutEpoch,
			})
		}
	}
	if err != nil {
		return nil, err
	}
	details := map[string]any{"changes": before.changes(iss)}
	if old.locked() && iss.CheckoutRunID == nil && iss.ExecutionRunID == nil {
		details["locksCleared"] = true
		details["previousCheckoutRunId"] = orNil(old.checkout)
		details["previousExecutionRunId"] = orNil(old.execution)
	}
	if err := t.logActivity(ctx, iss.CompanyID, a, clasp.ActionIssueUpdated, "issue", iss.ID, details); err != nil {
		return nil, err
	}
	if p.Comment != nil {
		if _, err := t.commentInsert(ctx, iss.ID, iss.CompanyID, *p.Comment, a); err != nil {
			return nil, err
		}
	}
	return iss, nil
}

// patchRefused explains a PATCH whose UPDATE matched no row, in the order
// of its WHERE: ownership (L5), entering in_progress without an assignee,
// an assignee outside the company.
func (t *wtx) patchRefused(ctx context.Context, old *lockRow, p *store.IssueUpdateParams) error {
	a := p.Actor
	if !a.IsBoard() && old.locked() {
		if a.RunID == "" {
			return ownershipConflict(old, "it is locked and this request names no run")
		}
		if err := t.callerRunProblem(ctx, a.RunID, a.AgentID, old.companyID); err != nil {
			return err
		}
		owner := (!old.checkout.Valid || old.checkout.String == a.RunID || old.checkoutState.String != "live") &&
			(!old.execution.Valid || old.execution.String == a.RunID || old.executionState.String != "live") &&
			(old.checkout.String == a.RunID || old.execution.String == a.RunID || old.assignee.String == a.AgentID)
		if !owner {
			return ownershipConflict(old, "another run holds it")
		}
	}
	newAssignee := old.assignee.String
	if p.AssigneeAgentID != nil {
		newAssignee = *p.AssigneeAgentID
	}
	if p.Status != nil && *p.Status == clasp.IssueInProgress && old.status != string(clasp.IssueInProgress) && newAssignee == "" {
		return clasp.Errorf(clasp.CodePreconditionFailed, "An issue moves into in_progress only with an assignee.").
			WithDetails("field", "assigneeAgentId")
	}
	if p.AssigneeAgentID != nil && *p.AssigneeAgentID != "" {
		var status string
		err := t.queryRow(ctx, qAgentStatusInCompany, *p.AssigneeAgentID, old.companyID).Scan(&status)
		if errors.Is(err, sql.ErrNoRows) {
			return clasp.Errorf(clasp.CodePreconditionFailed, "assigneeAgentId %q is not an agent of the issue's company.", *p.AssigneeAgentID).
				WithDetails("field", "assigneeAgentId")
		}
	}
	return fmt.Errorf("update issue %s: refused for no known reason", old.id)
}

// sqlIssueAudit reads the audited fields of an issue by id or identifier.
const sqlIssueAudit = `SELECT title, description, status, priority, assignee_agent_id FROM issues
	WHERE (id = ? OR identifier = ?) AND (? = '' OR company_id = ?)`

// auditFields are the fields of an issue that issue.updated reports as
// {changes: {field: {from, to}}} (the same shape on both stores).
type auditFields struct {
	title, description, status, priority string
	assignee                             sql.NullString
}

// auditFields reads the audited fields of issue ref (scoped to company when
// not empty) inside the write transaction; a missing issue gives zero
// fields (the statement that follows answers not_found).
func (t *wtx) auditFields(ctx context.Context, ref, company string) (*auditFields, error) {
	rid, rident := splitRef(ref)
	f := &auditFields{}
	err := t.queryRow(ctx, qIssueAudit, rid, rident, company, company).Scan(&f.title, &f.description, &f.status, &f.priority, &f.assignee)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read issue %s for audit: %w", ref, err)
	}
	return f, nil
}

// changes returns {field: {from, to}} for each audited field that differs
// in iss; descriptions are cut to 200 characters.
func (f *auditFields) changes(iss *clasp.Issue) map[string]any {
	m := map[string]any{}
	add := func(name string, from, to any, differ bool) {
		if differ {
			m[name] = map[string]any{"from": from, "to": to}
		}
	}
	cut := func(s string) string {
		if r := []rune(s); len(r) > 200 {
			return string(r[:200])
		}
		return s
	}
	add("title", f.title, iss.Title, f.title != iss.Title)
	add("description", cut(f.description), cut(iss.Description), f.description != iss.Description)
	add("status", f.status, iss.Status, f.status != string(iss.Status))
	add("priority", f.priority, iss.Priority, f.priority != string(iss.Priority))
	newAssignee := ""
	if iss.AssigneeAgentID != nil {
		newAssignee = *iss.AssigneeAgentID
	}
	add("assigneeAgentId", orNil(f.assignee), iss.AssigneeAgentID, f.assignee.String != newAssignee)
	return m
}

// RunFinish ends run RunID with terminal Status and, in the same
// transaction, clears every lock naming it with one issue.lock_released
// {runId, runStatus} per issue (rule L6), then writes run.finished. An
// agent may finish only its own live run; the board any non-terminal run.
// Errors: 400 invalid_request (status not terminal), 404 not_found, 403
// run_not_owned, 409 run_not_live (terminal, or lost for an agent).
func (s *Store) RunFinish(ctx context.Context, p *store.RunFinishParams) (*clasp.Run, error) {
	if !p.Status.Terminal() {
		return nil, clasp.InvalidField("status", "status must be succeeded, failed, cancelled or timed_out.")
	}
	if p.ExitCode != nil && (*p.ExitCode < math.MinInt32 || *p.ExitCode > math.MaxInt32) {
		return nil, clasp.InvalidField("exitCode", "exitCode must be a 32-bit integer.")
	}
	a := p.Actor
	var out *clasp.Run
	err := s.write(ctx, func(tx *wtx) error {
		run, err := scanRun(tx.queryRow(ctx, qRunFinish, sql.Named("run", p.RunID), sql.Named("status", string(p.Status)),
			sql.Named("exit_code", intArg(p.ExitCode)), sql.Named("error", nullString(p.Error)),
			sql.Named("error_code", nullString(p.ErrorCode)),
			sql.Named("board", a.Type != clasp.ActorAgent), sql.Named("agent", a.AgentID), sql.Named("company", a.CompanyID),
			sql.Named("now", tx.now)))
		if errors.Is(err, sql.ErrNoRows) {
			return tx.runFinishRefused(ctx, p)
		}
		if err != nil {
			return fmt.Errorf("finish run %s: %w", p.RunID, err)
		}
		out = run
		if err := tx.releaseRunLocks(ctx, run, a); err != nil {
			return err
		}
		return tx.logActivity(ctx, run.CompanyID, a, clasp.ActionRunFinished, "run", run.ID, map[string]any{
			"status": run.Status, "exitCode": run.ExitCode, "error": run.Error,
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// releaseRunLocks is L6 for a run that has just ended: one statement clears
// every lock column naming it, one issue.lock_released per issue.
func (t *wtx) releaseRunLocks(ctx context.Context, run *clasp.Run, a store.Actor) error {
	rows, err := t.query(ctx, qReleaseRunLocks, sql.Named("run", run.ID), sql.Named("now", t.now))
	if err != nil {
		return fmt.Errorf("release locks of run %s: %w", run.ID, err)
	}
	type released struct{ id, companyID string }
	var issues []released
	for rows.Next() {
		var r released
		if err := rows.Scan(&r.id, &r.companyID); err != nil {
			_ = rows.Close() // the scan error is the one returned
			return fmt.Errorf("release locks of run %s: %w", run.ID, err)
		}
		issues = append(issues, r)
	}
	_ = rows.Close() // read-only rows: a close error leaves nothing behind; rows.Err is checked next
	if err := rows.Err(); err != nil {
		return fmt.Errorf("release locks of run %s: %w", run.ID, err)
	}
	for _, r := range issues {
		if err := t.logActivity(ctx, r.companyID, a, clasp.ActionIssueLockReleased, "issue", r.id, lockReleasedDetails{
			RunID: run.ID, RunStatus: run.Status,
		}); err != nil {
			return err
		}
	}
	// Issue 4: the wakes deferred behind this run are promoted in the same
	// transaction (heartbeat.go).
	return t.promoteBlockedBy(ctx, run.ID)
}

// runFinishRefused explains a finish whose UPDATE matched no row.
func (t *wtx) runFinishRefused(ctx context.Context, p *store.RunFinishParams) error {
	var owner, company, state string
	err := t.queryRow(ctx, qCallerRunRead, sql.Named("run", p.RunID), sql.Named("now", t.now)).Scan(&owner, &company, &state)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read run %s: %w", p.RunID, err)
	}
	if err := store.RunRefusal(p.Actor, p.RunID, err == nil, owner, company, state); err != nil {
		return err
	}
	return fmt.Errorf("finish run %s: refused for no known reason", p.RunID)
}

// SweepExpiredRuns is sweeper pass 1 (SPEC section 5): running runs whose
// lease expired become failed with errorCode lease_expired, in batches of
// sweepBatch per transaction, one run.lost row each (actor system). It
// returns how many runs it failed. Safe to run concurrently.
func (s *Store) SweepExpiredRuns(ctx context.Context) (int, error) {
	total := 0
	for {
		n := 0
		err := s.write(ctx, func(tx *wtx) error {
			rows, err := tx.query(ctx, qSweepExpiredRuns, sql.Named("now", tx.now), sql.Named("limit", sweepBatch))
			if err != nil {
				return fmt.Errorf("sweep expired runs: %w", err)
			}
			type lost struct {
				id, companyID, agentID string
				lease                  int64
			}
			var runs []lost
			for rows.Next() {
				var r lost
				if err := rows.Scan(&r.id, &r.companyID, &r.agentID, &r.lease); err != nil {
					_ = rows.Close() // the scan error is the one returned
					return fmt.Errorf("sweep expired runs: %w", err)
				}
				runs = append(runs, r)
			}
			_ = rows.Close() // read-only rows: a close error leaves nothing behind; rows.Err is checked next
			if err := rows.Err(); err != nil {
				return fmt.Errorf("sweep expired runs: %w", err)
			}
			for _, r := range runs {
				if err := tx.logActivity(ctx, r.companyID, systemActor, clasp.ActionRunLost, "run", r.id, map[string]any{
					"agentId": r.agentID, "errorCode": clasp.RunErrorLeaseExpired, "leaseExpiresAt": fromMicros(r.lease),
				}); err != nil {
					return err
				}
			}
			n = len(runs)
			return nil
		})
		total += n
		if err != nil {
			return total, err
		}
		if n < sweepBatch {
			return total, nil
		}
	}
}

// staleLock is a candidate of sweeper pass 2.
type staleLock struct {
	id, companyID                 string
	checkout, execution           sql.NullString
	checkoutState, executionState sql.NullString
}

// SweepStaleLocks is sweeper pass 2 (SPEC section 5): the locks of issues
// whose referenced runs are all dead (terminal, lost or missing) are
// cleared, each by a compare-and-set on the old lock values that re-checks
// deadness, with one issue.stale_lock_cleared {clearedCheckoutRunId,
// clearedExecutionRunId, why} each (actor system); at most sweepBatch
// issues per transaction. It returns how many issues it cleared; a second
// pass clears nothing, and concurrent sweepers clear each issue once.
func (s *Store) SweepStaleLocks(ctx context.Context) (int, error) {
	total := 0
	for {
		cands, err := s.staleLockCandidates(ctx)
		if err != nil || len(cands) == 0 {
			return total, err
		}
		n := 0
		err = s.write(ctx, func(tx *wtx) error {
			n = 0
			for _, c := range cands {
				res, err := tx.exec(ctx, qClearStaleLock, sql.Named("id", c.id), sql.Named("old_checkout", orNil(c.checkout)),
					sql.Named("old_execution", orNil(c.execution)), sql.Named("now", tx.now))
				if err != nil {
					return fmt.Errorf("clear stale lock of issue %s: %w", c.id, err)
				}
				if k, _ := res.RowsAffected(); k == 0 {
					continue // changed since it was read: a checkout or another sweeper came first
				}
				why := c.checkoutState.String
				if !c.checkout.Valid {
					why = c.executionState.String
				}
				if err := tx.logActivity(ctx, c.companyID, systemActor, clasp.ActionIssueStaleLockCleared, "issue", c.id, staleLockDetails{
					ClearedCheckoutRunID: orNil(c.checkout), ClearedExecutionRunID: orNil(c.execution), Why: why,
				}); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		total += n
		if err != nil {
			return total, err
		}
		if len(cands) < sweepBatch || n == 0 {
			return total, nil
		}
	}
}

func (s *Store) staleLockCandidates(ctx context.Context) ([]staleLock, error) {
	rows, err := s.read(ctx, qStaleLockCandidates, sql.Named("now", s.nowMicros()), sql.Named("limit", sweepBatch))
	if err != nil {
		return nil, fmt.Errorf("find stale locks: %w", err)
	}
	defer rows.Close()
	var out []staleLock
	for rows.Next() {
		var c staleLock
		if err := rows.Scan(&c.id, &c.companyID, &c.checkout, &c.execution, &c.checkoutState, &c.executionState); err != nil {
			return nil, fmt.Errorf("find stale locks: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find stale locks: %w", err)
	}
	return out, nil
}

// systemActor is the sweeper's actor in activity rows.
var systemActor = store.Actor{Type: clasp.ActorSystem}

// Details of the lock activity rows (SPEC section 4).
type (
	checkedOutDetails struct {
		AgentID       string `json:"agentId"`
		RunID         string `json:"runId"`
		CheckoutEpoch int64  `json:"checkoutEpoch"`
	}
	lockAdoptedDetails struct {
		PreviousCheckoutRunID  any    `json:"previousCheckoutRunId"`
		PreviousExecutionRunID any    `json:"previousExecutionRunId"`
		Why                    string `json:"why"`
	}
	releasedDetails struct {
		PreviousCheckoutRunID  any    `json:"previousCheckoutRunId"`
		PreviousExecutionRunID any    `json:"previousExecutionRunId"`
		Unassigned             bool   `json:"unassigned"`
		Cause                  string `json:"cause,omitempty"` // "update" when a PATCH released it (L6)
	}
	lockReleasedDetails struct {
		RunID     string          `json:"runId"`
		RunStatus clasp.RunStatus `json:"runStatus"`
	}
	staleLockDetails struct {
		ClearedCheckoutRunID  any    `json:"clearedCheckoutRunId"`
		ClearedExecutionRunID any    `json:"clearedExecutionRunId"`
		Why                   string `json:"why"`
	}
	forceReleaseDetails struct {
		PreviousCheckoutRunID  any    `json:"previousCheckoutRunId"`
		PreviousExecutionRunID any    `json:"previousExecutionRunId"`
		Reason                 string `json:"reason"`
		ClearAssignee          bool   `json:"clearAssignee"`
	}
)
