-- The lock rules L1-L7 and the sweeper's passes (RULES.md), in the order
-- of internal/store/sqlite/sql/lock.sql, under the same statement names.
--
-- Each lock rule is ONE conditional statement, run on its own (its own
-- implicit transaction, one round trip):
--   - CTE old reads the issue's row, the states of the runs its lock
--     columns name (c_state, e_state: live, lost, terminal, missing; NULL
--     for an empty column) and the caller's run @run, all from the
--     statement's snapshot: one consistent moment, in which a dead run stays
--     dead.
--   - CTE d decides on old alone (d.ok): the rule's conditions, tagged with
--     the rule they state. (Checkout and Release decide in old itself,
--     column ok over its inner read: see Checkout.)
--   - When d.ok and the rule takes a lock for the caller's run, CTE lk locks
--     that run FOR SHARE and re-checks on its latest row that it is still
--     live: a concurrent finish of the run then either waits for this
--     statement (and clears the new lock, L6) or makes it write nothing
--     (answer column run_ended), so a lock never outlives its run. lk is
--     the only lock taken before the issue's, always in that order
--     (RunFinish locks the run, then its issues): no deadlock.
--   - CTE upd writes the issue only if d.ok and the row is still the version
--     old read (compare-and-set on xmin; the row is fetched by the ctid old
--     read, a TID scan instead of a second index look-up: a newer version
--     fails the xmin check on its re-check); otherwise the store runs the
--     statement again on a fresh snapshot (store.RunLockRule, at most
--     store.LockTries times). So the decision and the audit details are
--     always those of the row written.
--   - CTE act writes the rule's activity rows from what upd returned.
--   - The answer (the same columns for every rule): changed, the issue after
--     the statement (as it stands when nothing changed), the old lock state
--     (old_status, old_assignee, old_checkout, old_execution,
--     checkout_state, execution_state), the caller's run (caller_agent,
--     caller_company, caller_state), the rule-specific conditions
--     owned_by_caller, agent_active, assignee_in_company (NULL where the
--     rule asks none of them), ok (d.ok) and run_ended (d.ok, but lk found
--     the caller's run no longer live, so nothing was written; false where
--     the rule takes no lock for the caller's run), and escalated (E3:
--     the issue is escalated; false where the rule does not ask, all but
--     Checkout). store.Outcome reads
--     the try's outcome from changed, ok and run_ended;
--     internal/store/lockrules.go explains a refusal from these columns
--     without a second read.
--
-- CTE old finds the issue by primary key alone: the company condition is
-- i.company_id IS NOT DISTINCT FROM @company (the column is NOT NULL: the
-- same as =), which PostgreSQL never makes an index condition. Written
-- as i.company_id = @company, a company whose issues came in bulk
-- after the last ANALYZE looked nearly empty to the planner, which then
-- walked the company's whole range of issues_company_status_created for
-- the one issue (26,000 buffers, 1.9 s at 1,000,000 issues). IssueGet and
-- the comment statements look issues up the same way.
--
-- A refusal writes nothing and locks nothing. A run is live iff it is
-- queued, or running with a lease that has not expired at now(), the
-- database's clock at the start of the transaction.

