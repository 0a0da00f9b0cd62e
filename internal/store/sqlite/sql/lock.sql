-- The lock rules L1-L7 and the sweeper's passes (RULES.md), in the order
-- of internal/store/postgres/sql/lock.sql, under the same statement names.
-- Each rule is ONE conditional UPDATE whose WHERE clause is the decision,
-- tagged with the rule it states; its activity rows are written in the
-- same write transaction (BEGIN IMMEDIATE on the single writer
-- connection) by the statement that follows it, named after it
-- (CheckoutActivity, ...): an INSERT ... SELECT that builds the rows with
-- json_object from the issue as written and arguments for the state
-- before it (:old_checkout, :old_execution, ...), and decides in its WHERE
-- which rows there are, as PostgreSQL's statement does in its CTE act.
-- The JSON keys are in the order the details have always had on SQLite.
-- :now is the transaction's time (unix microseconds).
--
-- SQLite's RETURNING yields only new values, but the audit details need
-- the old lock columns. So Checkout, Release and Patch take a fast-path
-- flag (:unlocked_only, :held_only) restricting them to the common case in
-- which the old lock columns are known without reading them (checkout: the
-- issue is unlocked; release and PATCH by an agent: its run holds both
-- locks). Only when that matches nothing does the transaction read the
-- issue's lock state (LockRead) and run the same UPDATE unrestricted; the
-- read fills the audit details and explains a refusal, it never decides.
-- Nothing can change between the statements: the transaction holds the
-- database's write lock from its first statement.
--
-- Checkout, Release and Patch find the issue by one equality on id: the
-- UUID :rid, or the id of the issue whose identifier is :rident (one of
-- the two is '', store.SplitRef). An OR of the two columns would make
-- SQLite collect the matching rowids in a temporary table first and
-- update in a second pass; one index lookup lets it update in one pass.
--
-- A run is live iff it is queued, or running with a lease that has not
-- expired at :now. A holder is dead when its run is terminal, lost
-- (running with an expired lease) or missing.

-- name: LockRead
-- An issue's lock state before a rule's UPDATE, for audit details and the
-- explanation of a refusal (internal/store/lockrules.go): the issue
-- :rid/:rident within :company ('' for any), the states of the runs its
-- lock columns name (live, lost, terminal, missing; NULL for an empty
-- column), the caller's run :run (NULLs when it does not exist), and the
-- rule-specific conditions: owned_by_caller (L3/L4/L5), agent_active (S12:
-- :agent is an active agent of the issue's company), assignee_in_company
-- (PATCH: the new assignee :assignee, when :set_assignee, is an agent of
-- the issue's company).
SELECT i.id, i.company_id, i.status, i.assignee_agent_id, i.checkout_run_id, i.execution_run_id,
	CASE WHEN i.checkout_run_id IS NOT NULL THEN coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS checkout_state,
	CASE WHEN i.execution_run_id IS NOT NULL THEN coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS execution_state,
	c.agent_id AS caller_agent, c.company_id AS caller_company,
	CASE WHEN c.id IS NOT NULL THEN {{run_state c}} END AS caller_state,
	-- L3/L4/L5: the caller's run is live, the agent's and in the issue's company; each lock column
	-- is empty, the run, or names a dead run; and the run holds a lock or the agent is the assignee
	-- adopting a dead holder
	coalesce(c.agent_id = :agent AND c.company_id = i.company_id
		AND ({{run_live c}})
		AND (i.checkout_run_id IS NULL OR i.checkout_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = i.checkout_run_id
			AND ({{run_live r}})))
		AND (i.execution_run_id IS NULL OR i.execution_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = i.execution_run_id
			AND ({{run_live r}})))
		AND (i.checkout_run_id IS :run OR i.execution_run_id IS :run OR i.assignee_agent_id IS :agent), 0) AS owned_by_caller,
	EXISTS (SELECT 1 FROM agents a WHERE a.id = :agent AND a.company_id = i.company_id AND a.status <> 'terminated') AS agent_active,
	(NOT :set_assignee OR :assignee IS NULL
		OR EXISTS (SELECT 1 FROM agents a WHERE a.id = :assignee AND a.company_id = i.company_id)) AS assignee_in_company,
	-- D1/D2: how many blockers are not done
	i.unresolved_blocker_count AS unresolved_blockers,
	-- E3: escalated to a person
	i.escalated_at IS NOT NULL AS escalated
