package postgres

// The lock rules of SPEC section 4 (L1-L6; L7 is also a CHECK in the
// schema) and the sweeper of SPEC section 5, side by side, in the same
// order as internal/store/sqlite/lock.go.
//
// Each rule is ONE conditional statement, run on its own (its own implicit
// transaction, one round trip):
//
//   - CTE old reads the issue's row, the state of the runs its lock columns
//     name and the caller's run, all from the statement's snapshot: one
//     consistent moment, in which a run named by the issue is visible
//     (missing means deleted) and a dead run stays dead.
//   - CTE d decides on old alone (d.ok): the rule's conditions.
//   - When d.ok and the rule takes a lock for the caller's run, CTE lk locks
//     that run FOR SHARE and re-checks on its latest row that it is still
//     live: a concurrent finish of the run then either waits for this
//     statement (and clears the new lock, L6) or makes it write nothing; so
//     a lock never outlives its run. lk is the only lock taken before the
//     issue's, always in that order (RunFinish locks the run, then its
//     issues): no deadlock.
//   - CTE upd writes the issue only if d.ok and the row is still the version
//     old read (compare-and-set on xmin): a row another transaction changed
//     after the snapshot is left alone, and the caller runs the statement
//     again on a fresh snapshot (lockRule). So the decision and the audit
//     details (the previous holders) are always those of the row written.
//   - CTE act writes the rule's activity rows from what upd returned.
//   - The answer is the issue after the statement with the old lock state,
//     from which a refusal is explained without a second read.
//
// A refusal writes nothing and locks nothing (a read-only transaction: no
// WAL, no fsync), so a crowd of losing checkouts costs the winner little.
// Nothing is decided in Go.
//
// A run is live iff it exists and is queued, or running with a lease that
// has not expired at now(), the database's clock at the start of the
// transaction (SPEC section 1); never a replica's clock. A holder is dead
// when its run is terminal, lost (running with an expired lease) or
// missing; deadness never reverts.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// runState is the SQL state of run alias r: 'live', 'lost' or 'terminal'.
func runState(r string) string {
	return `CASE WHEN ` + r + `.status = 'queued' OR (` + r + `.status = 'running' AND ` + r + `.lease_expires_at > now()) THEN 'live'
		WHEN ` + r + `.status = 'running' THEN 'lost' ELSE 'terminal' END`
}

// sqlLive is the SQL condition "run alias r is live".
func sqlLive(r string) string {
	return `(` + r + `.status = 'queued' OR (` + r + `.status = 'running' AND ` + r + `.lease_expires_at > now()))`
}

// sqlIssueRef selects issue alias i by @rid (UUID) or @rident
// (identifier) within @company (empty for any).
const sqlIssueRef = `(i.id = @rid::text OR i.identifier = @rident::text) AND (@company::text = '' OR i.company_id = @company::text)`

// sqlLockStates are the states of the runs named by issue alias i's lock
// columns (c_state, e_state): live, lost, terminal or missing; NULL for an
// empty column.
var sqlLockStates = `CASE WHEN i.checkout_run_id IS NOT NULL THEN
			coalesce((SELECT ` + runState("r") + ` FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS c_state,
		CASE WHEN i.execution_run_id IS NOT NULL THEN
			coalesce((SELECT ` + runState("r") + ` FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state`

// oldCTE is CTE old of a lock rule: the issue's row and its version (ver,
// the xmin that upd compares), its lock states, the caller's run @run
// (agent, company, state; NULL when there is none) and one rule-specific
// boolean, extra; all from the statement's snapshot.
func oldCTE(extra string) string {
	return `old AS MATERIALIZED (
		SELECT ` + qualify("i", issueCols) + `, i.xmin AS ver, ` + sqlLockStates + `,
			c.agent_id AS caller_agent, c.company_id AS caller_company,
			CASE WHEN c.id IS NOT NULL THEN ` + runState("c") + ` END AS caller_state,
			` + extra + ` AS extra
		FROM issues i LEFT JOIN runs c ON c.id = @run::text
		WHERE ` + sqlIssueRef + `
	)`
}

// decideCTE is CTE d: the rule's decision on old o (NULL counts as no).
func decideCTE(ok string) string {
	return `d AS MATERIALIZED (
		SELECT o.id, coalesce(` + ok + `, false) AS ok FROM old o
	)`
}

// sqlLockCaller is CTE lk: when d.ok, the caller's run @run locked FOR
// SHARE and re-checked live on its latest row; empty otherwise.
var sqlLockCaller = `lk AS MATERIALIZED (
		SELECT r.id FROM runs r, d WHERE d.ok AND r.id = @run::text AND ` + sqlLive("r") + `
		FOR SHARE OF r
	)`

// sqlCAS is the start of upd's WHERE: the issue read as old, still the
// same version (compare-and-set), and the decision.
const sqlCAS = `i.id = o.id AND i.xmin = o.ver AND d.ok`

// sqlLockAnswer ends a lock rule: the issue after the statement (upd's
// row, or old's when upd wrote nothing), whether upd changed it, the old
// lock state and the decision (see lockRow).
var sqlLockAnswer = `
	SELECT x.*, o.status, o.assignee_agent_id, o.checkout_run_id, o.execution_run_id, o.c_state, o.e_state,
		o.caller_agent, o.caller_company, o.caller_state, o.extra, d.ok
	FROM old o JOIN d ON d.id = o.id CROSS JOIN LATERAL (
		SELECT true AS changed, u.* FROM upd u
		UNION ALL
		SELECT false, ` + qualify("o", issueCols) + ` WHERE NOT EXISTS (SELECT 1 FROM upd)
	) x`

// sqlOwnerOrDeadHolder: run @run of agent @agent may write as the
// issue's owner (old o): the run is live, the agent's and in the issue's
// company, each lock column is empty, @run, or names a dead run, and @run
// holds a lock or @agent is the assignee adopting a dead holder (L3, L4, L5).
const sqlOwnerOrDeadHolder = `o.caller_state = 'live' AND o.caller_agent = @agent::text AND o.caller_company = o.company_id
		AND (o.checkout_run_id IS NULL OR o.checkout_run_id = @run::text OR o.c_state <> 'live')
		AND (o.execution_run_id IS NULL OR o.execution_run_id = @run::text OR o.e_state <> 'live')
		AND (o.checkout_run_id = @run::text OR o.execution_run_id = @run::text OR o.assignee_agent_id = @agent::text)`

