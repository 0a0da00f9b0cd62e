UPDATE issues SET
	status = 'in_progress',
	assignee_agent_id = :agent,
	started_at = coalesce(started_at, :now),
	updated_at = :now
WHERE id = :id
	-- S12: the agent is an active agent of the issue's company
	AND EXISTS (SELECT 1 FROM agents a WHERE a.id = :agent AND a.company_id = issues.company_id AND a.status <> 'terminated')
	-- L1: the issue is the agent's or unassigned
	AND (assignee_agent_id IS NULL OR assignee_agent_id = :agent)
	-- L1: its status is expected, or it is in_progress and the agent's
	AND (instr(:expected, ',' || status || ',') > 0 OR (status = 'in_progress' AND assignee_agent_id = :agent))
	-- L1: no lock column names a live run
	AND (checkout_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.checkout_run_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
	AND (execution_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.execution_run_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
	-- S12: already in_progress and the agent's changes nothing
	AND NOT (status = 'in_progress' AND assignee_agent_id IS :agent)
	-- D1: entering in_progress takes every blocker done
	AND (status = 'in_progress' OR unresolved_blocker_count = 0)
RETURNING id, company_id, identifier, title, description, status, priority, assignee_agent_id,
	checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
	started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count
