SELECT i.id, i.company_id, i.status, i.assignee_agent_id, i.checkout_run_id, i.execution_run_id,
		CASE WHEN i.checkout_run_id IS NOT NULL THEN
			coalesce((SELECT CASE WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now) THEN 'live'
		WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END,
		CASE WHEN i.execution_run_id IS NOT NULL THEN
			coalesce((SELECT CASE WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now) THEN 'live'
		WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.execution_run_id), 'missing') END
	FROM issues i
	WHERE (i.id = :rid OR i.identifier = :rident) AND (:company = '' OR i.company_id = :company)
