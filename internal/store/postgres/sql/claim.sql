-- Claim-next (L1): check out the most urgent issue the calling run may
-- take, picked and taken in ONE statement (one round trip).

-- name: Claim
-- Claim-next for run @run of agent @agent: unassigned issues with a status
-- in @unassigned, the agent's with a status in @mine (the expected statuses
-- plus in_progress, L1's inbox adoption case); an empty array leaves a
-- branch out (scope).
--   - CTE lk locks the caller's run FOR SHARE and checks it is live and the
--     agent's (as Checkout's lk: a concurrent finish of the run waits for
--     this statement and then clears the new lock, L6; the run is locked
--     before the issue, the order every lock rule keeps: no deadlock).
--   - CTE cand picks, for each status a claim may take (the open statuses,
--     a constant list, kept when array_position finds them in @unassigned
--     or @mine: the planner neither knows nor prunes by the arrays' values,
--     so one generic plan serves every call; with unnest of the arrays, or
--     = ANY, each call was planned anew, about 6 ms of planning for 3 ms of
--     execution on the machine of BENCHMARKS.md), the first eligible
--     issue of one ordered index range (the company's unassigned issues,
--     issues_claim_unassigned; the agent's own, issues_assignee_status),
--     FOR UPDATE SKIP LOCKED, and keeps the most urgent of those few
--     (priority_rank, created_at, id). A row another claimer holds is
--     skipped, never waited for; a row changed by a claimer that committed
--     is re-checked on its latest version (READ COMMITTED) and skipped when
--     no longer eligible. So concurrent claimers never block on or conflict
--     with each other: each takes a different issue.
--   - CTE upd checks the picked row out (it is locked: no compare-and-set
--     needed), CTE act writes issue.checkout_lock_adopted when a dead holder
--     is displaced (L3) and issue.checked_out, and the statement answers the
--     issue with the adoption reason (adopted_why, '' when none).
-- No row means nothing was eligible, or the caller's run is not live.
WITH lk AS MATERIALIZED (
	SELECT r.id, r.company_id FROM runs r
	-- L1: the caller's run is live and the agent's
	WHERE r.id = @run::text AND r.agent_id = @agent::text
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
				-- L1/L3: each lock column is empty, the caller's run, or names a dead run (scalar
				-- subqueries, looked up by primary key per locked row: a NOT EXISTS here is planned
				-- as a hash of every live run)
				AND (i.checkout_run_id IS NULL OR i.checkout_run_id = @run::text
					OR NOT coalesce((SELECT (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))
						FROM runs r WHERE r.id = i.checkout_run_id), false))
				AND (i.execution_run_id IS NULL OR i.execution_run_id = @run::text
					OR NOT coalesce((SELECT (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))
						FROM runs r WHERE r.id = i.execution_run_id), false))
				-- L2: a claim never answers what the run holds
				AND NOT (i.checkout_run_id IS NOT DISTINCT FROM @run::text AND i.execution_run_id IS NOT DISTINCT FROM @run::text)
			ORDER BY i.priority_rank, i.created_at, i.id
			LIMIT 1
			FOR UPDATE OF i SKIP LOCKED
		) p
		WHERE array_position(@unassigned::text[], s.st) IS NOT NULL
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
			WHERE i.assignee_agent_id = @agent::text AND i.company_id = lk.company_id AND i.status = s.st
				-- L1/L3: each lock column is empty, the caller's run, or names a dead run
				AND (i.checkout_run_id IS NULL OR i.checkout_run_id = @run::text
					OR NOT coalesce((SELECT (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))
						FROM runs r WHERE r.id = i.checkout_run_id), false))
				AND (i.execution_run_id IS NULL OR i.execution_run_id = @run::text
					OR NOT coalesce((SELECT (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))
						FROM runs r WHERE r.id = i.execution_run_id), false))
				-- L2: a claim never answers what the run holds
				AND NOT (i.checkout_run_id IS NOT DISTINCT FROM @run::text AND i.execution_run_id IS NOT DISTINCT FROM @run::text)
			ORDER BY i.priority_rank, i.created_at, i.id
			LIMIT 1
			FOR UPDATE OF i SKIP LOCKED
		) p
		WHERE array_position(@mine::text[], s.st) IS NOT NULL
	) x
	ORDER BY x.priority_rank, x.created_at, x.id
	LIMIT 1
),
upd AS (
	UPDATE issues i SET
		status = 'in_progress',
		assignee_agent_id = @agent::text,
		checkout_run_id = @run::text,
		execution_run_id = @run::text,
		execution_agent_name_key = (SELECT a.name_key FROM agents a WHERE a.id = @agent::text),
		execution_locked_at = now(),
		started_at = coalesce(i.started_at, now()),
		checkout_epoch = i.checkout_epoch + 1, -- always a new acquisition: cand excludes what @run holds
		updated_at = now()
	FROM cand o
	WHERE i.id = o.id
	RETURNING i.id, i.company_id, i.identifier, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
		i.checkout_run_id, i.checkout_epoch, i.execution_run_id, i.execution_agent_name_key, i.execution_locked_at,
		i.started_at, i.completed_at, i.cancelled_at, i.created_at, i.updated_at
),
act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT u.company_id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, a.action, 'issue', u.id, a.details
	FROM upd u, cand o, LATERAL (VALUES
		-- L3: a dead holder displaced; why is its checkout lock's reason first
		(1, 'issue.checkout_lock_adopted',
			(o.checkout_run_id IS NOT NULL AND o.checkout_run_id <> @run::text) OR (o.execution_run_id IS NOT NULL AND o.execution_run_id <> @run::text),
			jsonb_build_object('previousCheckoutRunId', o.checkout_run_id, 'previousExecutionRunId', o.execution_run_id,
				'why', CASE WHEN o.checkout_run_id IS NOT NULL AND o.checkout_run_id <> @run::text THEN o.c_state ELSE o.e_state END)),
		(2, 'issue.checked_out', true, jsonb_build_object('agentId', @agent::text, 'runId', @run::text, 'checkoutEpoch', u.checkout_epoch))
	) AS a(ord, action, keep, details)
	WHERE a.keep ORDER BY a.ord
)
SELECT u.*,
	CASE WHEN (o.checkout_run_id IS NOT NULL AND o.checkout_run_id <> @run::text) OR (o.execution_run_id IS NOT NULL AND o.execution_run_id <> @run::text)
		THEN CASE WHEN o.checkout_run_id IS NOT NULL AND o.checkout_run_id <> @run::text THEN o.c_state ELSE o.e_state END
		ELSE '' END AS adopted_why
FROM upd u, cand o
