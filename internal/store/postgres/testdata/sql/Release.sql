-- $1 = @board
-- $2 = @agent
-- $3 = @run
-- $4 = @rid
-- $5 = @company
-- $6 = @unassign
-- $7 = @actor_type
-- $8 = @actor_id
-- $9 = @actor_run
-- $10 = @actor_request
WITH old AS MATERIALIZED (
	SELECT s.*, coalesce(
		-- L4: the issue is locked
		(s.checkout_run_id IS NOT NULL OR s.execution_run_id IS NOT NULL)
		-- L4: by the board, or by the owner: the caller's run is live, the agent's and in the
		-- issue's company; each lock column is empty, the run, or names a dead run; and the run
		-- holds a lock or the agent is the assignee adopting a dead holder (L3)
		AND ($1::boolean OR (s.caller_state = 'live' AND s.caller_agent = $2::text AND s.caller_company = s.company_id
			AND (s.checkout_run_id IS NULL OR s.checkout_run_id = $3::text OR s.c_state <> 'live')
			AND (s.execution_run_id IS NULL OR s.execution_run_id = $3::text OR s.e_state <> 'live')
			AND (s.checkout_run_id = $3::text OR s.execution_run_id = $3::text OR s.assignee_agent_id = $2::text))),
		false) AS ok
	FROM (SELECT i.id, i.company_id, i.identifier, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
		i.checkout_run_id, i.checkout_epoch, i.execution_run_id, i.execution_agent_name_key, i.execution_locked_at,
		i.started_at, i.completed_at, i.cancelled_at, i.created_at, i.updated_at, i.parent_id, i.unresolved_blocker_count, i.completed_epoch, i.relation_count, i.xmin AS ver, i.ctid AS tid,
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
		c.agent_id AS caller_agent, c.company_id AS caller_company,
		CASE WHEN c.id IS NOT NULL THEN CASE
			WHEN c.status = 'queued' OR (c.status = 'running' AND c.lease_expires_at > now()) THEN 'live'
			WHEN c.status = 'running' THEN 'lost' ELSE 'terminal' END END AS caller_state
	FROM issues i LEFT JOIN runs c ON c.id = $3::text
	WHERE i.id = $4::text AND ($5::text = '' OR i.company_id IS NOT DISTINCT FROM $5::text)
	OFFSET 0) s
),
upd AS (
	UPDATE issues i SET
		checkout_run_id = NULL,
		execution_run_id = NULL,
		execution_agent_name_key = NULL,
		execution_locked_at = NULL,
		status = CASE WHEN i.status = 'in_progress' THEN 'todo' ELSE i.status END,
		assignee_agent_id = CASE WHEN $6::boolean THEN NULL ELSE i.assignee_agent_id END,
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
	SELECT u.company_id, $7::text, $8::text, $9::text, $10::text, 'issue.released', 'issue', u.id,
		jsonb_build_object('previousCheckoutRunId', u.old_checkout, 'previousExecutionRunId', u.old_execution,
			'unassigned', $6::boolean)
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