// sqlDisplaced: taking both locks for @run displaces another run (old o);
// sqlWhy is why that holder was dead (its checkout lock's reason first).
const (
	sqlDisplaced = `((o.checkout_run_id IS NOT NULL AND o.checkout_run_id <> @run::text)
		OR (o.execution_run_id IS NOT NULL AND o.execution_run_id <> @run::text))`
	sqlWhy = `CASE WHEN o.checkout_run_id IS NOT NULL AND o.checkout_run_id <> @run::text THEN o.c_state ELSE o.e_state END`
	// sqlAdoptedDetails are the details of issue.checkout_lock_adopted (L3).
	sqlAdoptedDetails = `jsonb_build_object('previousCheckoutRunId', o.checkout_run_id,
		'previousExecutionRunId', o.execution_run_id, 'why', ` + sqlWhy + `)`
	// sqlCheckedOutDetails are the details of issue.checked_out.
	sqlCheckedOutDetails = `jsonb_build_object('agentId', @agent::text, 'runId', @run::text, 'checkoutEpoch', u.checkout_epoch)`
)

// sqlChange is the JSON object {field: {"from": old, "to": new}} when
// changed is true, else {} (issue.updated details, team decision of 18:30).
func sqlChange(field, changed, from, to string) string {
	return `CASE WHEN ` + changed + ` THEN jsonb_build_object('` + field + `', jsonb_build_object('from', ` + from + `, 'to', ` + to + `))
		ELSE '{}'::jsonb END`
}