FROM issues i LEFT JOIN runs c ON c.id = :run
WHERE (i.id = :rid OR i.identifier = :rident) AND (:company = '' OR i.company_id = :company)

-- name: CallerRunRead
-- A run's agent, company and state (live, lost or terminal), to explain a
-- refusal; no row when it does not exist.
SELECT r.agent_id, r.company_id,
	{{run_state r}}
FROM runs r WHERE r.id = :run

-- name: Checkout
-- L1 checkout and L3 adoption of a dead holder by run :run of agent
-- :agent, one conditional write. L2: when :run already holds both locks
-- the WHERE matches nothing (no write, no activity, epoch unchanged) and
-- the store answers the row.
UPDATE issues SET
	status = 'in_progress',
	assignee_agent_id = :agent,
	checkout_run_id = :run,
	execution_run_id = :run,
	execution_agent_name_key = (SELECT a.name_key FROM agents a WHERE a.id = :agent),
	execution_locked_at = :now,
	started_at = coalesce(started_at, :now),
	checkout_epoch = checkout_epoch + 1, -- always a new acquisition: L2 is excluded below
	updated_at = :now
WHERE id = coalesce(nullif(:rid, ''), (SELECT i.id FROM issues i WHERE i.identifier = :rident))
	AND (:company = '' OR company_id = :company)
	-- fast path: only an unlocked issue, whose old lock columns need no read
	AND (NOT :unlocked_only OR (checkout_run_id IS NULL AND execution_run_id IS NULL))
	-- L1: the caller's run is live and the agent's, in the issue's company
	AND EXISTS (SELECT 1 FROM runs r WHERE r.id = :run AND r.agent_id = :agent AND r.company_id = issues.company_id
		AND ({{run_live r}}))
	-- L1: the issue is A's or unassigned
	AND (assignee_agent_id IS NULL OR assignee_agent_id = :agent)
	-- L1: its status is expected (:expected is ",s1,s2,"), or it is in_progress and A's
	AND (instr(:expected, ',' || status || ',') > 0 OR (status = 'in_progress' AND assignee_agent_id = :agent))
	-- L1/L3: each lock column is empty, the caller's run, or names a dead run
	AND (checkout_run_id IS NULL OR checkout_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.checkout_run_id
		AND ({{run_live r}})))
	AND (execution_run_id IS NULL OR execution_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.execution_run_id
		AND ({{run_live r}})))
	-- L2: the same run again changes nothing
	AND NOT (checkout_run_id IS :run AND execution_run_id IS :run)
	-- D1: entering in_progress takes every blocker done (an issue in_progress keeps its lock)
	AND (status = 'in_progress' OR unresolved_blocker_count = 0)
	-- E3: no agent takes an escalated issue; a person moves it out of blocked first
	AND escalated_at IS NULL
RETURNING id, company_id, identifier, title, description, status, priority, assignee_agent_id,
	checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
	started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count

