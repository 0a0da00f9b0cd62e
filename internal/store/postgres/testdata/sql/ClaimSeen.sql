-- $1 = @run
-- $2 = @agent
-- $3 = @unassigned
-- $4 = @mine
WITH lk AS (
	SELECT r.company_id FROM runs r
	WHERE r.id = $1::text AND r.agent_id = $2::text
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))
)
SELECT EXISTS (
	SELECT 1 FROM lk CROSS JOIN unnest('{backlog,todo,in_progress,in_review,blocked}'::text[]) AS s(st) CROSS JOIN LATERAL (
		SELECT 1 FROM issues i
		-- L1: unassigned, in the run's company, with a status the claim takes
		WHERE i.company_id = lk.company_id AND i.assignee_agent_id IS NULL AND i.status = s.st
				-- D7: every blocker done (the partial index holds no other issue)
				AND i.unresolved_blocker_count = 0
				AND i.escalated_at IS NULL -- E3: no agent takes an escalated issue
			-- L1/L3: each lock column is empty, the caller's run, or names a dead run
			AND (i.checkout_run_id IS NULL OR i.checkout_run_id = $1::text
				OR NOT coalesce((SELECT (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))
					FROM runs r WHERE r.id = i.checkout_run_id), false))
			AND (i.execution_run_id IS NULL OR i.execution_run_id = $1::text
				OR NOT coalesce((SELECT (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))
					FROM runs r WHERE r.id = i.execution_run_id), false))
			-- L2: a claim never answers what the run holds
			AND NOT (i.checkout_run_id IS NOT DISTINCT FROM $1::text AND i.execution_run_id IS NOT DISTINCT FROM $1::text)
		ORDER BY i.priority_rank, i.created_at, i.id
		LIMIT 1
	) p
	WHERE array_position($3::text[], s.st) IS NOT NULL
) OR EXISTS (
	SELECT 1 FROM lk CROSS JOIN unnest('{backlog,todo,in_progress,in_review,blocked}'::text[]) AS s(st) CROSS JOIN LATERAL (
		SELECT 1 FROM issues i
		-- L1: the agent's, in the run's company, with a status the claim takes
		WHERE i.assignee_agent_id = $2::text AND i.company_id = lk.company_id AND i.status = s.st
				-- D7: every blocker done, unless it is in_progress and the agent's already (adoption)
				AND (i.unresolved_blocker_count = 0 OR i.status = 'in_progress')
				AND i.escalated_at IS NULL -- E3: no agent takes an escalated issue
			-- L1/L3: each lock column is empty, the caller's run, or names a dead run
			AND (i.checkout_run_id IS NULL OR i.checkout_run_id = $1::text
				OR NOT coalesce((SELECT (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))
					FROM runs r WHERE r.id = i.checkout_run_id), false))
			AND (i.execution_run_id IS NULL OR i.execution_run_id = $1::text
				OR NOT coalesce((SELECT (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))
					FROM runs r WHERE r.id = i.execution_run_id), false))
			-- L2: a claim never answers what the run holds
			AND NOT (i.checkout_run_id IS NOT DISTINCT FROM $1::text AND i.execution_run_id IS NOT DISTINCT FROM $1::text)
		ORDER BY i.priority_rank, i.created_at, i.id
		LIMIT 1
	) p
	WHERE array_position($4::text[], s.st) IS NOT NULL
)
