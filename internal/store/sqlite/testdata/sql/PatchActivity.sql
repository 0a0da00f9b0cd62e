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
