INSERT INTO activity
	(company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id)
SELECT i.company_id, :actor_type, :actor_id, :actor_run, 'issue.admin_force_release', 'issue', i.id,
	json_object('previousCheckoutRunId', :old_checkout, 'previousExecutionRunId', :old_execution,
		'reason', :reason, 'clearAssignee', json(CASE WHEN :clear_assignee THEN 'true' ELSE 'false' END)),
	:now, :actor_request
FROM issues i WHERE i.id = :id
