INSERT INTO activity
	(company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id)
SELECT i.company_id, :actor_type, :actor_id, :actor_run, 'issue.lock_released', 'issue', i.id,
	json_object('runId', :run, 'runStatus', :run_status), :now, :actor_request
FROM issues i WHERE i.id IN (SELECT value FROM json_each(:issues))
ORDER BY i.id
