-- $1 = @agent
-- $2 = @actor_type
-- $3 = @actor_id
-- $4 = @actor_run
-- $5 = @actor_request
WITH old AS MATERIALIZED (
	SELECT id, status, assignee_agent_id, checkout_run_id, execution_run_id FROM issues
	WHERE assignee_agent_id = $1::text AND status NOT IN ('done', 'cancelled')
	ORDER BY id FOR UPDATE
), upd AS (
	UPDATE issues i SET
		assignee_agent_id = NULL,
		status = CASE WHEN i.status = 'in_progress' THEN 'todo' ELSE i.status END,
		checkout_run_id = NULL,
		execution_run_id = NULL,
		execution_agent_name_key = NULL,
		execution_locked_at = NULL,
		updated_at = now()
	FROM old o WHERE i.id = o.id
	RETURNING i.id, i.company_id, i.status, o.status AS old_status, o.assignee_agent_id AS old_assignee,
		o.checkout_run_id AS old_checkout, o.execution_run_id AS old_execution,
		(o.checkout_run_id IS NOT NULL OR o.execution_run_id IS NOT NULL) AS cleared
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT company_id, $2::text, $3::text, $4::text, $5::text, action, 'issue', id, details FROM (
		SELECT u.id, 1 AS ord, u.company_id, 'issue.released' AS action,
			jsonb_build_object('previousCheckoutRunId', u.old_checkout, 'previousExecutionRunId', u.old_execution,
				'unassigned', true, 'cause', 'agent_terminated') AS details
		FROM upd u WHERE u.cleared
		UNION ALL
		SELECT u.id, 2, u.company_id, 'issue.updated',
			jsonb_build_object('changes', jsonb_build_object('assigneeAgentId', jsonb_build_object('from', u.old_assignee, 'to', NULL))
				|| CASE WHEN u.status <> u.old_status
					THEN jsonb_build_object('status', jsonb_build_object('from', u.old_status, 'to', u.status)) ELSE '{}' END,
				'cause', 'agent_terminated')
			|| CASE WHEN u.cleared THEN jsonb_build_object('locksCleared', true,
				'previousCheckoutRunId', u.old_checkout, 'previousExecutionRunId', u.old_execution) ELSE '{}' END
		FROM upd u
	) x ORDER BY id, ord
)
SELECT count(*) FROM upd
