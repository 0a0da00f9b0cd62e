SELECT id, company_id, checkout_run_id, execution_run_id, c_state, e_state FROM (
	SELECT i.id, i.company_id, i.checkout_run_id, i.execution_run_id,
		coalesce((SELECT CASE
			WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now) THEN 'live'
			WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.checkout_run_id), 'missing') AS c_state,
		CASE WHEN i.execution_run_id IS NOT NULL THEN
			coalesce((SELECT CASE
				WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now) THEN 'live'
				WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state
	FROM issues i INDEXED BY issues_execution_run WHERE i.execution_run_id IS NOT NULL AND i.checkout_run_id IS NOT NULL
	UNION ALL -- the execution lock alone (the branches are disjoint)
	SELECT i.id, i.company_id, NULL, i.execution_run_id, NULL,
		coalesce((SELECT CASE
			WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now) THEN 'live'
			WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.execution_run_id), 'missing')
	FROM issues i INDEXED BY issues_execution_run WHERE i.execution_run_id IS NOT NULL AND i.checkout_run_id IS NULL)
WHERE coalesce(c_state, '') <> 'live' AND coalesce(e_state, '') <> 'live'
LIMIT :limit