-- name: Checkout
-- Issue @rid (its id). CheckoutByIdentifier, for an issue named by its
-- identifier (@rident, PREFIX-N), is this statement with the look-up line
-- of old (WHERE i.id = @rid::text AND ...) by identifier instead
-- (postgres.go, byIdentifier): the store runs the one that fits the
-- reference, so each finds the issue with one index look-up and no other.
-- L1 checkout with L3 adoption of a dead holder by run @run of agent
-- @agent, with its activity rows (issue.checkout_lock_adopted when a dead
-- holder is displaced, then issue.checked_out). L2: when @run already
-- holds both locks, ok is false (no write, no activity, epoch unchanged)
-- and the answer is the row as it stands.
--
-- Like Release, and unlike the other rules, it decides in old itself (ok,
-- computed over old's inner read, which OFFSET 0 keeps from being merged
-- into it) instead of a CTE d joined to old by every later part, and
-- answers from old with the columns upd wrote taken from upd (old LEFT
-- JOIN upd: upd's row when it wrote, old's otherwise) instead of a UNION
-- ALL of upd's whole row and old's: the same answer, from a plan with
-- fewer nodes, which PostgreSQL builds anew on every execution. For the
-- same reason upd also returns what act needs of old, so that act reads
-- upd alone; lk takes the run's ctid from a sub-select instead of a join;
-- the activity rows need no sort (see act);
-- and the issue is found by its id @rid alone (CheckoutByIdentifier finds
-- it by its identifier).
--
-- As in the other rules, lk locks the caller's run FOR SHARE before upd
-- writes the issue, and re-checks on the run's latest row that it is still
-- live; upd writes only when lk found it so. This guards one interleaving:
-- the checkout's snapshot sees its run live, then a finish of that run
-- (RunFinish, then ReleaseRunLocks in the same transaction) commits before
-- the checkout writes. ReleaseRunLocks clears the locks of issues whose
-- committed row names the run, and this issue's does not name it yet, so
-- a checkout that wrote anyway would leave a lock naming an ended run (L6:
-- a lock never outlives its run). With lk, either the checkout locks the
-- run first and the finish waits for it (and then clears the new lock),
-- or the finish commits first, lk is empty, nothing is written and the
-- answer says run_ended: the store runs the statement again, and the next
-- snapshot sees the run ended and refuses (409 run_not_live). A checkout
-- that loses the issue to a concurrent one holds its run's lock while it
-- waits in upd for the winner, then finds the row changed and writes
-- nothing (PostgreSQL has by then locked the row's newest version for it
-- anyway, so that lock of its own run adds a lock record, not a commit).
WITH old AS MATERIALIZED (
	SELECT s.*, coalesce(
		-- L1: the caller's run is live and the agent's, in the issue's company
		s.caller_state = 'live' AND s.caller_agent = @agent::text AND s.caller_company = s.company_id
		-- L1: the issue is A's or unassigned
		AND (s.assignee_agent_id IS NULL OR s.assignee_agent_id = @agent::text)
		-- L1: its status is expected, or it is in_progress and A's
		AND (s.status = ANY(@expected::text[]) OR (s.status = 'in_progress' AND s.assignee_agent_id = @agent::text))
		-- L1/L3: each lock column is empty, the caller's run, or names a dead run
		AND (s.checkout_run_id IS NULL OR s.checkout_run_id = @run::text OR s.c_state <> 'live')
		AND (s.execution_run_id IS NULL OR s.execution_run_id = @run::text OR s.e_state <> 'live')
		-- L2: the same run again changes nothing
		AND NOT (s.checkout_run_id IS NOT DISTINCT FROM @run::text AND s.execution_run_id IS NOT DISTINCT FROM @run::text)
		-- D1: entering in_progress takes every blocker done (an issue in_progress keeps its lock)
		AND (s.status = 'in_progress' OR s.unresolved_blocker_count = 0)
		-- E3: no agent takes an escalated issue; a person moves it out of blocked first
		AND s.escalated_at IS NULL,
		false) AS ok
	FROM (SELECT i.id, i.company_id, i.identifier, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
		i.checkout_run_id, i.checkout_epoch, i.execution_run_id, i.execution_agent_name_key, i.execution_locked_at,
		i.started_at, i.completed_at, i.cancelled_at, i.created_at, i.updated_at, i.parent_id, i.unresolved_blocker_count, i.completed_epoch, i.relation_count, i.escalated_at, i.xmin AS ver, i.ctid AS tid,
		-- a lock column naming the caller's run takes its state from c, the row
		-- already read: no second look-up of that run
		CASE WHEN i.checkout_run_id IS NULL THEN NULL WHEN i.checkout_run_id = c.id THEN {{run_state c}} ELSE coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS c_state,
		CASE WHEN i.execution_run_id IS NULL THEN NULL WHEN i.execution_run_id = c.id THEN {{run_state c}} ELSE coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state,
		c.agent_id AS caller_agent, c.company_id AS caller_company, c.ctid AS caller_tid,
		CASE WHEN c.id IS NOT NULL THEN {{run_state c}} END AS caller_state
	FROM issues i LEFT JOIN runs c ON c.id = @run::text
	WHERE i.id = @rid::text AND (@company::text = '' OR i.company_id IS NOT DISTINCT FROM @company::text)
	OFFSET 0) s
),
lk AS MATERIALIZED (
	-- the caller's run fetched by the ctid old read (caller_tid), no index
	-- look-up; FOR SHARE of a version updated since (a renewal, or a finish
	-- that committed meanwhile) re-checks the latest version
	SELECT r.id FROM runs r
	WHERE r.ctid = (SELECT o.caller_tid FROM old o WHERE o.ok) AND r.id = @run::text
		AND ({{run_live r}})
	FOR SHARE OF r
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
		checkout_epoch = i.checkout_epoch + 1, -- always a new acquisition: L2 is excluded by ok
		updated_at = now()
	FROM old o
	WHERE i.ctid = o.tid AND i.id = o.id AND i.xmin = o.ver AND o.ok AND EXISTS (SELECT 1 FROM lk)
	-- the columns it wrote (and company_id), and what act reads of old: it
	-- reads upd alone; the answer takes the rest from old
	RETURNING i.id, i.company_id, i.status, i.assignee_agent_id, i.checkout_run_id, i.checkout_epoch, i.execution_run_id,
		i.execution_agent_name_key, i.execution_locked_at, i.started_at, i.updated_at,
		o.checkout_run_id AS old_checkout, o.execution_run_id AS old_execution, o.c_state, o.e_state
),
act AS (
	-- the rows in the order of the VALUES list: its scan returns them in
	-- that order, and its LATERAL reference to upd keeps it the inner side
	-- of a nested loop over upd's one row, so the activity ids follow it
	-- with no sort
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT u.company_id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, a.action, 'issue', u.id, a.details
	FROM upd u, LATERAL (VALUES
		-- L3: a dead holder displaced; why is its checkout lock's reason first
		('issue.checkout_lock_adopted',
			(u.old_checkout IS NOT NULL AND u.old_checkout <> @run::text) OR (u.old_execution IS NOT NULL AND u.old_execution <> @run::text),
			jsonb_build_object('previousCheckoutRunId', u.old_checkout, 'previousExecutionRunId', u.old_execution,
				'why', CASE WHEN u.old_checkout IS NOT NULL AND u.old_checkout <> @run::text THEN u.c_state ELSE u.e_state END)),
		('issue.checked_out', true, jsonb_build_object('agentId', @agent::text, 'runId', @run::text, 'checkoutEpoch', u.checkout_epoch))
	) AS a(action, keep, details)
	WHERE a.keep
)
SELECT u.id IS NOT NULL AS changed, o.id, o.company_id, o.identifier, o.title, o.description,
	CASE WHEN u.id IS NULL THEN o.status ELSE u.status END, o.priority,
	CASE WHEN u.id IS NULL THEN o.assignee_agent_id ELSE u.assignee_agent_id END,
	CASE WHEN u.id IS NULL THEN o.checkout_run_id ELSE u.checkout_run_id END,
	CASE WHEN u.id IS NULL THEN o.checkout_epoch ELSE u.checkout_epoch END,
	CASE WHEN u.id IS NULL THEN o.execution_run_id ELSE u.execution_run_id END,
	CASE WHEN u.id IS NULL THEN o.execution_agent_name_key ELSE u.execution_agent_name_key END,
	CASE WHEN u.id IS NULL THEN o.execution_locked_at ELSE u.execution_locked_at END,
	CASE WHEN u.id IS NULL THEN o.started_at ELSE u.started_at END,
	o.completed_at, o.cancelled_at, o.created_at,
	CASE WHEN u.id IS NULL THEN o.updated_at ELSE u.updated_at END,
	o.parent_id, o.unresolved_blocker_count, o.completed_epoch, o.relation_count,
	o.status AS old_status, o.assignee_agent_id AS old_assignee,
	o.checkout_run_id AS old_checkout, o.execution_run_id AS old_execution, o.c_state AS checkout_state, o.e_state AS execution_state,
	o.caller_agent, o.caller_company, o.caller_state,
	NULL::boolean AS owned_by_caller, NULL::boolean AS agent_active, NULL::boolean AS assignee_in_company, o.ok,
	-- ok, but lk found the run no longer live: nothing was written
	o.ok AND u.id IS NULL AND NOT EXISTS (SELECT 1 FROM lk) AS run_ended,
	o.escalated_at IS NOT NULL AS escalated
