UPDATE issues SET
	title = coalesce(:title, title),
	description = coalesce(:description, description),
	priority = coalesce(:priority, priority),
	priority_rank = coalesce(:priority_rank, priority_rank),
	status = coalesce(:status, status),
	assignee_agent_id = CASE WHEN :set_assignee THEN :assignee ELSE assignee_agent_id END,
	started_at = CASE WHEN :status IS 'in_progress' THEN coalesce(started_at, :now) ELSE started_at END,
	completed_at = CASE WHEN :status IS 'done' AND status <> 'done' THEN :now ELSE completed_at END,
	-- the fencing epoch the work was completed under (gate G2): set by the
	-- statement that moves the issue to done, cleared when it leaves done
	completed_epoch = CASE WHEN :status IS 'done' AND status <> 'done' THEN checkout_epoch
		WHEN coalesce(:status, status) <> 'done' THEN NULL ELSE completed_epoch END,
	cancelled_at = CASE WHEN :status IS 'cancelled' AND status <> 'cancelled' THEN :now ELSE cancelled_at END,
	-- L6 (releases) clears, L5/L3 adoption (adopts) takes over, otherwise unchanged
	checkout_run_id = CASE
		WHEN (coalesce(:status, status) <> 'in_progress' OR (:set_assignee AND :assignee IS NOT assignee_agent_id)) THEN NULL
		WHEN (NOT :board AND (checkout_run_id IS NOT NULL OR execution_run_id IS NOT NULL)
			AND NOT (checkout_run_id IS :run AND execution_run_id IS :run)) THEN :run
		ELSE checkout_run_id END,
	execution_run_id = CASE
		WHEN (coalesce(:status, status) <> 'in_progress' OR (:set_assignee AND :assignee IS NOT assignee_agent_id)) THEN NULL
		WHEN (NOT :board AND (checkout_run_id IS NOT NULL OR execution_run_id IS NOT NULL)
			AND NOT (checkout_run_id IS :run AND execution_run_id IS :run)) THEN :run
		ELSE execution_run_id END,
	execution_agent_name_key = CASE
		WHEN (coalesce(:status, status) <> 'in_progress' OR (:set_assignee AND :assignee IS NOT assignee_agent_id)) THEN NULL
		WHEN (NOT :board AND (checkout_run_id IS NOT NULL OR execution_run_id IS NOT NULL)
			AND NOT (checkout_run_id IS :run AND execution_run_id IS :run)) THEN (SELECT a.name_key FROM agents a WHERE a.id = :agent)
		ELSE execution_agent_name_key END,
	execution_locked_at = CASE
		WHEN (coalesce(:status, status) <> 'in_progress' OR (:set_assignee AND :assignee IS NOT assignee_agent_id)) THEN NULL
		WHEN (NOT :board AND (checkout_run_id IS NOT NULL OR execution_run_id IS NOT NULL)
			AND NOT (checkout_run_id IS :run AND execution_run_id IS :run)) THEN :now
		ELSE execution_locked_at END,
	checkout_epoch = CASE
		WHEN NOT (coalesce(:status, status) <> 'in_progress' OR (:set_assignee AND :assignee IS NOT assignee_agent_id))
			AND (NOT :board AND (checkout_run_id IS NOT NULL OR execution_run_id IS NOT NULL)
				AND NOT (checkout_run_id IS :run AND execution_run_id IS :run)) THEN checkout_epoch + 1
		ELSE checkout_epoch END,
	updated_at = :now
WHERE id = coalesce(nullif(:rid, ''), (SELECT i.id FROM issues i WHERE i.identifier = :rident))
	AND (:company = '' OR company_id = :company)
	-- fast path: only an issue whose both locks are the caller's run
	AND (NOT :held_only OR (checkout_run_id IS :run AND execution_run_id IS :run))
	-- E4: only a person moves an escalated issue out of blocked
	AND (:board OR escalated_at IS NULL OR coalesce(:status, status) = 'blocked')
	-- L5: the board, an unlocked issue, or the owner
	AND (:board OR (checkout_run_id IS NULL AND execution_run_id IS NULL)
		OR (EXISTS (SELECT 1 FROM runs r WHERE r.id = :run AND r.agent_id = :agent AND r.company_id = issues.company_id
				AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now)))
			AND (checkout_run_id IS NULL OR checkout_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.checkout_run_id
				AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
			AND (execution_run_id IS NULL OR execution_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.execution_run_id
				AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
			AND (checkout_run_id IS :run OR execution_run_id IS :run OR assignee_agent_id IS :agent)))
	-- L5: entering in_progress takes an assignee
	AND NOT (:status IS 'in_progress' AND status <> 'in_progress'
		AND (CASE WHEN :set_assignee THEN :assignee ELSE assignee_agent_id END) IS NULL)
	-- L5: a new assignee is an agent of the issue's company
	AND (NOT :set_assignee OR :assignee IS NULL
		OR EXISTS (SELECT 1 FROM agents a WHERE a.id = :assignee AND a.company_id = issues.company_id))
	-- D1/D2: entering in_progress or done takes every blocker done
	AND NOT (coalesce(:status IN ('in_progress', 'done') AND :status <> status, 0) AND unresolved_blocker_count > 0)
RETURNING id, company_id, identifier, title, description, status, priority, assignee_agent_id,
	checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
	started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count
