-- $1 = @set_assignee
-- $2 = @assignee
-- $3 = @run
-- $4 = @rident
-- $5 = @company
-- $6 = @status
-- $7 = @board
-- $8 = @agent
-- $9 = @title
-- $10 = @description
-- $11 = @priority
-- $12 = @priority_rank
-- $13 = @comment_id
-- $14 = @comment
-- $15 = @actor_run
-- $16 = @idem_actor
-- $17 = @idem_key
-- $18 = @idem_hash
-- $19 = @idem_type
-- $20 = @actor_type
-- $21 = @actor_id
-- $22 = @actor_request
WITH old AS MATERIALIZED (
	SELECT i.id, i.company_id, i.identifier, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
		i.checkout_run_id, i.checkout_epoch, i.execution_run_id, i.execution_agent_name_key, i.execution_locked_at,
		i.started_at, i.completed_at, i.cancelled_at, i.created_at, i.updated_at, i.parent_id, i.unresolved_blocker_count, i.completed_epoch, i.relation_count, i.escalated_at, i.xmin AS ver, i.ctid AS tid,
		-- a lock column naming the caller's run takes its state from c, the row
		-- already read: no second look-up of that run
		CASE WHEN i.checkout_run_id IS NULL THEN NULL WHEN i.checkout_run_id = c.id THEN CASE
			WHEN c.status = 'queued' OR (c.status = 'running' AND c.lease_expires_at > now()) THEN 'live'
			WHEN c.status = 'running' THEN 'lost' ELSE 'terminal' END ELSE coalesce((SELECT CASE
			WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()) THEN 'live'
			WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.checkout_run_id), 'missing') END AS c_state,
		CASE WHEN i.execution_run_id IS NULL THEN NULL WHEN i.execution_run_id = c.id THEN CASE
			WHEN c.status = 'queued' OR (c.status = 'running' AND c.lease_expires_at > now()) THEN 'live'
			WHEN c.status = 'running' THEN 'lost' ELSE 'terminal' END ELSE coalesce((SELECT CASE
			WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()) THEN 'live'
			WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END FROM runs r WHERE r.id = i.execution_run_id), 'missing') END AS e_state,
		c.agent_id AS caller_agent, c.company_id AS caller_company,
		CASE WHEN c.id IS NOT NULL THEN CASE
			WHEN c.status = 'queued' OR (c.status = 'running' AND c.lease_expires_at > now()) THEN 'live'
			WHEN c.status = 'running' THEN 'lost' ELSE 'terminal' END END AS caller_state,
		(NOT $1::boolean OR $2::text IS NULL
			OR EXISTS (SELECT 1 FROM agents a WHERE a.id = $2::text AND a.company_id = i.company_id)) AS assignee_in_company
	FROM issues i LEFT JOIN runs c ON c.id = $3::text
	WHERE i.identifier = $4::text AND ($5::text = '' OR i.company_id IS NOT DISTINCT FROM $5::text)
),
f AS MATERIALIZED (
	SELECT o.id,
		(o.checkout_run_id IS NOT NULL OR o.execution_run_id IS NOT NULL) AS locked,
		-- L6: the PATCH moves the issue out of in_progress or changes its assignee
		(coalesce($6::text, o.status) <> 'in_progress'
			OR ($1::boolean AND $2::text IS DISTINCT FROM o.assignee_agent_id)) AS releases,
		-- L5/L3: an agent's run writes over lock columns that are not all its own
		-- (d checks that the others name dead runs): it takes both over
		(NOT $7::boolean AND (o.checkout_run_id IS NOT NULL OR o.execution_run_id IS NOT NULL)
			AND NOT (o.checkout_run_id IS NOT DISTINCT FROM $3::text AND o.execution_run_id IS NOT DISTINCT FROM $3::text)) AS adopts,
		-- L5: the owner: the caller's run is live, the agent's and in the issue's company; each lock
		-- column is empty, the run, or names a dead run; and the run holds a lock or the agent is
		-- the assignee adopting a dead holder (L3)
		coalesce(o.caller_state = 'live' AND o.caller_agent = $8::text AND o.caller_company = o.company_id
			AND (o.checkout_run_id IS NULL OR o.checkout_run_id = $3::text OR o.c_state <> 'live')
			AND (o.execution_run_id IS NULL OR o.execution_run_id = $3::text OR o.e_state <> 'live')
			AND (o.checkout_run_id = $3::text OR o.execution_run_id = $3::text OR o.assignee_agent_id = $8::text),
			false) AS owned_by_caller
	FROM old o
),
d AS MATERIALIZED (
	SELECT o.id, coalesce(
		-- L5: the board, an unlocked issue, or the owner
		($7::boolean OR NOT f.locked OR f.owned_by_caller)
		-- L5: entering in_progress takes an assignee
		AND NOT ($6::text IS NOT DISTINCT FROM 'in_progress' AND o.status <> 'in_progress'
			AND (CASE WHEN $1::boolean THEN $2::text ELSE o.assignee_agent_id END) IS NULL)
		-- L5: a new assignee is an agent of the issue's company
		AND o.assignee_in_company
		-- D1/D2: entering in_progress or done takes every blocker done
		AND NOT coalesce($6::text IN ('in_progress', 'done') AND $6::text <> o.status AND o.unresolved_blocker_count > 0, false)
		-- E4: only a person moves an escalated issue out of blocked
		AND ($7::boolean OR o.escalated_at IS NULL OR coalesce($6::text, o.status) = 'blocked'),
		false) AS ok
	FROM old o JOIN f ON f.id = o.id
),
lk AS MATERIALIZED (
	SELECT r.id FROM runs r, d, f
	WHERE d.ok AND f.adopts AND NOT f.releases
		AND r.id = $3::text AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))
	FOR SHARE OF r
),
upd AS (
	UPDATE issues i SET
		title = coalesce($9::text, i.title),
		description = coalesce($10::text, i.description),
		priority = coalesce($11::text, i.priority),
		priority_rank = coalesce($12::integer, i.priority_rank),
		status = coalesce($6::text, i.status),
		assignee_agent_id = CASE WHEN $1::boolean THEN $2::text ELSE i.assignee_agent_id END,
		started_at = CASE WHEN $6::text = 'in_progress' THEN coalesce(i.started_at, now()) ELSE i.started_at END,
		completed_at = CASE WHEN $6::text = 'done' AND i.status <> 'done' THEN now() ELSE i.completed_at END,
		-- the fencing epoch the work was completed under (gate G2): set by the
		-- statement that moves the issue to done, cleared when it leaves done
		completed_epoch = CASE WHEN $6::text = 'done' AND i.status <> 'done' THEN i.checkout_epoch
			WHEN coalesce($6::text, i.status) <> 'done' THEN NULL ELSE i.completed_epoch END,
		cancelled_at = CASE WHEN $6::text = 'cancelled' AND i.status <> 'cancelled' THEN now() ELSE i.cancelled_at END,
		-- L6 clears, L5/L3 adoption takes over, otherwise unchanged
		checkout_run_id = CASE WHEN f.releases THEN NULL WHEN f.adopts THEN $3::text ELSE i.checkout_run_id END,
		execution_run_id = CASE WHEN f.releases THEN NULL WHEN f.adopts THEN $3::text ELSE i.execution_run_id END,
		execution_agent_name_key = CASE WHEN f.releases THEN NULL
			WHEN f.adopts THEN (SELECT a.name_key FROM agents a WHERE a.id = $8::text)
			ELSE i.execution_agent_name_key END,
		execution_locked_at = CASE WHEN f.releases THEN NULL WHEN f.adopts THEN now() ELSE i.execution_locked_at END,
		checkout_epoch = CASE WHEN NOT f.releases AND f.adopts THEN i.checkout_epoch + 1 ELSE i.checkout_epoch END,
		updated_at = now()
	FROM old o JOIN d ON d.id = o.id JOIN f ON f.id = o.id
	WHERE i.ctid = o.tid AND i.id = o.id AND i.xmin = o.ver AND d.ok
		-- L5/L3: an adoption takes the locks for a run still live (lk)
		AND (NOT f.adopts OR f.releases OR EXISTS (SELECT 1 FROM lk))
	RETURNING i.id, i.company_id, i.identifier, i.title, i.description, i.status, i.priority, i.assignee_agent_id,
		i.checkout_run_id, i.checkout_epoch, i.execution_run_id, i.execution_agent_name_key, i.execution_locked_at,
		i.started_at, i.completed_at, i.cancelled_at, i.created_at, i.updated_at, i.parent_id, i.unresolved_blocker_count, i.completed_epoch, i.relation_count
),
-- [comment or Idempotency-Key
com AS (
	INSERT INTO comments (id, company_id, issue_id, body, author_agent_id, author_board, run_id, created_at)
	SELECT $13::text, u.company_id, u.id, $14::text, nullif($8::text, ''), $7::boolean, $15::text, now()
	FROM upd u WHERE $14::text IS NOT NULL
),
rec AS (
	-- the Idempotency-Key's record names the issue upd wrote; nothing when it wrote nothing
	INSERT INTO idempotency_keys (actor_id, key, request_hash, resource_type, resource_id, created_at)
	SELECT $16::text, $17::text, $18::text, $19::text, upd.id, now()
	FROM upd WHERE $17::text IS NOT NULL
),
-- ]
act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT u.company_id, $20::text, $21::text, $15::text, $22::text, a.action, 'issue', u.id, a.details
	FROM upd u JOIN old o ON o.id = u.id JOIN f ON f.id = u.id,
	LATERAL (SELECT f.locked AND u.checkout_run_id IS NULL AND u.execution_run_id IS NULL AS cleared,
		$3::text <> '' AND f.locked
			AND NOT (o.checkout_run_id IS NOT DISTINCT FROM $3::text AND o.execution_run_id IS NOT DISTINCT FROM $3::text)
			AND u.checkout_run_id IS NOT DISTINCT FROM $3::text AS adopted) c,
	LATERAL (VALUES
		(1, 'issue.released', c.cleared,
			jsonb_build_object('previousCheckoutRunId', o.checkout_run_id, 'previousExecutionRunId', o.execution_run_id,
				'unassigned', coalesce($1::boolean AND $2::text IS NULL, false), 'cause', 'update')),
		(2, 'issue.checkout_lock_adopted',
			c.adopted AND ((o.checkout_run_id IS NOT NULL AND o.checkout_run_id <> $3::text)
				OR (o.execution_run_id IS NOT NULL AND o.execution_run_id <> $3::text)),
			jsonb_build_object('previousCheckoutRunId', o.checkout_run_id, 'previousExecutionRunId', o.execution_run_id,
				'why', CASE WHEN o.checkout_run_id IS NOT NULL AND o.checkout_run_id <> $3::text THEN o.c_state ELSE o.e_state END)),
		(3, 'issue.checked_out', c.adopted, jsonb_build_object('agentId', $8::text, 'runId', $3::text, 'checkoutEpoch', u.checkout_epoch)),
		(4, 'issue.updated', true, jsonb_build_object('changes',
			CASE WHEN o.title <> u.title
				THEN jsonb_build_object('title', jsonb_build_object('from', o.title, 'to', u.title)) ELSE '{}'::jsonb END
			|| CASE WHEN o.description <> u.description
				THEN jsonb_build_object('description', jsonb_build_object('from', left(o.description, 200), 'to', left(u.description, 200))) ELSE '{}'::jsonb END
			|| CASE WHEN o.status <> u.status
				THEN jsonb_build_object('status', jsonb_build_object('from', o.status, 'to', u.status)) ELSE '{}'::jsonb END
			|| CASE WHEN o.priority <> u.priority
				THEN jsonb_build_object('priority', jsonb_build_object('from', o.priority, 'to', u.priority)) ELSE '{}'::jsonb END
			|| CASE WHEN o.assignee_agent_id IS DISTINCT FROM u.assignee_agent_id
				THEN jsonb_build_object('assigneeAgentId', jsonb_build_object('from', o.assignee_agent_id, 'to', u.assignee_agent_id)) ELSE '{}'::jsonb END)
			|| CASE WHEN c.cleared THEN jsonb_build_object('locksCleared', true,
				'previousCheckoutRunId', o.checkout_run_id, 'previousExecutionRunId', o.execution_run_id) ELSE '{}'::jsonb END)
		-- [comment or Idempotency-Key
		, (5, 'issue.commented', $14::text IS NOT NULL, jsonb_build_object('commentId', $13::text))
		-- ]
	) AS a(ord, action, keep, details)
	WHERE a.keep ORDER BY a.ord
)
SELECT x.*, o.status AS old_status, o.assignee_agent_id AS old_assignee,
	o.checkout_run_id AS old_checkout, o.execution_run_id AS old_execution, o.c_state AS checkout_state, o.e_state AS execution_state,
	o.caller_agent, o.caller_company, o.caller_state,
	f.owned_by_caller, NULL::boolean AS agent_active, o.assignee_in_company, d.ok,
	-- ok, an adoption, but lk found the run no longer live: nothing was written
	NOT x.changed AND d.ok AND f.adopts AND NOT f.releases AND NOT EXISTS (SELECT 1 FROM lk) AS run_ended,
	o.escalated_at IS NOT NULL AS escalated
FROM old o JOIN d ON d.id = o.id JOIN f ON f.id = o.id CROSS JOIN LATERAL (
	SELECT true AS changed, u.* FROM upd u
	UNION ALL
	SELECT false, o.id, o.company_id, o.identifier, o.title, o.description, o.status, o.priority, o.assignee_agent_id,
		o.checkout_run_id, o.checkout_epoch, o.execution_run_id, o.execution_agent_name_key, o.execution_locked_at,
		o.started_at, o.completed_at, o.cancelled_at, o.created_at, o.updated_at, o.parent_id, o.unresolved_blocker_count, o.completed_epoch, o.relation_count
	WHERE NOT EXISTS (SELECT 1 FROM upd)
) x