FROM old o LEFT JOIN upd u ON true

-- name: CheckoutWaitersRead
-- L1-L3, the refusals of checkouts that waited for another checkout of the
-- same issue (store.Inflight), read once for all of them, from one
-- snapshot: issue @rid/@rident within @company ('' for any), the columns
-- of Checkout's CTE old that a checkout's refusal reads (the issue's, and
-- the states of the runs its lock columns name), and one row per run of
-- @runs that exists, with its id, agent, company and state (NULL run
-- columns when none exists). No row when the issue does not exist. It
-- decides nothing and locks nothing: store.WaitersState.CheckoutRefusal
-- refuses from it, and every other answer is the Checkout statement's.
WITH i AS MATERIALIZED (
	SELECT i.id, i.company_id, i.status, i.assignee_agent_id, i.checkout_run_id, i.execution_run_id,
		CASE WHEN i.checkout_run_id IS NOT NULL THEN coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS c_state,
		CASE WHEN i.execution_run_id IS NOT NULL THEN coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state
	FROM issues i
	WHERE i.id = coalesce(nullif(@rid::text, ''), (SELECT ref.id FROM issues ref WHERE ref.identifier = @rident::text)) AND (@company::text = '' OR i.company_id IS NOT DISTINCT FROM @company::text)
)
SELECT i.id, i.company_id, i.status, i.assignee_agent_id, i.checkout_run_id, i.execution_run_id, i.c_state, i.e_state,
	c.id, c.agent_id, c.company_id,
	CASE WHEN c.id IS NOT NULL THEN {{run_state c}} END
FROM i LEFT JOIN runs c ON c.id = ANY(@runs::text[])

-- name: BoardCheckout
-- S12: the board assigns the issue to @agent and sets it in_progress,
-- taking no lock; refused as L1 would refuse it (a live holder, another
-- assignee, an unexpected status) and when @agent is no active agent of
-- the issue's company (agent_active false). Dead lock columns are left for
-- the assignee's run to adopt (L3) or the sweeper to clear. Already
-- in_progress and @agent's: no write. One issue.updated.
WITH old AS MATERIALIZED (
	SELECT i.id, i.company_id, i.identifier, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
		i.checkout_run_id, i.checkout_epoch, i.execution_run_id, i.execution_agent_name_key, i.execution_locked_at,
		i.started_at, i.completed_at, i.cancelled_at, i.created_at, i.updated_at, i.parent_id, i.unresolved_blocker_count, i.completed_epoch, i.relation_count, i.xmin AS ver, i.ctid AS tid,
		-- a lock column naming the caller's run takes its state from c, the row
		-- already read: no second look-up of that run
		CASE WHEN i.checkout_run_id IS NULL THEN NULL WHEN i.checkout_run_id = c.id THEN {{run_state c}} ELSE coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS c_state,
		CASE WHEN i.execution_run_id IS NULL THEN NULL WHEN i.execution_run_id = c.id THEN {{run_state c}} ELSE coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state,
		c.agent_id AS caller_agent, c.company_id AS caller_company,
		CASE WHEN c.id IS NOT NULL THEN {{run_state c}} END AS caller_state,
		coalesce((SELECT a.status <> 'terminated' FROM agents a WHERE a.id = @agent::text AND a.company_id = i.company_id), false) AS agent_active
	FROM issues i LEFT JOIN runs c ON c.id = @run::text
	WHERE i.id = coalesce(nullif(@rid::text, ''), (SELECT ref.id FROM issues ref WHERE ref.identifier = @rident::text)) AND (@company::text = '' OR i.company_id IS NOT DISTINCT FROM @company::text)
),
d AS MATERIALIZED (
	SELECT o.id, coalesce(
		-- S12: the agent is an active agent of the issue's company
		o.agent_active
		-- L1: the issue is the agent's or unassigned
		AND (o.assignee_agent_id IS NULL OR o.assignee_agent_id = @agent::text)
		-- L1: its status is expected, or it is in_progress and the agent's
		AND (o.status = ANY(@expected::text[]) OR (o.status = 'in_progress' AND o.assignee_agent_id = @agent::text))
		-- L1: no lock column names a live run
		AND (o.checkout_run_id IS NULL OR o.c_state <> 'live')
		AND (o.execution_run_id IS NULL OR o.e_state <> 'live')
		-- S12: already in_progress and the agent's changes nothing
		AND NOT (o.status = 'in_progress' AND o.assignee_agent_id IS NOT DISTINCT FROM @agent::text)
		-- D1: entering in_progress takes every blocker done
		AND (o.status = 'in_progress' OR o.unresolved_blocker_count = 0),
		false) AS ok
	FROM old o
),
upd AS (
	UPDATE issues i SET
		status = 'in_progress',
		assignee_agent_id = @agent::text,
		started_at = coalesce(i.started_at, now()),
		updated_at = now()
	FROM old o JOIN d ON d.id = o.id
	WHERE i.ctid = o.tid AND i.id = o.id AND i.xmin = o.ver AND d.ok
	RETURNING i.id, i.company_id, i.identifier, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
		i.checkout_run_id, i.checkout_epoch, i.execution_run_id, i.execution_agent_name_key, i.execution_locked_at,
		i.started_at, i.completed_at, i.cancelled_at, i.created_at, i.updated_at, i.parent_id, i.unresolved_blocker_count, i.completed_epoch, i.relation_count
),
act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT u.company_id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, 'issue.updated', 'issue', u.id,
		jsonb_build_object('changes',
			CASE WHEN o.status <> u.status
				THEN jsonb_build_object('status', jsonb_build_object('from', o.status, 'to', u.status)) ELSE '{}'::jsonb END
			|| CASE WHEN o.assignee_agent_id IS DISTINCT FROM u.assignee_agent_id
				THEN jsonb_build_object('assigneeAgentId', jsonb_build_object('from', o.assignee_agent_id, 'to', u.assignee_agent_id)) ELSE '{}'::jsonb END,
			'boardCheckout', true)
	FROM upd u, old o
)
SELECT x.*, o.status AS old_status, o.assignee_agent_id AS old_assignee,
	o.checkout_run_id AS old_checkout, o.execution_run_id AS old_execution, o.c_state AS checkout_state, o.e_state AS execution_state,
	o.caller_agent, o.caller_company, o.caller_state,
	NULL::boolean AS owned_by_caller, o.agent_active, NULL::boolean AS assignee_in_company, d.ok, false AS run_ended,
	false AS escalated