var (
	// sqlCheckout is L1 checkout with L3 adoption of a dead holder by run
	// @run of agent @agent, with its activity rows (issue.checkout_lock_adopted
	// when a dead holder is displaced, then issue.checked_out). L2: when
	// @run already holds both locks, d.ok is false (no write, no activity,
	// epoch unchanged) and the answer is the row as it stands.
	sqlCheckout = `WITH ` + oldCTE("false") + `,
	` + decideCTE(`
			-- L1: the caller's run is live and the agent's, in the issue's company
			o.caller_state = 'live' AND o.caller_agent = @agent::text AND o.caller_company = o.company_id
			-- L1: the issue is A's or unassigned
			AND (o.assignee_agent_id IS NULL OR o.assignee_agent_id = @agent::text)
			-- L1: its status is expected, or it is in_progress and A's
			AND (o.status = ANY(@expected::text[]) OR (o.status = 'in_progress' AND o.assignee_agent_id = @agent::text))
			-- L1/L3: each lock column is empty, the caller's run, or names a dead run
			AND (o.checkout_run_id IS NULL OR o.checkout_run_id = @run::text OR o.c_state <> 'live')
			AND (o.execution_run_id IS NULL OR o.execution_run_id = @run::text OR o.e_state <> 'live')
			-- L2: the same run again changes nothing
			AND NOT (o.checkout_run_id IS NOT DISTINCT FROM @run::text AND o.execution_run_id IS NOT DISTINCT FROM @run::text)`) + `,
	` + sqlLockCaller + `,
	upd AS (
		UPDATE issues i SET
			status = 'in_progress',
			assignee_agent_id = @agent::text,
			checkout_run_id = @run::text,
			execution_run_id = @run::text,
			execution_agent_name_key = (SELECT a.name_key FROM agents a WHERE a.id = @agent::text),
			execution_locked_at = now(),
			started_at = coalesce(i.started_at, now()),
			checkout_epoch = i.checkout_epoch + 1, -- always a new acquisition: L2 is excluded by d
			updated_at = now()
		FROM old o JOIN d ON d.id = o.id
		WHERE ` + sqlCAS + ` AND EXISTS (SELECT 1 FROM lk)
		RETURNING ` + qualify("i", issueCols) + `
	),
	act AS (` + sqlActivityInto + `
		SELECT u.company_id, ` + sqlActorCols + `, a.action, 'issue', u.id, a.details
		FROM upd u, old o, LATERAL (VALUES
			(1, 'issue.checkout_lock_adopted', ` + sqlDisplaced + `, ` + sqlAdoptedDetails + `),
			(2, 'issue.checked_out', true, ` + sqlCheckedOutDetails + `)
		) AS a(ord, action, keep, details)
		WHERE a.keep ORDER BY a.ord
	)` + sqlLockAnswer

	// sqlBoardCheckout is S12: the board assigns the issue to @agent and
	// sets it in_progress, taking no lock; refused as L1 would refuse it (a
	// live holder, another assignee, an unexpected status) and when @agent
	// is no active agent of the issue's company (extra false). Dead lock
	// columns are left for the assignee's run to adopt (L3) or the sweeper
	// to clear. Already in_progress and @agent's: no write. One issue.updated.
	sqlBoardCheckout = `WITH ` + oldCTE(`coalesce((SELECT a.status <> 'terminated' FROM agents a
			WHERE a.id = @agent::text AND a.company_id = i.company_id), false)`) + `,
	` + decideCTE(`o.extra
			AND (o.assignee_agent_id IS NULL OR o.assignee_agent_id = @agent::text)
			AND (o.status = ANY(@expected::text[]) OR (o.status = 'in_progress' AND o.assignee_agent_id = @agent::text))
			AND (o.checkout_run_id IS NULL OR o.c_state <> 'live')
			AND (o.execution_run_id IS NULL OR o.e_state <> 'live')
			AND NOT (o.status = 'in_progress' AND o.assignee_agent_id IS NOT DISTINCT FROM @agent::text)`) + `,
	upd AS (
		UPDATE issues i SET
			status = 'in_progress',
			assignee_agent_id = @agent::text,
			started_at = coalesce(i.started_at, now()),
			updated_at = now()
		FROM old o JOIN d ON d.id = o.id
		WHERE ` + sqlCAS + `
		RETURNING ` + qualify("i", issueCols) + `
	),
	act AS (` + sqlActivityInto + `
		SELECT u.company_id, ` + sqlActorCols + `, 'issue.updated', 'issue', u.id,
			jsonb_build_object('changes',
				` + sqlChange("status", "o.status <> u.status", "o.status", "u.status") + ` ||
				` + sqlChange("assigneeAgentId", "o.assignee_agent_id IS DISTINCT FROM u.assignee_agent_id", "o.assignee_agent_id", "u.assignee_agent_id") + `,
				'boardCheckout', true)
		FROM upd u, old o
	)` + sqlLockAnswer

	// sqlRelease is L4: the holding run, a live run of the assignee over a
	// dead holder (adoption, L3), or the board (@board) clears both locks;
	// in_progress becomes todo; the assignee stays unless @unassign. An
	// unlocked issue is not written (the caller answers the no-op). One
	// issue.released {previousCheckoutRunId, previousExecutionRunId, unassigned}.
	sqlRelease = `WITH ` + oldCTE("false") + `,
	` + decideCTE(`(o.checkout_run_id IS NOT NULL OR o.execution_run_id IS NOT NULL)
			AND (@board::boolean OR (`+sqlOwnerOrDeadHolder+`))`) + `,
	upd AS (
		UPDATE issues i SET
			checkout_run_id = NULL,
			execution_run_id = NULL,
			execution_agent_name_key = NULL,
			execution_locked_at = NULL,
			status = CASE WHEN i.status = 'in_progress' THEN 'todo' ELSE i.status END,
			assignee_agent_id = CASE WHEN @unassign::boolean THEN NULL ELSE i.assignee_agent_id END,
			updated_at = now()
		FROM old o JOIN d ON d.id = o.id
		WHERE ` + sqlCAS + `
		RETURNING ` + qualify("i", issueCols) + `
	),
	act AS (` + sqlActivityInto + `
		SELECT u.company_id, ` + sqlActorCols + `, 'issue.released', 'issue', u.id,
			jsonb_build_object('previousCheckoutRunId', o.checkout_run_id, 'previousExecutionRunId', o.execution_run_id,
				'unassigned', @unassign::boolean)
		FROM upd u, old o
	)` + sqlLockAnswer

	// sqlPatch is L5 (owner-only writes) and L6 (leaving in_progress or
	// changing the assignee releases), one conditional UPDATE. While the
	// issue is locked an agent's PATCH must come from the holding run or
	// adopt a dead holder (then it takes both locks over, as L3, and locks
	// its run as a checkout does); the board may write anything. Entering
	// in_progress needs an assignee; a new assignee must be an agent of the
	// issue's company (extra is true when it is not). Activity, in order:
	// issue.released (cause update) when the locks were cleared, or
	// issue.checkout_lock_adopted and issue.checked_out when the caller's run
	// took them over; then issue.updated {changes: {field: {from, to}},
	// locksCleared, ...}; then the comment @comment (if any) and its
	// issue.commented {commentId}. With an Idempotency-Key it records it
	// (CTE rec) when it wrote the issue.
	sqlPatch = `WITH ` + oldCTE(`(@set_assignee::boolean AND @assignee::text IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM agents a WHERE a.id = @assignee::text AND a.company_id = i.company_id))`) + `,
	f AS MATERIALIZED (
		SELECT o.id,
			(o.checkout_run_id IS NOT NULL OR o.execution_run_id IS NOT NULL) AS locked,
			-- L6: the PATCH moves the issue out of in_progress or changes its assignee
			(coalesce(@status::text, o.status) <> 'in_progress'
				OR (@set_assignee::boolean AND @assignee::text IS DISTINCT FROM o.assignee_agent_id)) AS releases,
			-- L5/L3: an agent's run writes over lock columns that are not all its own
			-- (d checks that the others name dead runs): it takes both over
			(NOT @board::boolean AND (o.checkout_run_id IS NOT NULL OR o.execution_run_id IS NOT NULL)
				AND NOT (o.checkout_run_id IS NOT DISTINCT FROM @run::text AND o.execution_run_id IS NOT DISTINCT FROM @run::text)) AS adopts,
			coalesce(` + sqlOwnerOrDeadHolder + `, false) AS owner
		FROM old o
	),
	d AS MATERIALIZED (
		SELECT o.id, coalesce(
			-- L5: the board, an unlocked issue, or the holding run (or a live run of the assignee over a dead holder)
			(@board::boolean OR NOT f.locked OR f.owner)
			-- L5: entering in_progress takes an assignee
			AND NOT (@status::text IS NOT DISTINCT FROM 'in_progress' AND o.status <> 'in_progress'
				AND (CASE WHEN @set_assignee::boolean THEN @assignee::text ELSE o.assignee_agent_id END) IS NULL)
			-- a new assignee is an agent of the issue's company
			AND NOT o.extra, false) AS ok
		FROM old o JOIN f ON f.id = o.id
	),
	lk AS MATERIALIZED (
		SELECT r.id FROM runs r, d, f WHERE d.ok AND f.adopts AND NOT f.releases AND r.id = @run::text AND ` + sqlLive("r") + `
		FOR SHARE OF r
	),
	upd AS (
		UPDATE issues i SET
			title = coalesce(@title::text, i.title),
			description = coalesce(@description::text, i.description),
			priority = coalesce(@priority::text, i.priority),
			priority_rank = coalesce(@priority_rank::integer, i.priority_rank),
			status = coalesce(@status::text, i.status),
			assignee_agent_id = CASE WHEN @set_assignee::boolean THEN @assignee::text ELSE i.assignee_agent_id END,
			started_at = CASE WHEN @status::text = 'in_progress' THEN coalesce(i.started_at, now()) ELSE i.started_at END,
			completed_at = CASE WHEN @status::text = 'done' AND i.status <> 'done' THEN now() ELSE i.completed_at END,
			cancelled_at = CASE WHEN @status::text = 'cancelled' AND i.status <> 'cancelled' THEN now() ELSE i.cancelled_at END,
			-- L6 clears, L5/L3 adoption takes over, otherwise unchanged
			checkout_run_id = CASE WHEN f.releases THEN NULL WHEN f.adopts THEN @run::text ELSE i.checkout_run_id END,
			execution_run_id = CASE WHEN f.releases THEN NULL WHEN f.adopts THEN @run::text ELSE i.execution_run_id END,
			execution_agent_name_key = CASE WHEN f.releases THEN NULL
				WHEN f.adopts THEN (SELECT a.name_key FROM agents a WHERE a.id = @agent::text)
				ELSE i.execution_agent_name_key END,
			execution_locked_at = CASE WHEN f.releases THEN NULL WHEN f.adopts THEN now() ELSE i.execution_locked_at END,
			checkout_epoch = CASE WHEN NOT f.releases AND f.adopts THEN i.checkout_epoch + 1 ELSE i.checkout_epoch END,
			updated_at = now()
		FROM old o JOIN d ON d.id = o.id JOIN f ON f.id = o.id
		WHERE ` + sqlCAS + `
			-- an adoption takes the locks for a run still live (lk)
			AND (NOT f.adopts OR f.releases OR EXISTS (SELECT 1 FROM lk))
		RETURNING ` + qualify("i", issueCols) + `
	),
	com AS (
		INSERT INTO comments (id, company_id, issue_id, body, author_agent_id, author_board, run_id, created_at)
		SELECT @comment_id::text, u.company_id, u.id, @comment::text, nullif(@agent::text, ''), @board::boolean, @actor_run::text, now()
		FROM upd u WHERE @comment::text IS NOT NULL
	), ` + sqlIdempotencyRecordUpdateCTE + `,
	act AS (` + sqlActivityInto + `
		SELECT u.company_id, ` + sqlActorCols + `, a.action, 'issue', u.id, a.details
		FROM upd u JOIN old o ON o.id = u.id JOIN f ON f.id = u.id,
		LATERAL (SELECT f.locked AND u.checkout_run_id IS NULL AND u.execution_run_id IS NULL AS cleared,
			@run::text <> '' AND f.locked
				AND NOT (o.checkout_run_id IS NOT DISTINCT FROM @run::text AND o.execution_run_id IS NOT DISTINCT FROM @run::text)
				AND u.checkout_run_id IS NOT DISTINCT FROM @run::text AS adopted) c,
		LATERAL (VALUES
			(1, 'issue.released', c.cleared,
				jsonb_build_object('previousCheckoutRunId', o.checkout_run_id, 'previousExecutionRunId', o.execution_run_id,
					'unassigned', coalesce(@set_assignee::boolean AND @assignee::text IS NULL, false), 'cause', 'update')),
			(2, 'issue.checkout_lock_adopted', c.adopted AND ` + sqlDisplaced + `, ` + sqlAdoptedDetails + `),
			(3, 'issue.checked_out', c.adopted, ` + sqlCheckedOutDetails + `),
			(4, 'issue.updated', true, jsonb_build_object('changes',
				` + sqlChange("title", "o.title <> u.title", "o.title", "u.title") + ` ||
				` + sqlChange("description", "o.description <> u.description", "left(o.description, 200)", "left(u.description, 200)") + ` ||
				` + sqlChange("status", "o.status <> u.status", "o.status", "u.status") + ` ||
				` + sqlChange("priority", "o.priority <> u.priority", "o.priority", "u.priority") + ` ||
				` + sqlChange("assigneeAgentId", "o.assignee_agent_id IS DISTINCT FROM u.assignee_agent_id", "o.assignee_agent_id", "u.assignee_agent_id") + `)
				|| CASE WHEN c.cleared THEN jsonb_build_object('locksCleared', true,
					'previousCheckoutRunId', o.checkout_run_id, 'previousExecutionRunId', o.execution_run_id) ELSE '{}'::jsonb END),
			(5, 'issue.commented', @comment::text IS NOT NULL, jsonb_build_object('commentId', @comment_id::text))
		) AS a(ord, action, keep, details)
		WHERE a.keep ORDER BY a.ord
	)` + sqlLockAnswer

	// sqlForceRelease is the board's force-release: every lock cleared (and
	// the assignee when @clear_assignee); in_progress becomes todo; one
	// issue.admin_force_release {previousCheckoutRunId,
	// previousExecutionRunId, reason, clearAssignee}.
	sqlForceRelease = `WITH ` + oldCTE("false") + `,
	` + decideCTE("true") + `,
	upd AS (
		UPDATE issues i SET
			checkout_run_id = NULL,
			execution_run_id = NULL,
			execution_agent_name_key = NULL,
			execution_locked_at = NULL,
			status = CASE WHEN i.status = 'in_progress' THEN 'todo' ELSE i.status END,
			assignee_agent_id = CASE WHEN @clear_assignee::boolean THEN NULL ELSE i.assignee_agent_id END,
			updated_at = now()
		FROM old o JOIN d ON d.id = o.id
		WHERE ` + sqlCAS + `
		RETURNING ` + qualify("i", issueCols) + `
	),
	act AS (` + sqlActivityInto + `
		SELECT u.company_id, ` + sqlActorCols + `, 'issue.admin_force_release', 'issue', u.id,
			jsonb_build_object('previousCheckoutRunId', o.checkout_run_id, 'previousExecutionRunId', o.execution_run_id,
				'reason', @reason::text, 'clearAssignee', @clear_assignee::boolean)
		FROM upd u, old o
	)` + sqlLockAnswer
)