-- name: CheckoutActivity
-- L1-L3, the activity rows of a checkout (or a claim) by run :run of agent
-- :agent that has just written issue :id, from the issue as written and
-- its lock columns before (:old_checkout, :old_execution, the states of
-- their runs :checkout_state, :execution_state), as actor :actor_*:
-- issue.checkout_lock_adopted {previousCheckoutRunId,
-- previousExecutionRunId, why} when a dead holder was displaced (L3: a
-- lock column named another run; why is its checkout lock's state first),
-- then issue.checked_out {agentId, runId, checkoutEpoch}.
INSERT INTO activity
	(company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id)
SELECT company_id, :actor_type, :actor_id, :actor_run, action, 'issue', id, details, :now, :actor_request FROM (
	-- L3: a dead holder displaced
	SELECT 1 AS ord, i.id, i.company_id, 'issue.checkout_lock_adopted' AS action,
		json_object('previousCheckoutRunId', :old_checkout, 'previousExecutionRunId', :old_execution,
			'why', coalesce(CASE WHEN :old_checkout IS NOT NULL AND :old_checkout <> :run THEN :checkout_state ELSE :execution_state END, '')) AS details
	FROM issues i WHERE i.id = :id
		AND ((:old_checkout IS NOT NULL AND :old_checkout <> :run) OR (:old_execution IS NOT NULL AND :old_execution <> :run))
	UNION ALL
	-- L1: the checkout, under its new epoch
	SELECT 2, i.id, i.company_id, 'issue.checked_out',
		json_object('agentId', :agent, 'runId', :run, 'checkoutEpoch', i.checkout_epoch)
	FROM issues i WHERE i.id = :id)
ORDER BY ord

-- name: CheckoutWaitersRead
-- L1-L3, the refusals of checkouts that waited for another checkout of the
-- same issue (store.Inflight), read once for all of them: issue
-- :rid/:rident within :company ('' for any), the columns of LockRead that
-- a checkout's refusal reads (the issue's, and the states of the runs its
-- lock columns name), and one row per run of :runs (a JSON array of ids)
-- that exists, with its id, agent, company and state (NULL run columns
-- when none exists). No row when the issue does not exist. It decides
-- nothing: store.WaitersState.CheckoutRefusal refuses from it, and every
-- other answer is the Checkout statement's.
SELECT i.id, i.company_id, i.status, i.assignee_agent_id, i.checkout_run_id, i.execution_run_id,
	CASE WHEN i.checkout_run_id IS NOT NULL THEN coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS checkout_state,
	CASE WHEN i.execution_run_id IS NOT NULL THEN coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS execution_state,
	c.id, c.agent_id, c.company_id,
	CASE WHEN c.id IS NOT NULL THEN {{run_state c}} END AS caller_state
FROM issues i LEFT JOIN runs c ON c.id IN (SELECT value FROM json_each(:runs))
WHERE (i.id = :rid OR i.identifier = :rident) AND (:company = '' OR i.company_id = :company)

-- name: BoardCheckout
-- S12: the board assigns issue :id to :agent and sets it in_progress,
-- taking no lock; refused as L1 would refuse it (a live holder, another
-- assignee, an unexpected status) and when :agent is no active agent of
-- the issue's company. Dead lock columns are left for the assignee's run
-- to adopt (L3) or the sweeper to clear. Already in_progress and :agent's:
-- no write.
UPDATE issues SET
	status = 'in_progress',
	assignee_agent_id = :agent,
	started_at = coalesce(started_at, :now),
	updated_at = :now
WHERE id = :id
	-- S12: the agent is an active agent of the issue's company
	AND EXISTS (SELECT 1 FROM agents a WHERE a.id = :agent AND a.company_id = issues.company_id AND a.status <> 'terminated')
	-- L1: the issue is the agent's or unassigned
	AND (assignee_agent_id IS NULL OR assignee_agent_id = :agent)
	-- L1: its status is expected, or it is in_progress and the agent's
	AND (instr(:expected, ',' || status || ',') > 0 OR (status = 'in_progress' AND assignee_agent_id = :agent))
	-- L1: no lock column names a live run
	AND (checkout_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.checkout_run_id
		AND ({{run_live r}})))
	AND (execution_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.execution_run_id
		AND ({{run_live r}})))
	-- S12: already in_progress and the agent's changes nothing
	AND NOT (status = 'in_progress' AND assignee_agent_id IS :agent)
	-- D1: entering in_progress takes every blocker done
	AND (status = 'in_progress' OR unresolved_blocker_count = 0)
RETURNING id, company_id, identifier, title, description, status, priority, assignee_agent_id,
	checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
	started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count

-- name: BoardCheckoutActivity
-- S12, the activity row of a board checkout for agent :agent that has
-- just written issue :id, from the issue as written and its status and
-- assignee before (:old_status, :old_assignee), as actor :actor_*:
-- issue.updated {boardCheckout: true, changes: {assigneeAgentId, status:
-- {from, to}}}, changes naming the fields it changed.
INSERT INTO activity
	(company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id)
SELECT i.company_id, :actor_type, :actor_id, :actor_run, 'issue.updated', 'issue', i.id,
	json_object('boardCheckout', json('true'), 'changes', json_insert('{}',
		CASE WHEN :old_assignee IS NOT i.assignee_agent_id THEN '$.assigneeAgentId' END,
			json_object('from', :old_assignee, 'to', i.assignee_agent_id),
		CASE WHEN :old_status IS NOT i.status THEN '$.status' END,
			json_object('from', :old_status, 'to', i.status))),
	:now, :actor_request
FROM issues i WHERE i.id = :id

