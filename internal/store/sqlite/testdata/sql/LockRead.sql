SELECT i.id, i.company_id, i.status, i.assignee_agent_id, i.checkout_run_id, i.execution_run_id,
	CASE WHEN i.checkout_run_id IS NOT NULL THEN coalesce((SELECT CASE
		WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now) THEN 'live'
		WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS checkout_state,
	CASE WHEN i.execution_run_id IS NOT NULL THEN coalesce((SELECT CASE
		WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now) THEN 'live'
		WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS execution_state,
	c.agent_id AS caller_agent, c.company_id AS caller_company,
	CASE WHEN c.id IS NOT NULL THEN CASE
		WHEN c.status = 'queued' OR (c.status = 'running' AND c.lease_expires_at > :now) THEN 'live'
		WHEN c.status = 'running' THEN 'lost' ELSE 'terminal' END END AS caller_state,
	-- L3/L4/L5: the caller's run is live, the agent's and in the issue's company; each lock column
	-- is empty, the run, or names a dead run; and the run holds a lock or the agent is the assignee
	-- adopting a dead holder
	coalesce(c.agent_id = :agent AND c.company_id = i.company_id
		AND (c.status = 'queued' OR (c.status = 'running' AND c.lease_expires_at > :now))
		AND (i.checkout_run_id IS NULL OR i.checkout_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = i.checkout_run_id
			AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
		AND (i.execution_run_id IS NULL OR i.execution_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = i.execution_run_id
			AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
		AND (i.checkout_run_id IS :run OR i.execution_run_id IS :run OR i.assignee_agent_id IS :agent), 0) AS owned_by_caller,
	EXISTS (SELECT 1 FROM agents a WHERE a.id = :agent AND a.company_id = i.company_id AND a.status <> 'terminated') AS agent_active,
	(NOT :set_assignee OR :assignee IS NULL
		OR EXISTS (SELECT 1 FROM agents a WHERE a.id = :assignee AND a.company_id = i.company_id)) AS assignee_in_company,
	-- D1/D2: how many blockers are not done
	i.unresolved_blocker_count AS unresolved_blockers,
	-- E3: escalated to a person
	i.escalated_at IS NOT NULL AS escalated
FROM issues i LEFT JOIN runs c ON c.id = :run
WHERE (i.id = :rid OR i.identifier = :rident) AND (:company = '' OR i.company_id = :company)
