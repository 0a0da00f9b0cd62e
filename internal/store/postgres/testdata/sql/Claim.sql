-- $1 = @run
-- $2 = @agent
-- $3 = @unassigned
-- $4 = @mine
-- $5 = @actor_type
-- $6 = @actor_id
-- $7 = @actor_run
-- $8 = @actor_request
WITH lk AS MATERIALIZED (
	SELECT r.id, r.company_id FROM runs r
	-- L1: the caller's run is live and the agent's
	WHERE r.id = $1::text AND r.agent_id = $2::text
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))
	FOR SHARE OF r
),
cand AS MATERIALIZED (
	SELECT x.* FROM (
		SELECT p.* FROM lk CROSS JOIN unnest('{backlog,todo,in_progress,in_review,blocked}'::text[]) AS s(st) CROSS JOIN LATERAL (
			SELECT i.id, i.priority_rank, i.created_at, i.checkout_run_id, i.execution_run_id,
				CASE WHEN i.checkout_run_id IS NOT NULL THEN coalesce((SELECT CASE
					WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()) THEN 'live'
					WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS c_state,
				CASE WHEN i.execution_run_id IS NOT NULL THEN coalesce((SELECT CASE
					WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()) THEN 'live'
					WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state
			FROM issues i
			-- L1: unassigned, in the run's company, with a status the claim takes
			WHERE i.company_id = lk.company_id AND i.assignee_agent_id IS NULL AND i.status = s.st
				-- D7: every blocker done (the partial index holds no other issue)
				AND i.unresolved_blocker_count = 0
				AND i.escalated_at IS NULL -- E3: no agent takes an escalated issue
				-- L1/L3: each lock column is empty, the caller's run, or names a dead run (scalar
				-- subqueries, looked up by primary key per locked row: a NOT EXISTS here is planned
				-- as a hash of every live run)
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
			FOR UPDATE OF i SKIP LOCKED
		) p
		WHERE array_position($3::text[], s.st) IS NOT NULL
		UNION ALL
		SELECT p.* FROM lk CROSS JOIN unnest('{backlog,todo,in_progress,in_review,blocked}'::text[]) AS s(st) CROSS JOIN LATERAL (
			SELECT i.id, i.priority_rank, i.created_at, i.checkout_run_id, i.execution_run_id,
				CASE WHEN i.checkout_run_id IS NOT NULL THEN coalesce((SELECT CASE
					WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()) THEN 'live'
					WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS c_state,
				CASE WHEN i.execution_run_id IS NOT NULL THEN coalesce((SELECT CASE
					WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()) THEN 'live'
					WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state
			FROM issues i
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
			FOR UPDATE OF i SKIP LOCKED
		) p
		WHERE array_position($4::text[], s.st) IS NOT NULL
	) x
	ORDER BY x.priority_rank, x.created_at, x.id
	LIMIT 1
),
upd AS (
	UPDATE issues i SET
		status = 'in_progress',
		assignee_agent_id = $2::text,
		checkout_run_id = $1::text,
		execution_run_id = $1::text,
		execution_agent_name_key = (SELECT a.name_key FROM agents a WHERE a.id = $2::text),
		execution_locked_at = now(),
		started_at = coalesce(i.started_at, now()),
		checkout_epoch = i.checkout_epoch + 1, -- always a new acquisition: cand excludes what @run holds
		updated_at = now()
	FROM cand o
	WHERE i.id = o.id
	RETURNING i.id, i.company_id, i.identifier, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
		i.checkout_run_id, i.checkout_epoch, i.execution_run_id, i.execution_agent_name_key, i.execution_locked_at,
		i.started_at, i.completed_at, i.cancelled_at, i.created_at, i.updated_at, i.parent_id, i.unresolved_blocker_count, i.completed_epoch, i.relation_count
),
act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT u.company_id, $5::text, $6::text, $7::text, $8::text, a.action, 'issue', u.id, a.details
	FROM upd u, cand o, LATERAL (VALUES
		-- L3: a dead holder displaced; why is its checkout lock's reason first
		(1, 'issue.checkout_lock_adopted',
			(o.checkout_run_id IS NOT NULL AND o.checkout_run_id <> $1::text) OR (o.execution_run_id IS NOT NULL AND o.execution_run_id <> $1::text),
			jsonb_build_object('previousCheckoutRunId', o.checkout_run_id, 'previousExecutionRunId', o.execution_run_id,
				'why', CASE WHEN o.checkout_run_id IS NOT NULL AND o.checkout_run_id <> $1::text THEN o.c_state ELSE o.e_state END)),
		(2, 'issue.checked_out', true, jsonb_build_object('agentId', $2::text, 'runId', $1::text, 'checkoutEpoch', u.checkout_epoch))
	) AS a(ord, action, keep, details)
	WHERE a.keep ORDER BY a.ord
)
SELECT u.*,
	CASE WHEN (o.checkout_run_id IS NOT NULL AND o.checkout_run_id <> $1::text) OR (o.execution_run_id IS NOT NULL AND o.execution_run_id <> $1::text)
		THEN CASE WHEN o.checkout_run_id IS NOT NULL AND o.checkout_run_id <> $1::text THEN o.c_state ELSE o.e_state END
		ELSE '' END AS adopted_why
FROM upd u, cand o
