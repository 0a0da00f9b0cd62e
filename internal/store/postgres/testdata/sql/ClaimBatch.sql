-- $1 = @runs
-- $2 = @agents
-- $3 = @actor_types
-- $4 = @actor_ids
-- $5 = @actor_runs
-- $6 = @actor_requests
-- $7 = @company
-- $8 = @unassigned
WITH lk AS MATERIALIZED (
	SELECT r.id, r.agent_id, r.company_id FROM runs r
	-- L1: the run is live
	WHERE r.id = ANY($1::text[])
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))
	ORDER BY r.id
	FOR SHARE OF r
),
calls AS MATERIALIZED (
	SELECT c.ord, c.run, c.agent, c.actor_type, c.actor_id, c.actor_run, c.actor_request,
		(SELECT a.name_key FROM agents a WHERE a.id = c.agent) AS name_key
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
		WITH ORDINALITY AS c(run, agent, actor_type, actor_id, actor_run, actor_request, ord)
	-- L1: the run is live (lk), the agent's and of the company
	JOIN lk ON lk.id = c.run AND lk.agent_id = c.agent AND lk.company_id = $7::text
),
cand AS MATERIALIZED (
	SELECT p.* FROM unnest('{backlog,todo,in_progress,in_review,blocked}'::text[]) AS s(st) CROSS JOIN LATERAL (
		SELECT q.* FROM (
		SELECT i.id, i.priority_rank, i.created_at, i.checkout_run_id, i.execution_run_id,
			CASE WHEN i.checkout_run_id IS NOT NULL THEN coalesce((SELECT CASE
				WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()) THEN 'live'
				WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS c_state,
			CASE WHEN i.execution_run_id IS NOT NULL THEN coalesce((SELECT CASE
				WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()) THEN 'live'
				WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state
		FROM issues i
		-- L1: unassigned, in the company, with a status the claim takes
		WHERE i.company_id = $7::text AND i.assignee_agent_id IS NULL AND i.status = s.st
			-- D7: every blocker done (the partial index holds no other issue)
			AND i.unresolved_blocker_count = 0
			AND i.escalated_at IS NULL -- E3: no agent takes an escalated issue
			-- L1/L3: each lock column is empty, a call's run, or names a dead run (scalar
			-- subqueries by primary key, as in Claim)
			AND (i.checkout_run_id IS NULL OR i.checkout_run_id = ANY($1::text[])
				OR NOT coalesce((SELECT (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))
					FROM runs r WHERE r.id = i.checkout_run_id), false))
			AND (i.execution_run_id IS NULL OR i.execution_run_id = ANY($1::text[])
				OR NOT coalesce((SELECT (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))
					FROM runs r WHERE r.id = i.execution_run_id), false))
		ORDER BY i.priority_rank, i.created_at, i.id
		LIMIT 64 -- ClaimBatchMax: a constant the planner sees
		FOR UPDATE OF i SKIP LOCKED
		) q
		-- LockRows locks a row only when this LIMIT pulls it, in the inner
		-- ORDER BY's order (a subquery scan passes rows on as they come):
		-- the first rows, as many as calls
		LIMIT (SELECT count(*) FROM calls)
	) p
	WHERE array_position($8::text[], s.st) IS NOT NULL
),
kept AS MATERIALIZED (
	SELECT c.*, row_number() OVER (ORDER BY c.ord) AS k FROM calls c
	-- L1/L3: no row read names the call's own run (Claim answers it)
	WHERE NOT EXISTS (SELECT 1 FROM cand x WHERE (x.c_state = 'live' AND x.checkout_run_id = c.run)
		OR (x.e_state = 'live' AND x.execution_run_id = c.run))
),
pick AS MATERIALIZED (
	SELECT x.*, c.ord, c.run, c.agent, c.name_key, c.actor_type, c.actor_id, c.actor_run, c.actor_request
	FROM (SELECT cand.*, row_number() OVER (ORDER BY cand.priority_rank, cand.created_at, cand.id) AS k FROM cand
		WHERE cand.c_state IS DISTINCT FROM 'live' AND cand.e_state IS DISTINCT FROM 'live') x
	JOIN kept c ON c.k = x.k
),
upd AS (
	UPDATE issues i SET
		status = 'in_progress',
		assignee_agent_id = o.agent,
		checkout_run_id = o.run,
		execution_run_id = o.run,
		execution_agent_name_key = o.name_key,
		execution_locked_at = now(),
		started_at = coalesce(i.started_at, now()),
		checkout_epoch = i.checkout_epoch + 1, -- always a new acquisition: pick never pairs a row naming a live run
		updated_at = now()
	FROM pick o
	WHERE i.id = o.id
	RETURNING o.ord, i.id, i.company_id, i.identifier, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
		i.checkout_run_id, i.checkout_epoch, i.execution_run_id, i.execution_agent_name_key, i.execution_locked_at,
		i.started_at, i.completed_at, i.cancelled_at, i.created_at, i.updated_at, i.parent_id, i.unresolved_blocker_count, i.completed_epoch, i.relation_count
),
act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT u.company_id, o.actor_type, o.actor_id, nullif(o.actor_run, ''), nullif(o.actor_request, ''), a.action, 'issue', u.id, a.details
	FROM upd u JOIN pick o ON o.id = u.id, LATERAL (VALUES
		-- L3: a dead holder displaced; why is its checkout lock's reason first
		(1, 'issue.checkout_lock_adopted',
			o.checkout_run_id IS NOT NULL OR o.execution_run_id IS NOT NULL,
			jsonb_build_object('previousCheckoutRunId', o.checkout_run_id, 'previousExecutionRunId', o.execution_run_id,
				'why', CASE WHEN o.checkout_run_id IS NOT NULL THEN o.c_state ELSE o.e_state END)),
		(2, 'issue.checked_out', true, jsonb_build_object('agentId', o.agent, 'runId', o.run, 'checkoutEpoch', u.checkout_epoch))
	) AS a(ord, action, keep, details)
	WHERE a.keep ORDER BY o.ord, a.ord
)
SELECT u.*,
	CASE WHEN o.checkout_run_id IS NOT NULL THEN o.c_state WHEN o.execution_run_id IS NOT NULL THEN o.e_state ELSE '' END AS adopted_why
FROM upd u JOIN pick o ON o.id = u.id
ORDER BY u.ord
