UPDATE issues SET
	status = 'in_progress',
	assignee_agent_id = :agent,
	checkout_run_id = :run,
	execution_run_id = :run,
	execution_agent_name_key = (SELECT a.name_key FROM agents a WHERE a.id = :agent),
	execution_locked_at = :now,
	started_at = coalesce(started_at, :now),
	checkout_epoch = checkout_epoch + 1, -- always a new acquisition: L2 is excluded below
	updated_at = :now
WHERE id = coalesce(nullif(:rid, ''), (SELECT i.id FROM issues i WHERE i.identifier = :rident))
	AND (:company = '' OR company_id = :company)
	-- fast path: only an unlocked issue, whose old lock columns need no read
	AND (NOT :unlocked_only OR (checkout_run_id IS NULL AND execution_run_id IS NULL))
	-- L1: the caller's run is live and the agent's, in the issue's company
	AND EXISTS (SELECT 1 FROM runs r WHERE r.id = :run AND r.agent_id = :agent AND r.company_id = issues.company_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now)))
	-- L1: the issue is A's or unassigned
	AND (assignee_agent_id IS NULL OR assignee_agent_id = :agent)
	-- L1: its status is expected (:expected is ",s1,s2,"), or it is in_progress and A's
	AND (instr(:expected, ',' || status || ',') > 0 OR (status = 'in_progress' AND assignee_agent_id = :agent))
	-- L1/L3: each lock column is empty, the caller's run, or names a dead run
	AND (checkout_run_id IS NULL OR checkout_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.checkout_run_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
	AND (execution_run_id IS NULL OR execution_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.execution_run_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
	-- L2: the same run again changes nothing
	AND NOT (checkout_run_id IS :run AND execution_run_id IS :run)
	-- D1: entering in_progress takes every blocker done (an issue in_progress keeps its lock)
	AND (status = 'in_progress' OR unresolved_blocker_count = 0)
	-- E3: no agent takes an escalated issue; a person moves it out of blocked first
	AND escalated_at IS NULL
RETURNING id, company_id, identifier, title, description, status, priority, assignee_agent_id,
	checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
	started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count
