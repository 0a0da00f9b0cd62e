INSERT INTO activity
	(company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id)
SELECT company_id, :actor_type, :actor_id, :actor_run, action, 'issue', id, details, :now, :actor_request FROM (
	SELECT i.id, 1 AS ord, i.company_id, 'issue.released' AS action,
		json_object('previousCheckoutRunId', i.checkout_run_id, 'previousExecutionRunId', i.execution_run_id,
			'unassigned', json('true'), 'cause', 'agent_terminated') AS details
	FROM issues i WHERE i.assignee_agent_id = :agent AND i.status NOT IN ('done', 'cancelled')
		AND (i.checkout_run_id IS NOT NULL OR i.execution_run_id IS NOT NULL)
	UNION ALL
	SELECT i.id, 2, i.company_id, 'issue.updated',
		json_insert(json_object('cause', 'agent_terminated', 'changes', json_insert(
				json_object('assigneeAgentId', json_object('from', i.assignee_agent_id, 'to', NULL)),
				CASE WHEN i.status = 'in_progress' THEN '$.status' END, json_object('from', i.status, 'to', 'todo'))),
			CASE WHEN i.checkout_run_id IS NOT NULL OR i.execution_run_id IS NOT NULL THEN '$.locksCleared' END, json('true'),
			CASE WHEN i.checkout_run_id IS NOT NULL OR i.execution_run_id IS NOT NULL THEN '$.previousCheckoutRunId' END, i.checkout_run_id,
			CASE WHEN i.checkout_run_id IS NOT NULL OR i.execution_run_id IS NOT NULL THEN '$.previousExecutionRunId' END, i.execution_run_id)
	FROM issues i WHERE i.assignee_agent_id = :agent AND i.status NOT IN ('done', 'cancelled'))
ORDER BY id, ord