-- name: Release
-- L4: the holding run, a live run of the assignee over a dead holder
-- (adoption, L3), or the board (:board) clears both locks; in_progress
-- becomes todo; the assignee stays unless :unassign. An unlocked issue
-- matches nothing (the store answers the no-op).
UPDATE issues SET
	checkout_run_id = NULL,
	execution_run_id = NULL,
	execution_agent_name_key = NULL,
	execution_locked_at = NULL,
	status = CASE WHEN status = 'in_progress' THEN 'todo' ELSE status END,
	assignee_agent_id = CASE WHEN :unassign THEN NULL ELSE assignee_agent_id END,
	updated_at = :now
WHERE id = coalesce(nullif(:rid, ''), (SELECT i.id FROM issues i WHERE i.identifier = :rident))
	AND (:company = '' OR company_id = :company)
	-- fast path: only an issue whose both locks are the caller's run
	AND (NOT :held_only OR (checkout_run_id IS :run AND execution_run_id IS :run))
	-- L4: the issue is locked
	AND (checkout_run_id IS NOT NULL OR execution_run_id IS NOT NULL)
	-- L4: by the board, or by the owner: the caller's run is live, the agent's and in the
	-- issue's company; each lock column is empty, the run, or names a dead run; and the run
	-- holds a lock or the agent is the assignee adopting a dead holder (L3)
	AND (:board OR (EXISTS (SELECT 1 FROM runs r WHERE r.id = :run AND r.agent_id = :agent AND r.company_id = issues.company_id
			AND ({{run_live r}}))
		AND (checkout_run_id IS NULL OR checkout_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.checkout_run_id
			AND ({{run_live r}})))
		AND (execution_run_id IS NULL OR execution_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.execution_run_id
			AND ({{run_live r}})))
		AND (checkout_run_id IS :run OR execution_run_id IS :run OR assignee_agent_id IS :agent)))
RETURNING id, company_id, identifier, title, description, status, priority, assignee_agent_id,
	checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
	started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count

-- name: ReleaseActivity
-- L4, the activity row of a release that has just written issue :id,
-- whose lock columns were :old_checkout, :old_execution, as actor
-- :actor_*: issue.released {previousCheckoutRunId, previousExecutionRunId,
-- unassigned (:unassign)}.
INSERT INTO activity
	(company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id)
SELECT i.company_id, :actor_type, :actor_id, :actor_run, 'issue.released', 'issue', i.id,
	json_object('previousCheckoutRunId', :old_checkout, 'previousExecutionRunId', :old_execution,
		'unassigned', json(CASE WHEN :unassign THEN 'true' ELSE 'false' END)),
	:now, :actor_request
FROM issues i WHERE i.id = :id