FROM old o JOIN d ON d.id = o.id CROSS JOIN LATERAL (
	SELECT true AS changed, u.* FROM upd u
	UNION ALL
	SELECT false, o.id, o.company_id, o.identifier, o.title, o.description, o.status, o.priority, o.assignee_agent_id,
		o.checkout_run_id, o.checkout_epoch, o.execution_run_id, o.execution_agent_name_key, o.execution_locked_at,
		o.started_at, o.completed_at, o.cancelled_at, o.created_at, o.updated_at, o.parent_id, o.unresolved_blocker_count, o.completed_epoch, o.relation_count
	WHERE NOT EXISTS (SELECT 1 FROM upd)
) x

-- name: Release
-- Issue @rid (its id); ReleaseByIdentifier is derived from it as
-- CheckoutByIdentifier is from Checkout.
-- L4: the holding run, a live run of the assignee over a dead holder
-- (adoption, L3), or the board (@board) clears both locks; in_progress
-- becomes todo; the assignee stays unless @unassign. An unlocked issue is
-- not written (the store answers the no-op). One issue.released
-- {previousCheckoutRunId, previousExecutionRunId, unassigned}. It decides
-- in old and answers from old LEFT JOIN upd, as Checkout does; act reads
-- upd alone; the issue is found by its id @rid (ReleaseByIdentifier: by
-- its identifier).
WITH old AS MATERIALIZED (
	SELECT s.*, coalesce(
		-- L4: the issue is locked
		(s.checkout_run_id IS NOT NULL OR s.execution_run_id IS NOT NULL)
		-- L4: by the board, or by the owner: the caller's run is live, the agent's and in the
		-- issue's company; each lock column is empty, the run, or names a dead run; and the run
		-- holds a lock or the agent is the assignee adopting a dead holder (L3)
		AND (@board::boolean OR (s.caller_state = 'live' AND s.caller_agent = @agent::text AND s.caller_company = s.company_id
			AND (s.checkout_run_id IS NULL OR s.checkout_run_id = @run::text OR s.c_state <> 'live')
			AND (s.execution_run_id IS NULL OR s.execution_run_id = @run::text OR s.e_state <> 'live')
			AND (s.checkout_run_id = @run::text OR s.execution_run_id = @run::text OR s.assignee_agent_id = @agent::text))),
		false) AS ok
	FROM (SELECT i.id, i.company_id, i.identifier, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
		i.checkout_run_id, i.checkout_epoch, i.execution_run_id, i.execution_agent_name_key, i.execution_locked_at,
		i.started_at, i.completed_at, i.cancelled_at, i.created_at, i.updated_at, i.parent_id, i.unresolved_blocker_count, i.completed_epoch, i.relation_count, i.xmin AS ver, i.ctid AS tid,
		-- a lock column naming the caller's run takes its state from c, the row
		-- already read: no second look-up of that run
		CASE WHEN i.checkout_run_id IS NULL THEN NULL WHEN i.checkout_run_id = c.id THEN {{run_state c}} ELSE coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS c_state,
		CASE WHEN i.execution_run_id IS NULL THEN NULL WHEN i.execution_run_id = c.id THEN {{run_state c}} ELSE coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state,
		c.agent_id AS caller_agent, c.company_id AS caller_company,
		CASE WHEN c.id IS NOT NULL THEN {{run_state c}} END AS caller_state
	FROM issues i LEFT JOIN runs c ON c.id = @run::text
	WHERE i.id = @rid::text AND (@company::text = '' OR i.company_id IS NOT DISTINCT FROM @company::text)
	OFFSET 0) s
),
upd AS (
	UPDATE issues i SET
		checkout_run_id = NULL,
		execution_run_id = NULL,
		execution_agent_name_key = NULL,
		execution_locked_at = NULL,
		status = CASE WHEN i.status = 'in_progress' THEN 'todo' ELSE i.status END,
		assignee_agent_id = CASE WHEN @unassign::boolean THEN NULL ELSE i.assignee_agent_id END,
		updated_at = now()
	FROM old o
	WHERE i.ctid = o.tid AND i.id = o.id AND i.xmin = o.ver AND o.ok
	-- the columns it wrote (and company_id), and the old lock columns act
	-- reads: act reads upd alone; the answer takes the rest from old
	RETURNING i.id, i.company_id, i.status, i.assignee_agent_id, i.checkout_run_id, i.execution_run_id,
		i.execution_agent_name_key, i.execution_locked_at, i.updated_at,
		o.checkout_run_id AS old_checkout, o.execution_run_id AS old_execution
),
act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT u.company_id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, 'issue.released', 'issue', u.id,
		jsonb_build_object('previousCheckoutRunId', u.old_checkout, 'previousExecutionRunId', u.old_execution,
			'unassigned', @unassign::boolean)
	FROM upd u
)
SELECT u.id IS NOT NULL AS changed, o.id, o.company_id, o.identifier, o.title, o.description,
	CASE WHEN u.id IS NULL THEN o.status ELSE u.status END, o.priority,
	CASE WHEN u.id IS NULL THEN o.assignee_agent_id ELSE u.assignee_agent_id END,
	CASE WHEN u.id IS NULL THEN o.checkout_run_id ELSE u.checkout_run_id END,
	o.checkout_epoch,
	CASE WHEN u.id IS NULL THEN o.execution_run_id ELSE u.execution_run_id END,
	CASE WHEN u.id IS NULL THEN o.execution_agent_name_key ELSE u.execution_agent_name_key END,
	CASE WHEN u.id IS NULL THEN o.execution_locked_at ELSE u.execution_locked_at END,
	o.started_at, o.completed_at, o.cancelled_at, o.created_at,
	CASE WHEN u.id IS NULL THEN o.updated_at ELSE u.updated_at END,
	o.parent_id, o.unresolved_blocker_count, o.completed_epoch, o.relation_count,
	o.status AS old_status, o.assignee_agent_id AS old_assignee,
	o.checkout_run_id AS old_checkout, o.execution_run_id AS old_execution, o.c_state AS checkout_state, o.e_state AS execution_state,
	o.caller_agent, o.caller_company, o.caller_state,
	NULL::boolean AS owned_by_caller, NULL::boolean AS agent_active, NULL::boolean AS assignee_in_company, o.ok,
	false AS run_ended,
	false AS escalated
