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
		AND ({{run_live r}})
	FOR SHARE OF r
),
cand AS MATERIALIZED (
	SELECT x.* FROM (
		SELECT p.* FROM lk CROSS JOIN unnest('{backlog,todo,in_progress,in_review,blocked}'::text[]) AS s(st) CROSS JOIN LATERAL (
			SELECT i.id, i.priority_rank, i.created_at, i.checkout_run_id, i.execution_run_id,
				CASE WHEN i.checkout_run_id IS NOT NULL THEN coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS c_state,
				CASE WHEN i.execution_run_id IS NOT NULL THEN coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state
			FROM issues i
			-- L1: unassigned, in the run's company, with a status the claim takes
			WHERE i.company_id = lk.company_id AND i.assignee_agent_id IS NULL AND i.status = s.st
				-- D7: every blocker done (the partial index holds no other issue)
				AND i.unresolved_blocker_count = 0
				AND i.escalated_at IS NULL -- E3: no agent takes an escalated issue
				-- L1/L3: each lock column is empty, the caller's run, or names a dead run (scalar
				-- subqueries, looked up by primary key per locked row: a NOT EXISTS here is planned
				-- as a hash of every live run)
				AND (i.checkout_run_id IS NULL OR i.checkout_run_id = @run::text
					OR NOT coalesce((SELECT ({{run_live r}})
						FROM runs r WHERE r.id = i.checkout_run_id), false))
				AND (i.execution_run_id IS NULL OR i.execution_run_id = @run::text
					OR NOT coalesce((SELECT ({{run_live r}})
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
				CASE WHEN i.checkout_run_id IS NOT NULL THEN coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS c_state,
				CASE WHEN i.execution_run_id IS NOT NULL THEN coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state
			FROM issues i
			-- L1: the agent's, in the run's company, with a status the claim takes
			WHERE i.assignee_agent_id = @agent::text AND i.company_id = lk.company_id AND i.status = s.st
				-- D7: every blocker done, unless it is in_progress and the agent's already (adoption)
				AND (i.unresolved_blocker_count = 0 OR i.status = 'in_progress')
				AND i.escalated_at IS NULL -- E3: no agent takes an escalated issue
				-- L1/L3: each lock column is empty, the caller's run, or names a dead run
				AND (i.checkout_run_id IS NULL OR i.checkout_run_id = @run::text
					OR NOT coalesce((SELECT ({{run_live r}})
						FROM runs r WHERE r.id = i.checkout_run_id), false))
				AND (i.execution_run_id IS NULL OR i.execution_run_id = @run::text
					OR NOT coalesce((SELECT ({{run_live r}})
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
		i.started_at, i.completed_at, i.cancelled_at, i.created_at, i.updated_at, i.parent_id, i.unresolved_blocker_count, i.completed_epoch, i.relation_count
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

-- name: ClaimSeen
-- Whether run @run of agent @agent, live, sees an issue that statement
-- Claim with the same @unassigned and @mine would take, ignoring row locks:
-- a read of Claim's cand predicates (the same two branches, per status, by
-- the same indexes) with no FOR UPDATE. Claim skips a row another
-- statement has locked (SKIP LOCKED), and a concurrent claimer locks the
-- first eligible row of each status it walks while it keeps only one, so
-- Claim can find nothing while an eligible issue is free a moment later.
-- IssueClaim asks this after such an empty Claim and tries again while it
-- answers true: a claim answers no issue only when none is eligible. It
-- locks nothing and writes nothing.
WITH lk AS (
	SELECT r.company_id FROM runs r
	WHERE r.id = @run::text AND r.agent_id = @agent::text
		AND ({{run_live r}})
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
			AND (i.checkout_run_id IS NULL OR i.checkout_run_id = @run::text
				OR NOT coalesce((SELECT ({{run_live r}})
					FROM runs r WHERE r.id = i.checkout_run_id), false))
			AND (i.execution_run_id IS NULL OR i.execution_run_id = @run::text
				OR NOT coalesce((SELECT ({{run_live r}})
					FROM runs r WHERE r.id = i.execution_run_id), false))
			-- L2: a claim never answers what the run holds
			AND NOT (i.checkout_run_id IS NOT DISTINCT FROM @run::text AND i.execution_run_id IS NOT DISTINCT FROM @run::text)
		ORDER BY i.priority_rank, i.created_at, i.id
		LIMIT 1
	) p
	WHERE array_position(@unassigned::text[], s.st) IS NOT NULL
) OR EXISTS (
	SELECT 1 FROM lk CROSS JOIN unnest('{backlog,todo,in_progress,in_review,blocked}'::text[]) AS s(st) CROSS JOIN LATERAL (
		SELECT 1 FROM issues i
		-- L1: the agent's, in the run's company, with a status the claim takes
		WHERE i.assignee_agent_id = @agent::text AND i.company_id = lk.company_id AND i.status = s.st
				-- D7: every blocker done, unless it is in_progress and the agent's already (adoption)
				AND (i.unresolved_blocker_count = 0 OR i.status = 'in_progress')
				AND i.escalated_at IS NULL -- E3: no agent takes an escalated issue
			-- L1/L3: each lock column is empty, the caller's run, or names a dead run
			AND (i.checkout_run_id IS NULL OR i.checkout_run_id = @run::text
				OR NOT coalesce((SELECT ({{run_live r}})
					FROM runs r WHERE r.id = i.checkout_run_id), false))
			AND (i.execution_run_id IS NULL OR i.execution_run_id = @run::text
				OR NOT coalesce((SELECT ({{run_live r}})
					FROM runs r WHERE r.id = i.execution_run_id), false))
			-- L2: a claim never answers what the run holds
			AND NOT (i.checkout_run_id IS NOT DISTINCT FROM @run::text AND i.execution_run_id IS NOT DISTINCT FROM @run::text)
		ORDER BY i.priority_rank, i.created_at, i.id
		LIMIT 1
	) p
	WHERE array_position(@mine::text[], s.st) IS NOT NULL
)

-- name: ClaimBatch
-- Claim-next of unassigned issues for several calls at once (IssueClaim's
-- batch of concurrent claims with scope unassigned): unassigned issues of
-- company @company with a status in @unassigned. Call k (1-based, the
-- order the calls arrived in) is run @runs[k] of agent @agents[k]; its
-- activity rows carry actor @actor_types[k]/@actor_ids[k], run
-- @actor_runs[k] and request @actor_requests[k] ('' for none, stored as
-- NULL). One statement and one transaction for the whole batch: one walk
-- of issues_claim_unassigned and one commit instead of one per call.
--   - CTE lk locks the calls' runs FOR SHARE that are live, in run id
--     order (LockRows over the ordered read): two batches, or a batch and
--     any lock rule, take run locks in one order, runs before issues, so
--     they never deadlock; a concurrent finish of a run waits for this
--     statement and then clears the new lock (L6), as for Claim. CTE calls
--     keeps the calls whose run is live, the agent's and of @company (L1).
--   - CTE cand picks, for each status a claim may take (the constant list
--     kept by array_position, as in Claim: one generic plan), up to as
--     many issues as calls has rows, from one ordered range of
--     issues_claim_unassigned, FOR UPDATE SKIP LOCKED: unassigned, in
--     @company, each lock column empty, naming a dead run, or naming one
--     of @runs (L1/L3). A row another statement holds is skipped, never
--     waited for. The range is read under a constant LIMIT of
--     store.ClaimBatchMax, and the count of calls limits it from outside: with
--     the count as the only limit the planner, which cannot see its value,
--     costs the read as a tenth of the range (8 million cost units in a
--     company of a million issues), and PostgreSQL then JIT-compiled each
--     statement, over a second of CPU for a statement that runs in a
--     millisecond. LockRows locks only the rows the outer LIMIT pulls.
--   - A row of cand that names a live run (one of the calls', c_state or
--     e_state 'live') is eligible for that call only (Claim's "the
--     caller's run" case, with L2's exclusion), so CTE kept leaves such a
--     call out (IssueClaim answers it with statement Claim) and the row
--     is never given to another. An issue naming the run of a call kept
--     is therefore after every row cand read in claim order: less urgent
--     than what the call is given, as for Claim.
--   - CTE pick numbers the rows naming no live run in claim order
--     (priority_rank, created_at, id; FOR UPDATE cannot sit under a window
--     function, so the numbering is outside cand) and pairs the k-th with
--     the k-th kept call: the calls, in arrival order, get the issues in
--     claim order, as the same calls made one after the other would. Rows
--     cand locked and pick does not pair stay untouched.
--   - CTE upd checks each paired row out for its call (Claim's SET, with
--     the call's agent, run and the agent's name key), act writes per
--     pair, call after call, issue.checkout_lock_adopted when a dead
--     holder is displaced (L3) and issue.checked_out, each with its call's
--     actor, run and request, and the statement answers one row per call
--     served: its number in @runs (ord), the issue, adopted_why ('' when
--     none). A call without a row was not served.
WITH lk AS MATERIALIZED (
	SELECT r.id, r.agent_id, r.company_id FROM runs r
	-- L1: the run is live
	WHERE r.id = ANY(@runs::text[])
		AND ({{run_live r}})
	ORDER BY r.id
	FOR SHARE OF r
),
calls AS MATERIALIZED (
	SELECT c.ord, c.run, c.agent, c.actor_type, c.actor_id, c.actor_run, c.actor_request,
		(SELECT a.name_key FROM agents a WHERE a.id = c.agent) AS name_key
	FROM unnest(@runs::text[], @agents::text[], @actor_types::text[], @actor_ids::text[], @actor_runs::text[], @actor_requests::text[])
		WITH ORDINALITY AS c(run, agent, actor_type, actor_id, actor_run, actor_request, ord)
	-- L1: the run is live (lk), the agent's and of the company
	JOIN lk ON lk.id = c.run AND lk.agent_id = c.agent AND lk.company_id = @company::text
),
cand AS MATERIALIZED (
	SELECT p.* FROM unnest('{backlog,todo,in_progress,in_review,blocked}'::text[]) AS s(st) CROSS JOIN LATERAL (
		SELECT q.* FROM (
		SELECT i.id, i.priority_rank, i.created_at, i.checkout_run_id, i.execution_run_id,
			CASE WHEN i.checkout_run_id IS NOT NULL THEN coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS c_state,
			CASE WHEN i.execution_run_id IS NOT NULL THEN coalesce((SELECT {{run_state r}} FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state
		FROM issues i
		-- L1: unassigned, in the company, with a status the claim takes
		WHERE i.company_id = @company::text AND i.assignee_agent_id IS NULL AND i.status = s.st
			-- D7: every blocker done (the partial index holds no other issue)
			AND i.unresolved_blocker_count = 0
			AND i.escalated_at IS NULL -- E3: no agent takes an escalated issue
			-- L1/L3: each lock column is empty, a call's run, or names a dead run (scalar
			-- subqueries by primary key, as in Claim)
			AND (i.checkout_run_id IS NULL OR i.checkout_run_id = ANY(@runs::text[])
				OR NOT coalesce((SELECT ({{run_live r}})
					FROM runs r WHERE r.id = i.checkout_run_id), false))
			AND (i.execution_run_id IS NULL OR i.execution_run_id = ANY(@runs::text[])
				OR NOT coalesce((SELECT ({{run_live r}})
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
	WHERE array_position(@unassigned::text[], s.st) IS NOT NULL
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