-- name: Patch
-- L5 owner-only write and L6 release on leaving in_progress or changing
-- the assignee, one conditional statement. While the issue is locked an
-- agent's PATCH must come from its owner (the holding run, or a live run
-- of the assignee over a dead holder, which then takes both locks over, as
-- L3); the board may write anything. In the SET, "releases" is
-- (coalesce(:status, status) <> 'in_progress' OR (:set_assignee AND
-- :assignee IS NOT assignee_agent_id)) and "adopts" is (NOT :board AND a
-- lock column is set AND NOT both are :run).
UPDATE issues SET
	title = coalesce(:title, title),
	description = coalesce(:description, description),
	priority = coalesce(:priority, priority),
	priority_rank = coalesce(:priority_rank, priority_rank),
	status = coalesce(:status, status),
	assignee_agent_id = CASE WHEN :set_assignee THEN :assignee ELSE assignee_agent_id END,
	started_at = CASE WHEN :status IS 'in_progress' THEN coalesce(started_at, :now) ELSE started_at END,
	completed_at = CASE WHEN :status IS 'done' AND status <> 'done' THEN :now ELSE completed_at END,
	-- the fencing epoch the work was completed under (gate G2): set by the
	-- statement that moves the issue to done, cleared when it leaves done
	completed_epoch = CASE WHEN :status IS 'done' AND status <> 'done' THEN checkout_epoch
		WHEN coalesce(:status, status) <> 'done' THEN NULL ELSE completed_epoch END,
	cancelled_at = CASE WHEN :status IS 'cancelled' AND status <> 'cancelled' THEN :now ELSE cancelled_at END,
	-- L6 (releases) clears, L5/L3 adoption (adopts) takes over, otherwise unchanged
	checkout_run_id = CASE
		WHEN (coalesce(:status, status) <> 'in_progress' OR (:set_assignee AND :assignee IS NOT assignee_agent_id)) THEN NULL
		WHEN (NOT :board AND (checkout_run_id IS NOT NULL OR execution_run_id IS NOT NULL)
			AND NOT (checkout_run_id IS :run AND execution_run_id IS :run)) THEN :run
		ELSE checkout_run_id END,
	execution_run_id = CASE
		WHEN (coalesce(:status, status) <> 'in_progress' OR (:set_assignee AND :assignee IS NOT assignee_agent_id)) THEN NULL
		WHEN (NOT :board AND (checkout_run_id IS NOT NULL OR execution_run_id IS NOT NULL)
			AND NOT (checkout_run_id IS :run AND execution_run_id IS :run)) THEN :run
		ELSE execution_run_id END,
	execution_agent_name_key = CASE
		WHEN (coalesce(:status, status) <> 'in_progress' OR (:set_assignee AND :assignee IS NOT assignee_agent_id)) THEN NULL
		WHEN (NOT :board AND (checkout_run_id IS NOT NULL OR execution_run_id IS NOT NULL)
			AND NOT (checkout_run_id IS :run AND execution_run_id IS :run)) THEN (SELECT a.name_key FROM agents a WHERE a.id = :agent)
		ELSE execution_agent_name_key END,
	execution_locked_at = CASE
		WHEN (coalesce(:status, status) <> 'in_progress' OR (:set_assignee AND :assignee IS NOT assignee_agent_id)) THEN NULL
		WHEN (NOT :board AND (checkout_run_id IS NOT NULL OR execution_run_id IS NOT NULL)
			AND NOT (checkout_run_id IS :run AND execution_run_id IS :run)) THEN :now
		ELSE execution_locked_at END,
	checkout_epoch = CASE
		WHEN NOT (coalesce(:status, status) <> 'in_progress' OR (:set_assignee AND :assignee IS NOT assignee_agent_id))
			AND (NOT :board AND (checkout_run_id IS NOT NULL OR execution_run_id IS NOT NULL)
				AND NOT (checkout_run_id IS :run AND execution_run_id IS :run)) THEN checkout_epoch + 1
		ELSE checkout_epoch END,
	updated_at = :now
WHERE id = coalesce(nullif(:rid, ''), (SELECT i.id FROM issues i WHERE i.identifier = :rident))
	AND (:company = '' OR company_id = :company)
	-- fast path: only an issue whose both locks are the caller's run
	AND (NOT :held_only OR (checkout_run_id IS :run AND execution_run_id IS :run))
	-- E4: only a person moves an escalated issue out of blocked
	AND (:board OR escalated_at IS NULL OR coalesce(:status, status) = 'blocked')
	-- L5: the board, an unlocked issue, or the owner
	AND (:board OR (checkout_run_id IS NULL AND execution_run_id IS NULL)
		OR (EXISTS (SELECT 1 FROM runs r WHERE r.id = :run AND r.agent_id = :agent AND r.company_id = issues.company_id
				AND ({{run_live r}}))
			AND (checkout_run_id IS NULL OR checkout_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.checkout_run_id
				AND ({{run_live r}})))
			AND (execution_run_id IS NULL OR execution_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.execution_run_id
				AND ({{run_live r}})))
			AND (checkout_run_id IS :run OR execution_run_id IS :run OR assignee_agent_id IS :agent)))
	-- L5: entering in_progress takes an assignee
	AND NOT (:status IS 'in_progress' AND status <> 'in_progress'
		AND (CASE WHEN :set_assignee THEN :assignee ELSE assignee_agent_id END) IS NULL)
	-- L5: a new assignee is an agent of the issue's company
	AND (NOT :set_assignee OR :assignee IS NULL
		OR EXISTS (SELECT 1 FROM agents a WHERE a.id = :assignee AND a.company_id = issues.company_id))
	-- D1/D2: entering in_progress or done takes every blocker done
	AND NOT (coalesce(:status IN ('in_progress', 'done') AND :status <> status, 0) AND unresolved_blocker_count > 0)
RETURNING id, company_id, identifier, title, description, status, priority, assignee_agent_id,
	checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
	started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count

