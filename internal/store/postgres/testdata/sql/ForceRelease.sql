-- $1 = @rid
-- $2 = @rident
-- $3 = @company
-- $4 = @clear_assignee
-- $5 = @actor_type
-- $6 = @actor_id
-- $7 = @actor_run
-- $8 = @actor_request
-- $9 = @reason
WITH old AS MATERIALIZED (
	SELECT i.id, i.company_id, i.identifier, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
		i.checkout_run_id, i.checkout_epoch, i.execution_run_id, i.execution_agent_name_key, i.execution_locked_at,
		i.started_at, i.completed_at, i.cancelled_at, i.created_at, i.updated_at, i.parent_id, i.unresolved_blocker_count, i.completed_epoch, i.relation_count, i.xmin AS ver, i.ctid AS tid
	FROM issues i
	WHERE i.id = coalesce(nullif($1::text, ''), (SELECT ref.id FROM issues ref WHERE ref.identifier = $2::text)) AND ($3::text = '' OR i.company_id IS NOT DISTINCT FROM $3::text)
),
upd AS (
	UPDATE issues i SET
		checkout_run_id = NULL,
		execution_run_id = NULL,
		execution_agent_name_key = NULL,
		execution_locked_at = NULL,
		status = CASE WHEN i.status = 'in_progress' THEN 'todo' ELSE i.status END,
		assignee_agent_id = CASE WHEN $4::boolean THEN NULL ELSE i.assignee_agent_id END,
		updated_at = now()
	FROM old o
	WHERE i.ctid = o.tid AND i.id = o.id AND i.xmin = o.ver
	RETURNING i.id, i.company_id, i.identifier, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
		i.checkout_run_id, i.checkout_epoch, i.execution_run_id, i.execution_agent_name_key, i.execution_locked_at,
		i.started_at, i.completed_at, i.cancelled_at, i.created_at, i.updated_at, i.parent_id, i.unresolved_blocker_count, i.completed_epoch, i.relation_count
),
act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT u.company_id, $5::text, $6::text, $7::text, $8::text, 'issue.admin_force_release', 'issue', u.id,
		jsonb_build_object('previousCheckoutRunId', o.checkout_run_id, 'previousExecutionRunId', o.execution_run_id,
			'reason', $9::text, 'clearAssignee', $4::boolean)
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
