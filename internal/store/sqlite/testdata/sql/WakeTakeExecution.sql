UPDATE issues SET
	execution_run_id = :run,
	execution_agent_name_key = (SELECT a.name_key FROM agents a WHERE a.id = :agent),
	execution_locked_at = :now,
	checkout_run_id = NULL,
	updated_at = :now
WHERE id = :issue
	-- L1: the issue is the agent's or unassigned (and not closed)
	AND status NOT IN ('done', 'cancelled')
	-- E3: no wake takes an escalated issue
	AND escalated_at IS NULL
	AND (assignee_agent_id IS NULL OR assignee_agent_id = :agent)
	-- L1: both lock columns are empty or name dead runs (a dead holder is displaced, L3)
	AND (execution_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.execution_run_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
	AND (checkout_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.checkout_run_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
