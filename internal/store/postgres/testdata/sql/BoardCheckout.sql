-- $1 = @agent
-- $2 = @run
-- $3 = @rid
-- $4 = @rident
-- $5 = @company
-- $6 = @expected
-- $7 = @actor_type
-- $8 = @actor_id
-- $9 = @actor_run
-- $10 = @actor_request
WITH old AS MATERIALIZED (
	SELECT i.id, i.company_id, i.identifier, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
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
			WHEN c.status = 'running' THEN 'lost' ELSE 'terminal' END END AS caller_state,
		coalesce((SELECT a.status <> 'terminated' FROM agents a WHERE a.id = $1::text AND a.company_id = i.company_id), false) AS agent_active
	FROM issues i LEFT JOIN runs c ON c.id = $2::text
	WHERE i.id = coalesce(nullif($3::text, ''), (SELECT ref.id FROM issues ref WHERE ref.identifier = $4::text)) AND ($5::text = '' OR i.company_id IS NOT DISTINCT FROM $5::text)
),
d AS MATERIALIZED (
	SELECT o.id, coalesce(
		-- S12: the agent is an active agent of the issue's company
		o.agent_active
		-- L1: the issue is the agent's or unassigned
		AND (o.assignee_agent_id IS NULL OR o.assignee_agent_id = $1::text)
		-- L1: its status is expected, or it is in_progress and the agent's
		AND (o.status = ANY($6::text[]) OR (o.status = 'in_progress' AND o.assignee_agent_id = $1::text))
		-- L1: no lock column names a live run
		AND (o.checkout_run_id IS NULL OR o.c_state <> 'live')
		AND (o.execution_run_id IS NULL OR o.e_state <> 'live')
		-- S12: already in_progress and the agent's changes nothing
		AND NOT (o.status = 'in_progress' AND o.assignee_agent_id IS NOT DISTINCT FROM $1::text)
		-- D1: entering in_progress takes every blocker done
		AND (o.status = 'in_progress' OR o.unresolved_blocker_count = 0),
		false) AS ok
	FROM old o
),
upd AS (
	UPDATE issues i SET
		status = 'in_progress',
		assignee_agent_id = $1::text,
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
	SELECT u.company_id, $7::text, $8::text, $9::text, $10::text, 'issue.updated', 'issue', u.id,
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