var (
	// sqlRunFinish is L6, the end of a run (finish): the run's row, guarded
	// so that a terminal run never changes again; an agent (not @board) may
	// end only its own live run. The UPDATE waits for checkouts holding the
	// run FOR SHARE, so the next statement sees their locks.
	sqlRunFinish = `UPDATE runs r SET
		status = @status::text,
		finished_at = now(),
		exit_code = @exit_code::integer,
		error = @error::text,
		error_code = @error_code::text
	WHERE r.id = @run::text AND r.status IN ('queued', 'running')
		AND (@board::boolean OR (r.agent_id = @agent::text AND r.company_id = @company::text AND ` + sqlLive("r") + `))
	RETURNING ` + runCols

	// sqlReleaseRunLocks is L6: when runs end (@runs, which this
	// transaction has just made terminal), every lock naming them is
	// cleared in one statement scoped by their run ids (both columns,
	// through the partial indexes), one issue.lock_released {runId,
	// runStatus @status} per issue, then one run.finished per run (@finished:
	// a JSON array of {id, company_id, details}), each run's rows together.
	// The issues' status stays: their assignee may adopt them (L1, S08).
	// It runs after the UPDATE of the runs, as a statement of its own, so
	// its snapshot sees every checkout that held those runs FOR SHARE.
	sqlReleaseRunLocks = `WITH lk AS MATERIALIZED (
		SELECT id, CASE WHEN checkout_run_id = ANY(@runs::text[]) THEN checkout_run_id ELSE execution_run_id END AS run_id
		FROM issues WHERE checkout_run_id = ANY(@runs::text[]) OR execution_run_id = ANY(@runs::text[])
		ORDER BY id FOR UPDATE -- in id order, as the sweeper: no deadlock between them
	), rel AS (
		UPDATE issues i SET
			checkout_run_id = CASE WHEN i.checkout_run_id = ANY(@runs::text[]) THEN NULL ELSE i.checkout_run_id END,
			execution_run_id = CASE WHEN i.execution_run_id = ANY(@runs::text[]) THEN NULL ELSE i.execution_run_id END,
			execution_agent_name_key = CASE WHEN i.execution_run_id = ANY(@runs::text[]) THEN NULL ELSE i.execution_agent_name_key END,
			execution_locked_at = CASE WHEN i.execution_run_id = ANY(@runs::text[]) THEN NULL ELSE i.execution_locked_at END,
			updated_at = now()
		FROM lk WHERE i.id = lk.id AND (i.checkout_run_id = ANY(@runs::text[]) OR i.execution_run_id = ANY(@runs::text[]))
		RETURNING i.id, i.company_id, lk.run_id
	), act AS (` + sqlActivityInto + `
		SELECT company_id, ` + sqlActorCols + `, action, entity_type, entity_id, details FROM (
			SELECT rel.run_id, 1 AS ord, rel.id AS entity_id, rel.company_id, 'issue.lock_released' AS action,
				'issue' AS entity_type, jsonb_build_object('runId', rel.run_id, 'runStatus', @status::text) AS details
			FROM rel
			UNION ALL
			SELECT f.id, 2, f.id, f.company_id, 'run.finished', 'run', f.details
			FROM jsonb_to_recordset(@finished::jsonb) AS f(id text, company_id text, details jsonb)
		) x ORDER BY run_id, ord, entity_id
	)
	SELECT count(*) FROM rel`

	// sqlSweepExpiredRuns is sweeper pass 1: running runs whose lease
	// expired become failed (lease_expired), a bounded batch at a time, one
	// run.lost each. Candidates are locked FOR UPDATE in id order: a
	// concurrent sweeper (on any replica) waits for this one's batch, then
	// re-checks each row on its latest version and leaves those failed
	// already; so does a renewal that committed first (the UPDATE re-checks
	// status and lease). When the statement returns, every run that was
	// expired when it started is failed, by it or by a sweeper that
	// committed before it. The id order keeps concurrent sweepers from
	// deadlocking.
	sqlSweepExpiredRuns = `WITH cand AS MATERIALIZED (
		SELECT id FROM runs WHERE status = 'running' AND lease_expires_at <= now()
		ORDER BY id LIMIT @limit::integer
		FOR UPDATE
	), lost AS (
		UPDATE runs r SET
			status = 'failed',
			error_code = 'lease_expired',
			error = coalesce(r.error, 'lease expired: no sign of life before the lease ran out'),
			finished_at = now()
		FROM cand WHERE r.id = cand.id AND r.status = 'running' AND r.lease_expires_at <= now()
		RETURNING r.id, r.company_id, r.agent_id, r.lease_expires_at
	), act AS (` + sqlActivityInto + `
		SELECT company_id, 'system', 'system', NULL, NULL, 'run.lost', 'run', id,
			jsonb_build_object('agentId', agent_id, 'errorCode', 'lease_expired',
				'leaseExpiresAt', to_char(lease_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
		FROM lost ORDER BY id
	)
	SELECT count(*) FROM lost`

	// sqlStaleLockCandidates is sweeper pass 2, first statement: lock a
	// batch of locked issues (through issues_locked) whose every
	// referenced run looked dead, FOR UPDATE in id order: a concurrent
	// sweeper's or lock rule's row is waited for (then re-checked on its
	// latest version), so each issue is cleared once, and when a pass
	// returns no issue that was stale at its start is left locked. The id
	// order (the same as RunFinish's) keeps multi-row lockers from
	// deadlocking. The second statement re-checks the rows.
	sqlStaleLockCandidates = `SELECT i.id FROM issues i
	WHERE (i.checkout_run_id IS NOT NULL OR i.execution_run_id IS NOT NULL)
		AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = i.checkout_run_id AND ` + sqlLive("r") + `)
		AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = i.execution_run_id AND ` + sqlLive("r") + `)
	ORDER BY i.id
	LIMIT @limit::integer
	FOR UPDATE OF i`

	// sqlClearStaleLocks is sweeper pass 2, the write: on the issues this
	// transaction has locked (@ids), read with a snapshot taken after the
	// lock, clear the lock columns of those whose referenced runs are all
	// dead, one issue.stale_lock_cleared {clearedCheckoutRunId,
	// clearedExecutionRunId, why} each (actor system). An issue a checkout
	// took over in between (it names a live run now) is left alone. The
	// status stays: the assignee may adopt the issue (L1).
	sqlClearStaleLocks = `WITH old AS MATERIALIZED (
		SELECT i.id, i.company_id, i.checkout_run_id, i.execution_run_id, ` + sqlLockStates + `
		FROM issues i WHERE i.id = ANY(@ids::text[])
	), upd AS (
		UPDATE issues i SET
			checkout_run_id = NULL,
			execution_run_id = NULL,
			execution_agent_name_key = NULL,
			execution_locked_at = NULL,
			updated_at = now()
		FROM old o
		WHERE i.id = o.id
			AND (o.checkout_run_id IS NOT NULL OR o.execution_run_id IS NOT NULL)
			AND coalesce(o.c_state, '') <> 'live' AND coalesce(o.e_state, '') <> 'live'
		RETURNING o.id, o.company_id, o.checkout_run_id, o.execution_run_id,
			CASE WHEN o.checkout_run_id IS NOT NULL THEN o.c_state ELSE o.e_state END AS why
	), act AS (` + sqlActivityInto + `
		SELECT company_id, 'system', 'system', NULL, NULL, 'issue.stale_lock_cleared', 'issue', id,
			jsonb_build_object('clearedCheckoutRunId', checkout_run_id, 'clearedExecutionRunId', execution_run_id, 'why', why)
		FROM upd ORDER BY id
	)
	SELECT count(*) FROM upd`
)

