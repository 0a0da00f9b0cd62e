-- $1 = @run
-- $2 = @agent
-- $3 = @issue
UPDATE issues i SET
	execution_run_id = $1::text,
	execution_agent_name_key = (SELECT a.name_key FROM agents a WHERE a.id = $2::text),
	execution_locked_at = now(),
	checkout_run_id = NULL,
	updated_at = now()
WHERE i.id = $3::text
	-- L1: the issue is the agent's or unassigned (and not closed)
	AND i.status NOT IN ('done', 'cancelled')
	-- E3: no wake takes an escalated issue
	AND i.escalated_at IS NULL
	AND (i.assignee_agent_id IS NULL OR i.assignee_agent_id = $2::text)
	-- L1: both lock columns are empty or name dead runs (a dead holder is displaced, L3)
	AND (i.execution_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = i.execution_run_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))))
	AND (i.checkout_run_id IS NULL OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = i.checkout_run_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))))