-- name: PatchActivity
-- L5/L6/L7, the activity rows of a PATCH that has just written issue :id,
-- from the issue as written, its audited fields before (:old_title,
-- :old_description, :old_status, :old_priority, :old_assignee: IssueAudit)
-- and its lock columns before (:old_checkout, :old_execution, the states
-- of their runs :checkout_state, :execution_state), for caller run :run
-- ('' for none) of agent :agent, the PATCH setting the assignee to
-- :assignee when :set_assignee; as actor :actor_*. In order: when the
-- PATCH cleared the locks (L6: the issue was locked and is no longer),
-- issue.released {previousCheckoutRunId, previousExecutionRunId,
-- unassigned, cause: "update"}; or, when the caller's run took over locks
-- that were not both its own (L5/L3 adoption), issue.checkout_lock_adopted
-- {previousCheckoutRunId, previousExecutionRunId, why} if it displaced
-- another run, then issue.checked_out {agentId, runId, checkoutEpoch};
-- then issue.updated {changes: {field: {from, to}} for each audited field
-- that changed (descriptions cut to 200 characters), and locksCleared,
-- previousCheckoutRunId, previousExecutionRunId when it cleared the locks}.
WITH c AS (
	SELECT i.id, i.company_id, i.checkout_epoch, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
		-- L6: the issue was locked and the PATCH cleared both lock columns
		(:old_checkout IS NOT NULL OR :old_execution IS NOT NULL)
			AND i.checkout_run_id IS NULL AND i.execution_run_id IS NULL AS cleared,
		-- L5/L3: the caller's run now holds the locks, which were set but not both its own
		:run <> '' AND (:old_checkout IS NOT NULL OR :old_execution IS NOT NULL)
			AND NOT (:old_checkout IS :run AND :old_execution IS :run) AND i.checkout_run_id IS :run AS adopted
	FROM issues i WHERE i.id = :id)
INSERT INTO activity
	(company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id)
SELECT company_id, :actor_type, :actor_id, :actor_run, action, 'issue', id, details, :now, :actor_request FROM (
	SELECT 1 AS ord, c.id, c.company_id, 'issue.released' AS action,
		json_object('previousCheckoutRunId', :old_checkout, 'previousExecutionRunId', :old_execution,
			'unassigned', json(CASE WHEN :set_assignee AND :assignee IS NULL THEN 'true' ELSE 'false' END),
			'cause', 'update') AS details
	FROM c WHERE c.cleared
	UNION ALL
	-- L3: a dead holder displaced; why is its checkout lock's state first
	SELECT 2, c.id, c.company_id, 'issue.checkout_lock_adopted',
		json_object('previousCheckoutRunId', :old_checkout, 'previousExecutionRunId', :old_execution,
			'why', coalesce(CASE WHEN :old_checkout IS NOT NULL AND :old_checkout <> :run THEN :checkout_state ELSE :execution_state END, ''))
	FROM c WHERE c.adopted
		AND ((:old_checkout IS NOT NULL AND :old_checkout <> :run) OR (:old_execution IS NOT NULL AND :old_execution <> :run))
	UNION ALL
	SELECT 3, c.id, c.company_id, 'issue.checked_out',
		json_object('agentId', :agent, 'runId', :run, 'checkoutEpoch', c.checkout_epoch)
	FROM c WHERE c.adopted
	UNION ALL
	SELECT 4, c.id, c.company_id, 'issue.updated',
		json_insert(json_object('changes', json_insert('{}',
				CASE WHEN :old_assignee IS NOT c.assignee_agent_id THEN '$.assigneeAgentId' END,
					json_object('from', :old_assignee, 'to', c.assignee_agent_id),
				CASE WHEN :old_description <> c.description THEN '$.description' END,
					json_object('from', substr(:old_description, 1, 200), 'to', substr(c.description, 1, 200)),
				CASE WHEN :old_priority <> c.priority THEN '$.priority' END,
					json_object('from', :old_priority, 'to', c.priority),
				CASE WHEN :old_status <> c.status THEN '$.status' END,
					json_object('from', :old_status, 'to', c.status),
				CASE WHEN :old_title <> c.title THEN '$.title' END,
					json_object('from', :old_title, 'to', c.title))),
			CASE WHEN c.cleared THEN '$.locksCleared' END, json('true'),
			CASE WHEN c.cleared THEN '$.previousCheckoutRunId' END, :old_checkout,
			CASE WHEN c.cleared THEN '$.previousExecutionRunId' END, :old_execution)
	FROM c)