// sweepBatch bounds the rows one sweeper transaction changes.
const sweepBatch = 500

// lockRow is what a lock rule answers besides the issue: whether it
// changed the issue, and the issue's lock state before it (the columns and
// the states of the runs they name, "live", "lost", "terminal", "missing"
// or nil for an empty column), the caller's run (nil fields when it does
// not exist), the rule's extra boolean and its decision.
type lockRow struct {
	changed                       bool
	issue                         *clasp.Issue // after the statement (as it stands when !changed)
	id, companyID, status         string
	assignee, checkout, execution *string
	checkoutState, executionState *string
	callerAgent, callerCompany    *string
	callerState                   *string
	extra                         bool
	ok                            bool // the rule decided to write (d.ok)
}

func (l *lockRow) locked() bool { return l.checkout != nil || l.execution != nil }

// heldBy reports whether run holds both locks.
func (l *lockRow) heldBy(runID string) bool {
	return runID != "" && deref(l.checkout) == runID && deref(l.execution) == runID
}

// displaced reports whether taking both locks for run displaced another
// run, and why that holder was dead (its checkout lock's reason first), as
// sqlDisplaced and sqlWhy decide in SQL.
func (l *lockRow) displaced(runID string) (why string, ok bool) {
	switch {
	case l.checkout != nil && *l.checkout != runID:
		return deref(l.checkoutState), true
	case l.execution != nil && *l.execution != runID:
		return deref(l.executionState), true
	}
	return "", false
}

