INSERT INTO activity
	(company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id)
	VALUES (:company, :actor_type, :actor_id, :actor_run, :action, :entity_type, :entity_id, :details, :now, :actor_request)
