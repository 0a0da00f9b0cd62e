INSERT INTO activity
	(company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id)
SELECT i.company_id, :actor_type, :actor_id, :actor_run, 'issue.updated', 'issue', i.id,
	json_object('boardCheckout', json('true'), 'changes', json_insert('{}',
		CASE WHEN :old_assignee IS NOT i.assignee_agent_id THEN '$.assigneeAgentId' END,
			json_object('from', :old_assignee, 'to', i.assignee_agent_id),
		CASE WHEN :old_status IS NOT i.status THEN '$.status' END,
			json_object('from', :old_status, 'to', i.status))),
	:now, :actor_request
FROM issues i WHERE i.id = :id
