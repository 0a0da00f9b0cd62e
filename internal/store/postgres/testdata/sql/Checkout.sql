-- $1 = @agent
-- $2 = @expected
-- $3 = @run
-- $4 = @rid
-- $5 = @company
-- $6 = @actor_type
-- $7 = @actor_id
-- $8 = @actor_run
-- $9 = @actor_request
WITH old AS MATERIALIZED (
	SELECT s.*, coalesce(
		-- L1: the caller's run is live and the agent's, in the issue's company
		s.caller_state = 'live' AND s.caller_agent = $1::text AND s.caller_company = s.company_id
		-- L1: the issue is A's or unassigned
		AND (s.assignee_agent_id IS NULL OR s.assignee_agent_id = $1::text)
		-- L1: its status is expected, or it is in_progress and A's
		AND (s.status = ANY($2::text[]) OR (s.status = 'in_progress' AND s.assignee_agent_id = $1::text))
		-- L1/L3: each lock column is empty, the caller's run, or names a dead run
		AND (s.checkout_run_id IS NULL OR s.checkout_run_id = $3::text OR s.c_state <> 'live')
		AND (s.execution_run_id IS NULL OR s.execution_run_id = $3::text OR s.e_state <> 'live')
		-- L2: the same run again changes nothing
		AND NOT (s.checkout_run_id IS NOT DISTINCT FROM $3::text AND s.execution_run_id IS NOT DISTINCT FROM $3::text)
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
		CASE WHEN i.checkout_run_id IS NULL THEN NULL WHEN i.checkout_run_id = c.id THEN CASE
			WHEN c.status = 'queued' OR (c.status = 'running' AND c.lease_expires_at > now()) THEN 'live'
			WHEN c.status = 'running' THEN 'lost' ELSE 'terminal' END ELSE coalesce((SELECT CASE
			WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()) THEN 'live'
			WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS c_state,
		CASE WHEN i.execution_run_id IS NULL THEN NULL WHEN i.execution_run_id = c.id THEN CASE
			WHEN c.status = 'queued' OR (c.status = 'running' AND c.lease_expires_at > now()) THEN 'live'
			WHEN c.status = 'running' THEN 'lost' ELSE 'terminal' END ELSE coalesce((SELECT CASE
			WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()) THEN 'live'
			WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state,
		c.agent_id AS caller_agent, c.company_id AS caller_company, c.ctid AS caller_tid,
		CASE WHEN c.id IS NOT NULL THEN CASE
			WHEN c.status = 'queued' OR (c.status = 'running' AND c.lease_expires_at > now()) THEN 'live'
			WHEN c.status = 'running' THEN 'lost' ELSE 'terminal' END END AS caller_state
	FROM issues i LEFT JOIN runs c ON c.id = $3::text
	WHERE i.id = $4::text AND ($5::text = '' OR i.company_id IS NOT DISTINCT FROM $5::text)
	OFFSET 0) s
),
lk AS MATERIALIZED (
	-- the caller's run fetched by the ctid old read (caller_tid), no index
	-- look-up; FOR SHARE of a version updated since (a renewal, or a finish
	-- that committed meanwhile) re-checks the latest version
	SELECT r.id FROM runs r
	WHERE r.ctid = (SELECT o.caller_tid FROM old o WHERE o.ok) AND r.id = $3::text
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))
	FOR SHARE OF r
),
upd AS (
	UPDATE issues i SET
		status = 'in_progress',
		assignee_agent_id = $1::text,
		checkout_run_id = $3::text,
		execution_run_id = $3::text,
		execution_agent_name_key = (SELECT a.name_key FROM agents a WHERE a.id = $1::text),
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
	SELECT u.company_id, $6::text, $7::text, $8::text, $9::text, a.action, 'issue', u.id, a.details
	FROM upd u, LATERAL (VALUES
		-- L3: a dead holder displaced; why is its checkout lock's reason first
		('issue.checkout_lock_adopted',
			(u.old_checkout IS NOT NULL AND u.old_checkout <> $3::text) OR (u.old_execution IS NOT NULL AND u.old_execution <> $3::text),
			jsonb_build_object('previousCheckoutRunId', u.old_checkout, 'previousExecutionRunId', u.old_execution,
				'why', CASE WHEN u.old_checkout IS NOT NULL AND u.old_checkout <> $3::text THEN u.c_state ELSE u.e_state END)),
		('issue.checked_out', true, jsonb_build_object('agentId', $1::text, 'runId', $3::text, 'checkoutEpoch', u.checkout_epoch))
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