FROM old o LEFT JOIN upd u ON true

-- name: Patch
-- L5 (owner-only writes) and L6 (leaving in_progress or changing the
-- assignee releases), one conditional UPDATE. While the issue is locked an
-- agent's PATCH must come from its owner (owned_by_caller: the holding run,
-- or a live run of the assignee over a dead holder, which then takes both
-- locks over, as L3, and locks its run as a checkout does); the board may
-- write anything. Entering in_progress needs an assignee; a new assignee
-- must be an agent of the issue's company (assignee_in_company). Activity,
-- in order: issue.released (cause update) when the locks were cleared, or
-- issue.checkout_lock_adopted and issue.checked_out when the caller's run
-- took them over; then issue.updated {changes: {field: {from, to}},
-- locksCleared, ...}; then the comment @comment (if any) and its
-- issue.commented {commentId}. With an Idempotency-Key (@idem_key) it
-- records it (CTE rec) when it wrote the issue. Issue @rid (its id);
-- PatchByIdentifier is derived from it as CheckoutByIdentifier is from
-- Checkout. PatchPlain, for a PATCH with neither comment nor
-- Idempotency-Key, is this text without the regions marked
-- "-- [comment or Idempotency-Key" (CTEs com and rec, the
-- issue.commented row), and PatchPlainByIdentifier its look-up by
-- identifier: their plans hold no insert into comments or
-- idempotency_keys, which every execution would set up.
WITH old AS MATERIALIZED (
	SELECT i.id, i.company_id, i.identifier, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
		i.checkout_run_id, i.checkout_epoch, i.execution_run_id, i.execution_agent_name_key, i.execution_locked_at,
		i.started_at, i.completed_at, i.cancelled_at, i.created_at, i.updated_at, i.parent_id, i.unresolved_blocker_count, i.completed_epoch, i.relation_count, i.escalated_at, i.xmin AS ver, i.ctid AS tid,
		-- a lock column naming the caller's run takes its state from c, the row
		-- already read: no second look-up of that run
		CASE WHEN i.checkout_run_id IS NULL THEN NULL WHEN i.checkout_run_id = c.id THEN {{run_state c}} ELSE coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS c_state,
		CASE WHEN i.execution_run_id IS NULL THEN NULL WHEN i.execution_run_id = c.id THEN {{run_state c}} ELSE coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state,
		c.agent_id AS caller_agent, c.company_id AS caller_company,
		CASE WHEN c.id IS NOT NULL THEN {{run_state c}} END AS caller_state,
		(NOT @set_assignee::boolean OR @assignee::text IS NULL
			OR EXISTS (SELECT 1 FROM agents a WHERE a.id = @assignee::text AND a.company_id = i.company_id)) AS assignee_in_company
	FROM issues i LEFT JOIN runs c ON c.id = @run::text
	WHERE i.id = @rid::text AND (@company::text = '' OR i.company_id IS NOT DISTINCT FROM @company::text)
),
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
		-- L5: the owner: the caller's run is live, the agent's and in the issue's company; each lock
		-- column is empty, the run, or names a dead run; and the run holds a lock or the agent is
		-- the assignee adopting a dead holder (L3)
		coalesce(o.caller_state = 'live' AND o.caller_agent = @agent::text AND o.caller_company = o.company_id
			AND (o.checkout_run_id IS NULL OR o.checkout_run_id = @run::text OR o.c_state <> 'live')
			AND (o.execution_run_id IS NULL OR o.execution_run_id = @run::text OR o.e_state <> 'live')
			AND (o.checkout_run_id = @run::text OR o.execution_run_id = @run::text OR o.assignee_agent_id = @agent::text),
			false) AS owned_by_caller
	FROM old o
),
d AS MATERIALIZED (
	SELECT o.id, coalesce(
		-- L5: the board, an unlocked issue, or the owner
		(@board::boolean OR NOT f.locked OR f.owned_by_caller)
		-- L5: entering in_progress takes an assignee
		AND NOT (@status::text IS NOT DISTINCT FROM 'in_progress' AND o.status <> 'in_progress'
			AND (CASE WHEN @set_assignee::boolean THEN @assignee::text ELSE o.assignee_agent_id END) IS NULL)
		-- L5: a new assignee is an agent of the issue's company
		AND o.assignee_in_company
		-- D1/D2: entering in_progress or done takes every blocker done
		AND NOT coalesce(@status::text IN ('in_progress', 'done') AND @status::text <> o.status AND o.unresolved_blocker_count > 0, false)
		-- E4: only a person moves an escalated issue out of blocked
		AND (@board::boolean OR o.escalated_at IS NULL OR coalesce(@status::text, o.status) = 'blocked'),
		false) AS ok
	FROM old o JOIN f ON f.id = o.id
),
lk AS MATERIALIZED (
	SELECT r.id FROM runs r, d, f
	WHERE d.ok AND f.adopts AND NOT f.releases
		AND r.id = @run::text AND ({{run_live r}})
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
		-- the fencing epoch the work was completed under (gate G2): set by the
		-- statement that moves the issue to done, cleared when it leaves done
		completed_epoch = CASE WHEN @status::text = 'done' AND i.status <> 'done' THEN i.checkout_epoch
			WHEN coalesce(@status::text, i.status) <> 'done' THEN NULL ELSE i.completed_epoch END,
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
	WHERE i.ctid = o.tid AND i.id = o.id AND i.xmin = o.ver AND d.ok
		-- L5/L3: an adoption takes the locks for a run still live (lk)
		AND (NOT f.adopts OR f.releases OR EXISTS (SELECT 1 FROM lk))
	RETURNING i.id, i.company_id, i.identifier, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
		i.checkout_run_id, i.checkout_epoch, i.execution_run_id, i.execution_agent_name_key, i.execution_locked_at,
		i.started_at, i.completed_at, i.cancelled_at, i.created_at, i.updated_at, i.parent_id, i.unresolved_blocker_count, i.completed_epoch, i.relation_count
),
-- [comment or Idempotency-Key
com AS (
	INSERT INTO comments (id, company_id, issue_id, body, author_agent_id, author_board, run_id, created_at)
	SELECT @comment_id::text, u.company_id, u.id, @comment::text, nullif(@agent::text, ''), @board::boolean, @actor_run::text, now()
	FROM upd u WHERE @comment::text IS NOT NULL
),
rec AS (
	-- the Idempotency-Key's record names the issue upd wrote; nothing when it wrote nothing
	INSERT INTO idempotency_keys (actor_id, key, request_hash, resource_type, resource_id, created_at)
	SELECT @idem_actor::text, @idem_key::text, @idem_hash::text, @idem_type::text, upd.id, now()
	FROM upd WHERE @idem_key::text IS NOT NULL
),
-- ]
act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT u.company_id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, a.action, 'issue', u.id, a.details
	FROM upd u JOIN old o ON o.id = u.id JOIN f ON f.id = u.id,
	LATERAL (SELECT f.locked AND u.checkout_run_id IS NULL AND u.execution_run_id IS NULL AS cleared,
		@run::text <> '' AND f.locked
			AND NOT (o.checkout_run_id IS NOT DISTINCT FROM @run::text AND o.execution_run_id IS NOT DISTINCT FROM @run::text)
			AND u.checkout_run_id IS NOT DISTINCT FROM @run::text AS adopted) c,
	LATERAL (VALUES
		(1, 'issue.released', c.cleared,
			jsonb_build_object('previousCheckoutRunId', o.checkout_run_id, 'previousExecutionRunId', o.execution_run_id,
				'unassigned', coalesce(@set_assignee::boolean AND @assignee::text IS NULL, false), 'cause', 'update')),
		(2, 'issue.checkout_lock_adopted',
			c.adopted AND ((o.checkout_run_id IS NOT NULL AND o.checkout_run_id <> @run::text)
				OR (o.execution_run_id IS NOT NULL AND o.execution_run_id <> @run::text)),
			jsonb_build_object('previousCheckoutRunId', o.checkout_run_id, 'previousExecutionRunId', o.execution_run_id,
				'why', CASE WHEN o.checkout_run_id IS NOT NULL AND o.checkout_run_id <> @run::text THEN o.c_state ELSE o.e_state END)),
		(3, 'issue.checked_out', c.adopted, jsonb_build_object('agentId', @agent::text, 'runId', @run::text, 'checkoutEpoch', u.checkout_epoch)),
		(4, 'issue.updated', true, jsonb_build_object('changes',
			CASE WHEN o.title <> u.title
				THEN jsonb_build_object('title', jsonb_build_object('from', o.title, 'to', u.title)) ELSE '{}'::jsonb END
			|| CASE WHEN o.description <> u.description
				THEN jsonb_build_object('description', jsonb_build_object('from', left(o.description, 200), 'to', left(u.description, 200))) ELSE '{}'::jsonb END
			|| CASE WHEN o.status <> u.status
				THEN jsonb_build_object('status', jsonb_build_object('from', o.status, 'to', u.status)) ELSE '{}'::jsonb END
			|| CASE WHEN o.priority <> u.priority
				THEN jsonb_build_object('priority', jsonb_build_object('from', o.priority, 'to', u.priority)) ELSE '{}'::jsonb END
			|| CASE WHEN o.assignee_agent_id IS DISTINCT FROM u.assignee_agent_id
				THEN jsonb_build_object('assigneeAgentId', jsonb_build_object('from', o.assignee_agent_id, 'to', u.assignee_agent_id)) ELSE '{}'::jsonb END)
			|| CASE WHEN c.cleared THEN jsonb_build_object('locksCleared', true,
				'previousCheckoutRunId', o.checkout_run_id, 'previousExecutionRunId', o.execution_run_id) ELSE '{}'::jsonb END)
		-- [comment or Idempotency-Key
		, (5, 'issue.commented', @comment::text IS NOT NULL, jsonb_build_object('commentId', @comment_id::text))
		-- ]
	) AS a(ord, action, keep, details)
	WHERE a.keep ORDER BY a.ord
)
SELECT x.*, o.status AS old_status, o.assignee_agent_id AS old_assignee,
	o.checkout_run_id AS old_checkout, o.execution_run_id AS old_execution, o.c_state AS checkout_state, o.e_state AS execution_state,
	o.caller_agent, o.caller_company, o.caller_state,
	f.owned_by_caller, NULL::boolean AS agent_active, o.assignee_in_company, d.ok,
	-- ok, an adoption, but lk found the run no longer live: nothing was written
	NOT x.changed AND d.ok AND f.adopts AND NOT f.releases AND NOT EXISTS (SELECT 1 FROM lk) AS run_ended,
	o.escalated_at IS NOT NULL AS escalated