ORDER BY ord

-- name: IssueAudit
-- The audited fields of an issue, read before a PATCH for the changes of
-- its issue.updated (PatchActivity).
SELECT title, description, status, priority, assignee_agent_id FROM issues
WHERE (id = :rid OR identifier = :rident) AND (:company = '' OR company_id = :company)

-- name: ForceRelease
-- The board's force-release of issue :id: every lock cleared (and the
-- assignee when :clear_assignee); in_progress becomes todo.
UPDATE issues SET
	checkout_run_id = NULL,
	execution_run_id = NULL,
	execution_agent_name_key = NULL,
	execution_locked_at = NULL,
	status = CASE WHEN status = 'in_progress' THEN 'todo' ELSE status END,
	assignee_agent_id = CASE WHEN :clear_assignee THEN NULL ELSE assignee_agent_id END,
	updated_at = :now
WHERE id = :id
RETURNING id, company_id, identifier, title, description, status, priority, assignee_agent_id,
	checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
	started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count

-- name: ForceReleaseActivity
-- The activity row of the board's force-release that has just written
-- issue :id, whose lock columns were :old_checkout, :old_execution, as
-- actor :actor_*: issue.admin_force_release {previousCheckoutRunId,
-- previousExecutionRunId, reason (:reason), clearAssignee
-- (:clear_assignee)}.
INSERT INTO activity
	(company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id)
SELECT i.company_id, :actor_type, :actor_id, :actor_run, 'issue.admin_force_release', 'issue', i.id,
	json_object('previousCheckoutRunId', :old_checkout, 'previousExecutionRunId', :old_execution,
		'reason', :reason, 'clearAssignee', json(CASE WHEN :clear_assignee THEN 'true' ELSE 'false' END)),
	:now, :actor_request
FROM issues i WHERE i.id = :id

-- name: RunFinish
-- L6, the end of a run (finish): the run's row, guarded so that a terminal
-- run never changes again. An agent may end only its own live run.
UPDATE runs SET
	status = :status,
	finished_at = :now,
	exit_code = :exit_code,
	error = :error,
	error_code = :error_code
WHERE id = :run AND status IN ('queued', 'running')
	-- L6: the board, or the run's own agent while the run is live
	AND (:board OR (agent_id = :agent AND company_id = :company
		AND ({{run_live -}})))
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at

-- name: ReleaseRunLocks
-- L6: when run :run ends, every lock naming it is cleared in one statement
-- scoped by its run id. L7 (the CHECK of issues) makes a row whose
-- checkout_run_id is :run carry :run in execution_run_id as well, so the
-- rows of either column are those of execution_run_id = :run, one lookup
-- of the partial index issues_execution_run. The issue's status stays:
-- its assignee may adopt it (L1).
UPDATE issues SET
	checkout_run_id = CASE WHEN checkout_run_id = :run THEN NULL ELSE checkout_run_id END,
	execution_run_id = CASE WHEN execution_run_id = :run THEN NULL ELSE execution_run_id END,
	execution_agent_name_key = CASE WHEN execution_run_id = :run THEN NULL ELSE execution_agent_name_key END,
	execution_locked_at = CASE WHEN execution_run_id = :run THEN NULL ELSE execution_locked_at END,
	updated_at = :now
WHERE execution_run_id = :run
RETURNING id

-- name: LockReleasedActivity
-- L6, the activity rows of ReleaseRunLocks for run :run, which has just
-- ended with status :run_status: one issue.lock_released {runId,
-- runStatus} per issue it released (:issues, the JSON array of their
-- ids), in issue id order, as actor :actor_*.
INSERT INTO activity
	(company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id)
SELECT i.company_id, :actor_type, :actor_id, :actor_run, 'issue.lock_released', 'issue', i.id,
	json_object('runId', :run, 'runStatus', :run_status), :now, :actor_request
FROM issues i WHERE i.id IN (SELECT value FROM json_each(:issues))
ORDER BY i.id

-- name: RunFinishedActivity
-- L6, the activity row of the end of run :run, from its row as ended, as
-- actor :actor_*: run.finished {error, errorCode (only when set),
-- exitCode, status}.
INSERT INTO activity
	(company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id)
