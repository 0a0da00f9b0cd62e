-- $1 = @run
-- $2 = @rid
-- $3 = @rident
-- $4 = @company
-- $5 = @board
-- $6 = @agent
-- $7 = @unassign
-- $8 = @actor_type
-- $9 = @actor_id
-- $10 = @actor_run
-- $11 = @actor_request
WITH old AS MATERIALIZED (
	SELECT i.id, i.company_id, i.identifier, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
		i.checkout_run_id, i.checkout_epoch, i.execution_run_id, i.execution_agent_name_key, i.execution_locked_at,
		i.started_at, i.completed_at, i.cancelled_at, i.created_at, i.updated_at, i.xmin AS ver, i.ctid AS tid,
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
	FROM issues i LEFT JOIN runs c ON c.id = $1::text
	WHERE i.id = coalesce(nullif($2::text, ''), (SELECT ref.id FROM issues ref WHERE ref.identifier = $3::text)) AND ($4::text = '' OR i.company_id IS NOT DISTINCT FROM $4::text)
),
d AS MATERIALIZED (
	SELECT o.id, coalesce(
		-- L4: the issue is locked
		(o.checkout_run_id IS NOT NULL OR o.execution_run_id IS NOT NULL)
		-- L4: by the board, or by the owner: the caller's run is live, the agent's and in the
		-- issue's company; each lock column is empty, the run, or names a dead run; and the run
		-- holds a lock or the agent is the assignee adopting a dead holder (L3)
		AND ($5::boolean OR (o.caller_state = 'live' AND o.caller_agent = $6::text AND o.caller_company = o.company_id
			AND (o.checkout_run_id IS NULL OR o.checkout_run_id = $1::text OR o.c_state <> 'live')
			AND (o.execution_run_id IS NULL OR o.execution_run_id = $1::text OR o.e_state <> 'live')
			AND (o.checkout_run_id = $1::text OR o.execution_run_id = $1::text OR o.assignee_agent_id = $6::text))),
		false) AS ok
	FROM old o
),
upd AS (
	UPDATE issues i SET
		checkout_run_id = NULL,
		execution_run_id = NULL,
		execution_agent_name_key = NULL,
		execution_locked_at = NULL,
		status = CASE WHEN i.status = 'in_progress' THEN 'todo' ELSE i.status END,
		assignee_agent_id = CASE WHEN $7::boolean THEN NULL ELSE i.assignee_agent_id END,
		updated_at = now()
	FROM old o JOIN d ON d.id = o.id
	WHERE i.ctid = o.tid AND i.id = o.id AND i.xmin = o.ver AND d.ok
	RETURNING i.id, i.company_id, i.identifier, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
		i.checkout_run_id, i.checkout_epoch, i.execution_run_id, i.execution_agent_name_key, i.execution_locked_at,
		i.started_at, i.completed_at, i.cancelled_at, i.created_at, i.updated_at
),
act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT u.company_id, $8::text, $9::text, $10::text, $11::text, 'issue.released', 'issue', u.id,
		jsonb_build_object('previousCheckoutRunId', o.checkout_run_id, 'previousExecutionRunId', o.execution_run_id,
			'unassigned', $7::boolean)
	FROM upd u, old o
)
SELECT x.*, o.status AS old_status, o.assignee_agent_id AS old_assignee,
	o.checkout_run_id AS old_checkout, o.execution_run_id AS old_execution, o.c_state AS checkout_state, o.e_state AS execution_state,
	o.caller_agent, o.caller_company, o.caller_state,
	NULL::boolean AS owned_by_caller, NULL::boolean AS agent_active, NULL::boolean AS assignee_in_company, d.ok
FROM old o JOIN d ON d.id = o.id CROSS JOIN LATERAL (
	SELECT true AS changed, u.* FROM upd u
	UNION ALL
	SELECT false, o.id, o.company_id, o.identifier, o.title, o.description, o.status, o.priority, o.assignee_agent_id,
		o.checkout_run_id, o.checkout_epoch, o.execution_run_id, o.execution_agent_name_key, o.execution_locked_at,
		o.started_at, o.completed_at, o.cancelled_at, o.created_at, o.updated_at
	WHERE NOT EXISTS (SELECT 1 FROM upd)
) x