FROM old o JOIN d ON d.id = o.id JOIN f ON f.id = o.id CROSS JOIN LATERAL (
	SELECT true AS changed, u.* FROM upd u
	UNION ALL
	SELECT false, o.id, o.company_id, o.identifier, o.title, o.description, o.status, o.priority, o.assignee_agent_id,
		o.checkout_run_id, o.checkout_epoch, o.execution_run_id, o.execution_agent_name_key, o.execution_locked_at,
		o.started_at, o.completed_at, o.cancelled_at, o.created_at, o.updated_at, o.parent_id, o.unresolved_blocker_count, o.completed_epoch, o.relation_count
	WHERE NOT EXISTS (SELECT 1 FROM upd)
) x

-- name: ForceRelease
-- The board's force-release: every lock cleared (and the assignee when
-- @clear_assignee); in_progress becomes todo; one
-- issue.admin_force_release {previousCheckoutRunId,
-- previousExecutionRunId, reason, clearAssignee}.
WITH old AS MATERIALIZED (
	SELECT i.id, i.company_id, i.identifier, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
		i.checkout_run_id, i.checkout_epoch, i.execution_run_id, i.execution_agent_name_key, i.execution_locked_at,
		i.started_at, i.completed_at, i.cancelled_at, i.created_at, i.updated_at, i.parent_id, i.unresolved_blocker_count, i.completed_epoch, i.relation_count, i.xmin AS ver, i.ctid AS tid
	FROM issues i
	WHERE i.id = coalesce(nullif(@rid::text, ''), (SELECT ref.id FROM issues ref WHERE ref.identifier = @rident::text)) AND (@company::text = '' OR i.company_id IS NOT DISTINCT FROM @company::text)
),
upd AS (
	UPDATE issues i SET
		checkout_run_id = NULL,
		execution_run_id = NULL,
		execution_agent_name_key = NULL,
		execution_locked_at = NULL,
		status = CASE WHEN i.status = 'in_progress' THEN 'todo' ELSE i.status END,
		assignee_agent_id = CASE WHEN @clear_assignee::boolean THEN NULL ELSE i.assignee_agent_id END,
		updated_at = now()
	FROM old o
	WHERE i.ctid = o.tid AND i.id = o.id AND i.xmin = o.ver
	RETURNING i.id, i.company_id, i.identifier, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
		i.checkout_run_id, i.checkout_epoch, i.execution_run_id, i.execution_agent_name_key, i.execution_locked_at,
		i.started_at, i.completed_at, i.cancelled_at, i.created_at, i.updated_at, i.parent_id, i.unresolved_blocker_count, i.completed_epoch, i.relation_count
),
act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT u.company_id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, 'issue.admin_force_release', 'issue', u.id,
		jsonb_build_object('previousCheckoutRunId', o.checkout_run_id, 'previousExecutionRunId', o.execution_run_id,
			'reason', @reason::text, 'clearAssignee', @clear_assignee::boolean)
	FROM upd u, old o
)
SELECT x.*, o.status AS old_status, o.assignee_agent_id AS old_assignee,
	o.checkout_run_id AS old_checkout, o.execution_run_id AS old_execution, NULL::text AS checkout_state, NULL::text AS execution_state,
	NULL::text AS caller_agent, NULL::text AS caller_company, NULL::text AS caller_state,
	NULL::boolean AS owned_by_caller, NULL::boolean AS agent_active, NULL::boolean AS assignee_in_company, true AS ok,
	false AS run_ended,
	false AS escalated