SELECT r.company_id, :actor_type, :actor_id, :actor_run, 'run.finished', 'run', r.id,
	json_insert(json_object('error', r.error),
		CASE WHEN r.error_code IS NOT NULL THEN '$.errorCode' END, r.error_code,
		'$.exitCode', r.exit_code,
		'$.status', r.status),
	:now, :actor_request
FROM runs r WHERE r.id = :run

-- name: SweepExpiredRuns
-- Sweeper pass 1: running runs whose lease expired become failed
-- (lease_expired), a bounded batch (:limit) at a time. The outer WHERE
-- re-checks status and lease, so a renewal that commits first wins.
UPDATE runs SET
	status = 'failed',
	error_code = 'lease_expired',
	error = coalesce(error, 'lease expired: no sign of life before the lease ran out'),
	finished_at = :now
WHERE id IN (SELECT id FROM runs WHERE status = 'running' AND lease_expires_at <= :now
		ORDER BY lease_expires_at LIMIT :limit)
	AND status = 'running' AND lease_expires_at <= :now
RETURNING id, company_id, agent_id, lease_expires_at

-- name: StaleLockCandidates
-- Sweeper pass 2, candidates: locked issues (through the partial index
-- issues_execution_run: by L7 a row with a checkout lock holds the same
-- run in execution_run_id) whose every referenced run is dead, with the
-- states of those runs: first the issues with both locks, then those with
-- the execution lock alone. Read on a reader connection; ClearStaleLocks
-- decides.
SELECT id, company_id, checkout_run_id, execution_run_id, c_state, e_state FROM (
	SELECT i.id, i.company_id, i.checkout_run_id, i.execution_run_id,
		coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.checkout_run_id), 'missing') AS c_state,
		CASE WHEN i.execution_run_id IS NOT NULL THEN
			coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state
	FROM issues i INDEXED BY issues_execution_run WHERE i.execution_run_id IS NOT NULL AND i.checkout_run_id IS NOT NULL
	UNION ALL -- the execution lock alone (the branches are disjoint)
	SELECT i.id, i.company_id, NULL, i.execution_run_id, NULL,
		coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.execution_run_id), 'missing')
	FROM issues i INDEXED BY issues_execution_run WHERE i.execution_run_id IS NOT NULL AND i.checkout_run_id IS NULL)
WHERE coalesce(c_state, '') <> 'live' AND coalesce(e_state, '') <> 'live'
LIMIT :limit

-- name: ClearStaleLocks
-- Sweeper pass 2, the write: clear issue :id's locks, compare-and-set on
-- the old lock values with deadness re-checked in the same statement, so a
-- concurrent sweeper or a checkout that landed first makes it match
-- nothing. It never touches an issue with a live referenced run. The
-- status stays (the assignee may adopt, L1).
UPDATE issues SET
	checkout_run_id = NULL,
	execution_run_id = NULL,
	execution_agent_name_key = NULL,
	execution_locked_at = NULL,
	updated_at = :now
WHERE id = :id
	AND checkout_run_id IS :old_checkout AND execution_run_id IS :old_execution
	-- sweeper: the issue is locked, and no lock column names a live run
	AND (checkout_run_id IS NOT NULL OR execution_run_id IS NOT NULL)
	AND (checkout_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.checkout_run_id
		AND ({{run_live r}})))
	AND (execution_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.execution_run_id
		AND ({{run_live r}})))

-- name: StaleLockActivity
-- Sweeper pass 2, the activity row of ClearStaleLocks having cleared issue
-- :id, whose lock columns were :old_checkout, :old_execution (the states
-- of their runs :checkout_state, :execution_state), as actor :actor_*
-- (the system): issue.stale_lock_cleared {clearedCheckoutRunId,
-- clearedExecutionRunId, why}, why the state of the checkout lock's run
-- (of the execution lock's when there was no checkout lock).
INSERT INTO activity
	(company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id)
SELECT i.company_id, :actor_type, :actor_id, :actor_run, 'issue.stale_lock_cleared', 'issue', i.id,
	json_object('clearedCheckoutRunId', :old_checkout, 'clearedExecutionRunId', :old_execution,
		'why', coalesce(CASE WHEN :old_checkout IS NOT NULL THEN :checkout_state ELSE :execution_state END, '')),
	:now, :actor_request
FROM issues i WHERE i.id = :id
