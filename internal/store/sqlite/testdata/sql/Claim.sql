UPDATE issues SET
	status = 'in_progress',
	assignee_agent_id = :agent,
	checkout_run_id = :run,
	execution_run_id = :run,
	execution_agent_name_key = (SELECT a.name_key FROM agents a WHERE a.id = :agent),
	execution_locked_at = :now,
	started_at = coalesce(started_at, :now),
	checkout_epoch = checkout_epoch + 1,
	updated_at = :now
WHERE id = (SELECT c.id FROM issues c WHERE c.id IN (
		SELECT (SELECT i.id FROM issues i INDEXED BY issues_claim_unassigned
			WHERE i.company_id = :company AND i.assignee_agent_id IS NULL AND i.status = s.value
				AND i.unresolved_blocker_count = 0 -- D7
				AND i.escalated_at IS NULL -- E3: no agent takes an escalated issue
				AND (i.checkout_run_id IS NULL OR i.checkout_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r
					WHERE r.id = i.checkout_run_id AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
				AND (i.execution_run_id IS NULL OR i.execution_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r
					WHERE r.id = i.execution_run_id AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
				AND NOT (i.checkout_run_id IS :run AND i.execution_run_id IS :run)
			ORDER BY i.priority_rank, i.created_at, i.id LIMIT 1)
		FROM json_each(:unassigned) s
		UNION ALL
		SELECT (SELECT i.id FROM issues i INDEXED BY issues_assignee_status
			WHERE i.assignee_agent_id = :agent AND i.status = s.value AND i.company_id = :company
				AND (i.unresolved_blocker_count = 0 OR i.status = 'in_progress') -- D7
				AND i.escalated_at IS NULL -- E3: no agent takes an escalated issue
				AND (i.checkout_run_id IS NULL OR i.checkout_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r
					WHERE r.id = i.checkout_run_id AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
				AND (i.execution_run_id IS NULL OR i.execution_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r
					WHERE r.id = i.execution_run_id AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
				AND NOT (i.checkout_run_id IS :run AND i.execution_run_id IS :run)
			ORDER BY i.priority_rank, i.created_at, i.id LIMIT 1)
		FROM json_each(:mine) s)
	ORDER BY c.priority_rank, c.created_at, c.id LIMIT 1)
	-- fast path: only an unlocked issue, whose old lock columns need no read
	AND checkout_run_id IS NULL AND execution_run_id IS NULL
	-- L1: the caller's run is live and the agent's, in the issue's company
	AND EXISTS (SELECT 1 FROM runs r WHERE r.id = :run AND r.agent_id = :agent AND r.company_id = issues.company_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now)))
RETURNING id, company_id, identifier, title, description, status, priority, assignee_agent_id,
	checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
	started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count