FROM old o CROSS JOIN LATERAL (
	SELECT true AS changed, u.* FROM upd u
	UNION ALL
	SELECT false, o.id, o.company_id, o.identifier, o.title, o.description, o.status, o.priority, o.assignee_agent_id,
		o.checkout_run_id, o.checkout_epoch, o.execution_run_id, o.execution_agent_name_key, o.execution_locked_at,
		o.started_at, o.completed_at, o.cancelled_at, o.created_at, o.updated_at, o.parent_id, o.unresolved_blocker_count, o.completed_epoch, o.relation_count
	WHERE NOT EXISTS (SELECT 1 FROM upd)
) x

-- name: CallerRunRead
-- A run's agent, company and state (live, lost or terminal), to explain a
-- refusal; no row when it does not exist.
SELECT r.agent_id, r.company_id,
	{{run_state r}}
FROM runs r WHERE r.id = @run::text

-- name: RunFinish
-- L6, the end of a run (finish): the run's row, guarded so that a terminal
-- run never changes again; an agent (not @board) may end only its own live
-- run. The UPDATE waits for checkouts holding the run FOR SHARE, so the
-- next statement (ReleaseRunLocks) sees their locks.
UPDATE runs r SET
	status = @status::text,
	finished_at = now(),
	exit_code = @exit_code::integer,
	error = @error::text,
	error_code = @error_code::text
