UPDATE issues SET
	checkout_run_id = NULL,
	execution_run_id = NULL,
	execution_agent_name_key = NULL,
	execution_locked_at = NULL,
	status = CASE WHEN status = 'in_progress' THEN 'todo' ELSE status END,
	assignee_agent_id = CASE WHEN :unassign THEN NULL ELSE assignee_agent_id END,
	updated_at = :now
WHERE id = coalesce(nullif(:rid, ''), (SELECT i.id FROM issues i WHERE i.identifier = :rident))
	AND (:company = '' OR company_id = :company)
	-- fast path: only an issue whose both locks are the caller's run
	AND (NOT :held_only OR (checkout_run_id IS :run AND execution_run_id IS :run))
	-- L4: the issue is locked
	AND (checkout_run_id IS NOT NULL OR execution_run_id IS NOT NULL)
	-- L4: by the board, or by the owner: the caller's run is live, the agent's and in the
	-- issue's company; each lock column is empty, the run, or names a dead run; and the run
	-- holds a lock or the agent is the assignee adopting a dead holder (L3)
	AND (:board OR (EXISTS (SELECT 1 FROM runs r WHERE r.id = :run AND r.agent_id = :agent AND r.company_id = issues.company_id
			AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now)))
		AND (checkout_run_id IS NULL OR checkout_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.checkout_run_id
			AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
		AND (execution_run_id IS NULL OR execution_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.execution_run_id
			AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
		AND (checkout_run_id IS :run OR execution_run_id IS :run OR assignee_agent_id IS :agent)))
RETURNING id, company_id, identifier, title, description, status, priority, assignee_agent_id,
	checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
	started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count
