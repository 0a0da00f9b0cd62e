SELECT i.id, i.company_id, i.status, i.assignee_agent_id, i.checkout_run_id, i.execution_run_id,
	CASE WHEN i.checkout_run_id IS NOT NULL THEN coalesce((SELECT CASE
		WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now) THEN 'live'
		WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS checkout_state,
	CASE WHEN i.execution_run_id IS NOT NULL THEN coalesce((SELECT CASE
		WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now) THEN 'live'
		WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS execution_state,
	c.id, c.agent_id, c.company_id,
	CASE WHEN c.id IS NOT NULL THEN CASE
		WHEN c.status = 'queued' OR (c.status = 'running' AND c.lease_expires_at > :now) THEN 'live'
		WHEN c.status = 'running' THEN 'lost' ELSE 'terminal' END END AS caller_state
FROM issues i LEFT JOIN runs c ON c.id IN (SELECT value FROM json_each(:runs))
WHERE (i.id = :rid OR i.identifier = :rident) AND (:company = '' OR i.company_id = :company)