WHERE r.id = @run::text AND r.status IN ('queued', 'running')
	-- L6: the board, or the run's own agent while the run is live
	AND (@board::boolean OR (r.agent_id = @agent::text AND r.company_id = @company::text
		AND ({{run_live r}})))
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at

-- name: ReleaseRunLocks
-- L6: when runs end (@runs, which this transaction has just made terminal),
-- every lock naming them is cleared in one statement scoped by their run
-- ids (both columns, through the partial indexes), one issue.lock_released
-- {runId, runStatus @status} per issue, then, when @finished, one
-- run.finished {status, exitCode, error, and errorCode when set} per run,
-- from the run's row as ended, each run's rows together. The issues' status stays: their assignee may adopt them (L1).
-- It runs after the UPDATE of the runs, as a statement of its own, so its
-- snapshot sees every checkout that held those runs FOR SHARE.
WITH lk AS MATERIALIZED (
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
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT company_id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, action, entity_type, entity_id, details FROM (
		SELECT rel.run_id, 1 AS ord, rel.id AS entity_id, rel.company_id, 'issue.lock_released' AS action,
			'issue' AS entity_type, jsonb_build_object('runId', rel.run_id, 'runStatus', @status::text) AS details
		FROM rel
		UNION ALL
		SELECT r.id, 2, r.id, r.company_id, 'run.finished', 'run',
			jsonb_build_object('status', r.status, 'exitCode', r.exit_code, 'error', r.error)
			|| CASE WHEN r.error_code IS NOT NULL THEN jsonb_build_object('errorCode', r.error_code) ELSE '{}'::jsonb END
		FROM runs r WHERE r.id = ANY(@runs::text[]) AND @finished::boolean
	) x ORDER BY run_id, ord, entity_id
)
SELECT count(*) FROM rel

-- name: SweepExpiredRuns
-- Sweeper pass 1: running runs whose lease expired become failed
-- (lease_expired), a bounded batch at a time, one run.lost each.
-- Candidates are locked FOR UPDATE in id order: a concurrent sweeper (on
-- any replica) waits for this one's batch, then re-checks each row on its
-- latest version and leaves those failed already; so does a renewal that
-- committed first (the UPDATE re-checks status and lease). When the
-- statement returns, every run that was expired when it started is failed,
-- by it or by a sweeper that committed before it. The id order keeps
-- concurrent sweepers from deadlocking.
WITH cand AS MATERIALIZED (
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
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT company_id, 'system', 'system', NULL, NULL, 'run.lost', 'run', id,
		jsonb_build_object('agentId', agent_id, 'errorCode', 'lease_expired',
			'leaseExpiresAt', to_char(lease_expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
	FROM lost ORDER BY id
)
SELECT count(*) FROM lost

-- name: StaleLockCandidates
-- Sweeper pass 2, first statement: lock a batch of locked issues whose
-- every referenced run looked dead, FOR UPDATE in id order: a concurrent
-- sweeper's or lock rule's row is waited for (then re-checked on its latest
-- version), so each issue is cleared once, and when a pass returns no issue
-- that was stale at its start is left locked. The id order (the same as
-- ReleaseRunLocks') keeps multi-row lockers from deadlocking.
-- ClearStaleLocks re-checks the rows.
SELECT i.id FROM issues i
WHERE (i.checkout_run_id IS NOT NULL OR i.execution_run_id IS NOT NULL)
	AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = i.checkout_run_id
		AND ({{run_live r}}))
	AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = i.execution_run_id
		AND ({{run_live r}}))
ORDER BY i.id
LIMIT @limit::integer
FOR UPDATE OF i

-- name: ClearStaleLocks
-- Sweeper pass 2, the write: on the issues this transaction has locked
-- (@ids), read with a snapshot taken after the lock, clear the lock columns
-- of those whose referenced runs are all dead, one issue.stale_lock_cleared
-- {clearedCheckoutRunId, clearedExecutionRunId, why} each (actor system).
-- An issue a checkout took over in between (it names a live run now) is
-- left alone. The status stays: the assignee may adopt the issue (L1).
WITH old AS MATERIALIZED (
	SELECT i.id, i.company_id, i.checkout_run_id, i.execution_run_id,
		CASE WHEN i.checkout_run_id IS NOT NULL THEN coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS c_state,
		CASE WHEN i.execution_run_id IS NOT NULL THEN coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state
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
		-- sweeper: the issue is locked, and no lock column names a live run
		AND (o.checkout_run_id IS NOT NULL OR o.execution_run_id IS NOT NULL)
		AND coalesce(o.c_state, '') <> 'live' AND coalesce(o.e_state, '') <> 'live'
	RETURNING o.id, o.company_id, o.checkout_run_id, o.execution_run_id,
		CASE WHEN o.checkout_run_id IS NOT NULL THEN o.c_state ELSE o.e_state END AS why
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT company_id, 'system', 'system', NULL, NULL, 'issue.stale_lock_cleared', 'issue', id,
		jsonb_build_object('clearedCheckoutRunId', checkout_run_id, 'clearedExecutionRunId', execution_run_id, 'why', why)
	FROM upd ORDER BY id
)
SELECT count(*) FROM upd