// liveOther reports whether a lock column names a live run other than runID.
func (l *lockRow) liveOther(runID string) bool {
	return (l.checkout != nil && *l.checkout != runID && deref(l.checkoutState) == "live") ||
		(l.execution != nil && *l.execution != runID && deref(l.executionState) == "live")
}

// callerProblem explains why the caller's run runID did not qualify: 422
// run_not_found if it does not exist, 403 run_not_owned if it is another
// agent's or another company's, 409 run_not_live if it is terminal or
// lost. nil when the run is live and agentID's.
func (l *lockRow) callerProblem(runID, agentID string) error {
	switch {
	case l.callerState == nil:
		return clasp.Errorf(clasp.CodeRunNotFound, "Run %s does not exist.", runID).WithDetails("runId", runID)
	case *l.callerAgent != agentID:
		return clasp.Errorf(clasp.CodeRunNotOwned, "Run %s belongs to another agent.", runID).WithDetails("runId", runID)
	case *l.callerCompany != l.companyID:
		return clasp.Errorf(clasp.CodeRunNotOwned, "Run %s belongs to another company.", runID).WithDetails("runId", runID)
	case *l.callerState != "live":
		return clasp.Errorf(clasp.CodeRunNotLive, "Run %s is %s: it can no longer act; open a new run.", runID, *l.callerState).
			WithDetails("runId", runID)
	}
	return nil
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// casAttempts bounds how often a lock rule runs again because its row
// changed between its snapshot and its write (or its run ended): each try
// sees a newer state, so under contention the next one usually refuses.
const casAttempts = 50

// lockRule runs a lock rule's statement, retrying it (with a fresh
// snapshot) while it decided to write but found the row changed since its
// snapshot (d.ok and nothing changed), and on deadlock. It returns the
// answer of the last try; pgx.ErrNoRows (404 for the caller) means the
// issue does not exist in scope.
func (s *Store) lockRule(ctx context.Context, stmt string, args namedArgs) (*lockRow, error) {
	for range casAttempts {
		var l *lockRow
		err := s.retry(ctx, func() error {
			var err error
			l, err = scanLockRow(s.pool.QueryRow(ctx, stmt, args))
			return err
		})
		if err != nil || l.changed || !l.ok {
			return l, err
		}
	}
	return nil, fmt.Errorf("the issue kept changing under %d tries", casAttempts)
}

func scanLockRow(row pgx.Row) (*lockRow, error) {
	var (
		l   lockRow
		iss clasp.Issue
	)
	dest := append([]any{&l.changed}, issueDest(&iss)...)
	dest = append(dest, &l.status, &l.assignee, &l.checkout, &l.execution, &l.checkoutState, &l.executionState,
		&l.callerAgent, &l.callerCompany, &l.callerState, &l.extra, &l.ok)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	fixIssue(&iss)
	l.issue, l.id, l.companyID = &iss, iss.ID, iss.CompanyID
	return &l, nil
}

// lockArgs are the arguments every lock rule statement takes: the issue
// reference within the actor's scope, the actor's run and agent, and the
// actor columns of its activity rows.
func lockArgs(ref string, a store.Actor) namedArgs {
	rid, rident := splitRef(ref)
	return actorArgs(namedArgs{"rid": rid, "rident": rident, "company": scope(a), "run": a.RunID, "agent": a.AgentID,
		"board": a.IsBoard()}, a)
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
	args := lockArgs(p.Ref, a)
	args["agent"], args["expected"] = p.AgentID, expected
	if a.IsBoard() {
		l, err := s.lockRule(ctx, sqlBoardCheckout, args)
		if err != nil {
			return nil, s.lockErr(err, "board checkout of issue", p.Ref)
		}
		switch {
		case l.changed:
			return l.issue, nil
		case !l.extra:
			return nil, clasp.Errorf(clasp.CodePreconditionFailed, "agentId %q is not an active agent of the issue's company.", p.AgentID).
				WithDetails("field", "agentId")
		case l.status == string(clasp.IssueInProgress) && deref(l.assignee) == p.AgentID && !l.liveOther(""):
			return l.issue, nil // already so: nothing to write
		}
		return nil, checkoutRefused(l, p.AgentID, "", expected)
	}
	l, err := s.lockRule(ctx, sqlCheckout, args)
	if err != nil {
		return nil, s.lockErr(err, "check out issue", p.Ref)
	}
	if l.changed {
		if why, ok := l.displaced(a.RunID); ok && p.Result != nil { // L3
			p.Result.AdoptedWhy = why
		}
		return l.issue, nil
	}
	if err := l.callerProblem(a.RunID, p.AgentID); err != nil {
		return nil, err
	}
	if l.heldBy(a.RunID) { // L2
		if p.Result != nil {
			p.Result.SameRun = true
		}
		return l.issue, nil
	}
	return nil, checkoutRefused(l, p.AgentID, a.RunID, expected)
}

// lockErr turns a lock rule's failure into the error to return: 404 for an
// issue that does not exist in scope, else the error with context.
func (s *Store) lockErr(err error, what, ref string) error {
	if errors.Is(err, pgx.ErrNoRows) || clasp.ErrorCode(err) == clasp.CodeNotFound {
		return notFound("issue", ref)
	}
	return wrap(err, "%s %s", what, ref)
}

// expectedList validates checkout's expected statuses for @expected.
func expectedList(statuses []clasp.IssueStatus) ([]string, error) {
	if len(statuses) == 0 {
		return nil, clasp.InvalidField("expectedStatuses", "expectedStatuses must list at least one status.")
	}
	out := make([]string, 0, len(statuses))
	for _, st := range statuses {
		if !st.Valid() {
			return nil, clasp.InvalidField("expectedStatuses", "expectedStatuses: %q is not an issue status.", st)
		}
		if st.Closed() {
			return nil, clasp.Errorf(clasp.CodePreconditionFailed,
				"A checkout cannot expect %s: a closed issue is never checked out.", st).WithDetails("field", "expectedStatuses")
		}
		out = append(out, string(st))
	}
	return out, nil
}

// checkoutRefused is the 409 checkout_conflict of a checkout whose UPDATE
// matched no row; its reason is, in this order, assigned_to_other_agent,
// held_by_live_run, status_not_expected.
func checkoutRefused(l *lockRow, agentID, runID string, expected []string) error {
	var reason string
	switch {
	case l.assignee != nil && *l.assignee != agentID:
		reason = clasp.ReasonAssignedToOtherAgent
	case l.liveOther(runID):
		reason = clasp.ReasonHeldByLiveRun
	case !slices.Contains(expected, l.status) && (l.status != string(clasp.IssueInProgress) || deref(l.assignee) != agentID):
		reason = clasp.ReasonStatusNotExpected
	default:
		return fmt.Errorf("check out issue %s: refused for no known reason", l.id)
	}
	return clasp.Errorf(clasp.CodeCheckoutConflict, "Issue %s cannot be checked out: %s.", l.id, strings.ReplaceAll(reason, "_", " ")).
		WithDetails("issueId", l.id, "status", l.status, "assigneeAgentId", orNil(l.assignee),
			"checkoutRunId", orNil(l.checkout), "executionRunId", orNil(l.execution), "reason", reason)
}

// ownershipConflict is the 409 of rules L4/L5 for the issue read as l.
func ownershipConflict(l *lockRow, why string) error {
	return clasp.Errorf(clasp.CodeOwnershipConflict, "Issue %s cannot be changed by this run: %s.", l.id, why).
		WithDetails("issueId", l.id, "status", l.status, "assigneeAgentId", orNil(l.assignee),
			"checkoutRunId", orNil(l.checkout), "executionRunId", orNil(l.execution))
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
	args := lockArgs(p.Ref, a)
	args["unassign"] = p.Unassign
	l, err := s.lockRule(ctx, sqlRelease, args)
	if err != nil {
		return nil, s.lockErr(err, "release issue", p.Ref)
	}
	if l.changed {
		return l.issue, nil
	}
	if !l.locked() {
		if a.IsBoard() || l.assignee == nil || *l.assignee == a.AgentID {
			return l.issue, nil // L4: releasing an unlocked issue is a no-op
		}
		return nil, ownershipConflict(l, "it is assigned to another agent")
	}
	if a.RunID != "" {
		if err := l.callerProblem(a.RunID, a.AgentID); err != nil {
			return nil, err
		}
	}
	return nil, ownershipConflict(l, "another run holds it, or you are not its assignee")
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
	args := lockArgs(p.Ref, p.Actor)
	args["reason"], args["clear_assignee"] = p.Reason, p.ClearAssignee
	l, err := s.lockRule(ctx, sqlForceRelease, args)
	if err != nil {
		return nil, s.lockErr(err, "force-release issue", p.Ref)
	}
	return l.issue, nil
}

// IssueUpdate applies a PATCH under rules L5 and L6 in one conditional
// statement; Comment, when set, is written in the same statement. While
// the issue is locked an agent's PATCH must come from the holding run (or a
// live run of the assignee over a dead holder, which then takes both locks
// over, as L3); moving the issue out of in_progress or changing its
// assignee clears both locks. Errors: 400 invalid_request (bad field), 404
// not_found, 422 precondition_failed (an agent moving it into in_progress;
// the board doing so without an assignee; an assignee that is no agent of
// the company), 409 ownership_conflict, the caller's run problems, 422
// idempotency_key_reused. With p.Idempotency the key is looked up first and
// recorded by the updating statement itself (CTE rec, as the creations do,
// see idempotent): a replay writes nothing and answers the issue as it is
// now; a concurrent duplicate that recorded the key first makes the
// statement fail on the record's primary key, and the call replays.
func (s *Store) IssueUpdate(ctx context.Context, p *store.IssueUpdateParams) (*clasp.Issue, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	a := p.Actor
	args := lockArgs(p.Ref, a)
	args["title"], args["description"], args["comment"] = p.Title, p.Description, p.Comment
	args["comment_id"] = s.newID()
	args["status"], args["priority"], args["priority_rank"] = nil, nil, nil
	if p.Status != nil {
		args["status"] = string(*p.Status)
	}
	if p.Priority != nil {
		args["priority"], args["priority_rank"] = string(*p.Priority), p.Priority.Rank()
	}
	args["set_assignee"], args["assignee"] = p.AssigneeAgentID != nil, nil
	if p.AssigneeAgentID != nil {
		args["assignee"] = nullable(*p.AssigneeAgentID)
	}
	idemArgs(args, p.Idempotency, idemIssueUpdate)
	replay := func(id string) (*clasp.Issue, error) { return s.IssueGet(ctx, "", id) }
	update := func() (*clasp.Issue, error) {
		l, err := s.lockRule(ctx, sqlPatch, args)
		if err != nil {
			return nil, s.lockErr(err, "update issue", p.Ref)
		}
		if l.changed {
			return l.issue, nil
		}
		return nil, patchRefused(l, p)
	}
	out, err := idempotent(ctx, s, p.Idempotency, idemIssueUpdate, replay, update)
	if err != nil && p.Idempotency != nil && !isIdempotencyConflict(err) &&
		clasp.ErrorCode(err) != clasp.CodeIdempotencyKeyReused {
		// Unlike a creation, a PATCH can be refused because of what a
		// concurrent duplicate of it did (e.g. it released the lock): a
		// refusal whose snapshot saw that duplicate committed also sees its
		// record now, and answers the replay instead.
		if id, lerr := s.idempotencyLookup(ctx, p.Idempotency, idemIssueUpdate); lerr == nil && id != "" {
			if iss, rerr := replay(id); rerr == nil {
				p.Idempotency.Replayed = true
				return iss, nil
			}
		}
	}
	return out, err
}

// patchRefused explains a PATCH whose UPDATE matched no row, in the order
// of its WHERE: ownership (L5), entering in_progress without an assignee,
// an assignee outside the company.
func patchRefused(l *lockRow, p *store.IssueUpdateParams) error {
	a := p.Actor
	if !a.IsBoard() && l.locked() {
		if a.RunID == "" {
			return ownershipConflict(l, "it is locked and this request names no run")
		}
		if err := l.callerProblem(a.RunID, a.AgentID); err != nil {
			return err
		}
		owner := (l.checkout == nil || *l.checkout == a.RunID || deref(l.checkoutState) != "live") &&
			(l.execution == nil || *l.execution == a.RunID || deref(l.executionState) != "live") &&
			(deref(l.checkout) == a.RunID || deref(l.execution) == a.RunID || deref(l.assignee) == a.AgentID)
		if !owner {
			return ownershipConflict(l, "another run holds it")
		}
	}
	newAssignee := deref(l.assignee)
	if p.AssigneeAgentID != nil {
		newAssignee = *p.AssigneeAgentID
	}
	if p.Status != nil && *p.Status == clasp.IssueInProgress && l.status != string(clasp.IssueInProgress) && newAssignee == "" {
		return clasp.Errorf(clasp.CodePreconditionFailed, "An issue moves into in_progress only with an assignee.").
			WithDetails("field", "assigneeAgentId")
	}
	if l.extra {
		return clasp.Errorf(clasp.CodePreconditionFailed, "assigneeAgentId %q is not an agent of the issue's company.", *p.AssigneeAgentID).
			WithDetails("field", "assigneeAgentId")
	}
	return fmt.Errorf("update issue %s: refused for no known reason", l.id)
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
	a := p.Actor
	var exitCode *int32
	if p.ExitCode != nil {
		if *p.ExitCode < math.MinInt32 || *p.ExitCode > math.MaxInt32 {
			return nil, clasp.InvalidField("exitCode", "exitCode must be a 32-bit integer.")
		}
		v := int32(*p.ExitCode)
		exitCode = &v
	}
	args := actorArgs(namedArgs{"run": p.RunID, "status": string(p.Status), "exit_code": exitCode, "error": p.Error, "error_code": p.ErrorCode,
		"board": a.Type != clasp.ActorAgent, "agent": a.AgentID, "company": a.CompanyID}, a)
	var out *clasp.Run
	err := s.tx(ctx, func(tx pgx.Tx) error {
		run, err := scanRun(tx.QueryRow(ctx, sqlRunFinish, args))
		if errors.Is(err, pgx.ErrNoRows) {
			return s.runFinishRefused(ctx, tx, p)
		}
		if err != nil {
			return fmt.Errorf("finish run %s: %w", p.RunID, err)
		}
		out = run
		return releaseRunLocks(ctx, tx, a, p.Status, []*clasp.Run{run})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// releaseRunLocks is L6 for runs this transaction has just ended with
// status: one statement clears every lock naming them, one
// issue.lock_released per issue, then one run.finished {status, exitCode,
// error, and errorCode when set} per run.
func releaseRunLocks(ctx context.Context, tx pgx.Tx, a store.Actor, status clasp.RunStatus, runs []*clasp.Run) error {
	type finished struct {
		ID        string         `json:"id"`
		CompanyID string         `json:"company_id"`
		Details   map[string]any `json:"details"`
	}
	ids := make([]string, len(runs))
	fin := make([]finished, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
		fin[i] = finished{r.ID, r.CompanyID, map[string]any{"status": r.Status, "exitCode": r.ExitCode, "error": r.Error}}
		if r.ErrorCode != nil {
			fin[i].Details["errorCode"] = *r.ErrorCode
		}
	}
	finJSON, err := jsonArg(fin)
	if err != nil {
		return err
	}
	args := actorArgs(namedArgs{"runs": ids, "status": string(status), "finished": finJSON}, a)
	var n int64
	if err := tx.QueryRow(ctx, sqlReleaseRunLocks, args).Scan(&n); err != nil {
		return wrap(err, "release locks of runs %v", ids)
	}
	// Issue 4: the wakes deferred behind these runs are promoted in the same
	// transaction (heartbeat.go).
	return promoteBlockedBy(ctx, tx, ids)
}

// runFinishRefused explains a finish whose UPDATE matched no row.
func (s *Store) runFinishRefused(ctx context.Context, tx pgx.Tx, p *store.RunFinishParams) error {
	var owner, company, state string
	err := tx.QueryRow(ctx, `SELECT r.agent_id, r.company_id, `+runState("r")+` FROM runs r WHERE r.id = $1`, p.RunID).
		Scan(&owner, &company, &state)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("read run %s: %w", p.RunID, err)
	}
	if err := store.RunRefusal(p.Actor, p.RunID, err == nil, owner, company, state); err != nil {
		return err
	}
	return fmt.Errorf("finish run %s: refused for no known reason", p.RunID)
}

// SweepExpiredRuns is sweeper pass 1 (SPEC section 5): running runs whose
// lease expired (by the database clock) become failed with errorCode
// lease_expired, sweepBatch per statement, one run.lost row each (actor
// system). It returns how many runs it failed. Safe to run concurrently on
// any number of replicas: each run is failed once.
func (s *Store) SweepExpiredRuns(ctx context.Context) (int, error) {
	total := 0
	for {
		var n int64
		err := s.retry(ctx, func() error {
			return wrap(s.pool.QueryRow(ctx, sqlSweepExpiredRuns, namedArgs{"limit": sweepBatch}).Scan(&n), "sweep expired runs")
		})
		total += int(n)
		if err != nil || n < sweepBatch {
			return total, err
		}
	}
}

// SweepStaleLocks is sweeper pass 2 (SPEC section 5): the locks of issues
// whose referenced runs are all dead (terminal, lost or missing) are
// cleared, with one issue.stale_lock_cleared {clearedCheckoutRunId,
// clearedExecutionRunId, why} each (actor system), at most sweepBatch
// issues per transaction. Each transaction locks its candidates FOR UPDATE
// (in id order, waiting for a concurrent sweeper's batch), then re-checks
// and clears them with a snapshot taken after the lock, so concurrent
// sweepers (on any number of replicas) clear each issue once and never an
// issue a checkout has just taken over (a run opened after the first
// statement's snapshot would look missing to it). It returns
// how many issues it cleared; a second pass clears nothing.
func (s *Store) SweepStaleLocks(ctx context.Context) (int, error) {
	total := 0
	for {
		var locked, cleared int
		err := s.tx(ctx, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, sqlStaleLockCandidates, namedArgs{"limit": sweepBatch})
			if err != nil {
				return fmt.Errorf("find stale locks: %w", err)
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return fmt.Errorf("find stale locks: %w", err)
			}
			locked, cleared = len(ids), 0
			if len(ids) == 0 {
				return nil
			}
			var n int64
			err = tx.QueryRow(ctx, sqlClearStaleLocks, namedArgs{"ids": ids}).Scan(&n)
			cleared = int(n)
			return wrap(err, "clear stale locks")
		})
		total += cleared
		if err != nil || locked < sweepBatch || cleared == 0 {
			return total, err
		}
	}
}
