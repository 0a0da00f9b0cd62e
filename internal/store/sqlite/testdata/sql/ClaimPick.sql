SELECT c.id FROM issues c WHERE c.id IN (
	SELECT (SELECT i.id FROM issues i INDEXED BY issues_claim_unassigned
		-- L1: unassigned, in the company, with a status the claim takes
		WHERE i.company_id = :company AND i.assignee_agent_id IS NULL AND i.status = s.value
			-- D7: every blocker done (the partial index holds no other issue)
			AND i.unresolved_blocker_count = 0
			AND i.escalated_at IS NULL -- E3: no agent takes an escalated issue
			-- L1/L3: each lock column is empty, the caller's run, or names a dead run
			AND (i.checkout_run_id IS NULL OR i.checkout_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r
				WHERE r.id = i.checkout_run_id AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
			AND (i.execution_run_id IS NULL OR i.execution_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r
				WHERE r.id = i.execution_run_id AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
			-- L2: a claim never answers what the run holds
			AND NOT (i.checkout_run_id IS :run AND i.execution_run_id IS :run)
		ORDER BY i.priority_rank, i.created_at, i.id LIMIT 1)
	FROM json_each(:unassigned) s
	UNION ALL
	SELECT (SELECT i.id FROM issues i INDEXED BY issues_assignee_status
		-- L1: the agent's, in the company, with a status the claim takes
		WHERE i.assignee_agent_id = :agent AND i.status = s.value AND i.company_id = :company
			-- D7: every blocker done, unless it is in_progress and the agent's already (adoption)
			AND (i.unresolved_blocker_count = 0 OR i.status = 'in_progress')
			AND i.escalated_at IS NULL -- E3: no agent takes an escalated issue
			-- L1/L3: each lock column is empty, the caller's run, or names a dead run
			AND (i.checkout_run_id IS NULL OR i.checkout_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r
				WHERE r.id = i.checkout_run_id AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
			AND (i.execution_run_id IS NULL OR i.execution_run_id = :run OR NOT EXISTS (SELECT 1 FROM runs r
				WHERE r.id = i.execution_run_id AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now))))
			-- L2: a claim never answers what the run holds
			AND NOT (i.checkout_run_id IS :run AND i.execution_run_id IS :run)
		ORDER BY i.priority_rank, i.created_at, i.id LIMIT 1)
	FROM json_each(:mine) s)
	AND EXISTS (SELECT 1 FROM runs r WHERE r.id = :run AND r.agent_id = :agent AND r.company_id = c.company_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now)))
ORDER BY c.priority_rank, c.created_at, c.id LIMIT 1
