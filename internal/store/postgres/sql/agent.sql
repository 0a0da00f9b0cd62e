-- Agents, their API keys, and the authentication of a key. now() is the
-- transaction's start, the database's clock. A statement that changes
-- something writes its activity row in the same statement (CTE act; the
-- actor is @actor_type, @actor_id, @actor_run, @actor_request).

-- name: AgentCreate
-- An active agent of an existing company, and its agent.created row; no
-- row when the company is missing.
WITH a AS (
	INSERT INTO agents (id, company_id, name, name_key, role, status, created_at)
	SELECT @id::text, c.id, @name::text, @name_key::text, @role::text, 'active', now() FROM companies c WHERE c.id = @company::text
	RETURNING id, company_id, name, name_key, role, status, created_at, last_heartbeat_at
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT a.company_id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, 'agent.created', 'agent', a.id,
		jsonb_build_object('name', a.name, 'role', a.role) FROM a
)
SELECT id, company_id, name, name_key, role, status, created_at, last_heartbeat_at FROM a

-- name: AgentGet
SELECT id, company_id, name, name_key, role, status, created_at, last_heartbeat_at FROM agents WHERE id = @id::text

-- name: AgentUpdate
-- Each column changes when its parameter is not NULL; one agent.updated
-- row (@changes). Terminated is final: no row for a change of a
-- terminated agent to another status.
WITH a AS (
	UPDATE agents SET
		status = coalesce(@status::text, status),
		name = coalesce(@name::text, name),
		name_key = coalesce(@name_key::text, name_key),
		role = coalesce(@role::text, role)
	WHERE id = @id::text AND NOT (status = 'terminated' AND coalesce(@status::text, status) <> 'terminated')
	RETURNING id, company_id, name, name_key, role, status, created_at, last_heartbeat_at
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT a.company_id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, 'agent.updated', 'agent', a.id,
		@changes::jsonb FROM a
)
SELECT id, company_id, name, name_key, role, status, created_at, last_heartbeat_at FROM a

-- name: AgentRevokeKeys
-- A terminated agent's keys are revoked.
UPDATE agent_api_keys SET revoked_at = now() WHERE agent_id = @agent::text AND revoked_at IS NULL

-- name: AgentEndRuns
-- The queued and running runs of an agent being terminated (lost ones
-- too) end as cancelled, guarded like a finish (the UPDATE waits for
-- checkouts holding them FOR SHARE); their locks are released next (L6).
UPDATE runs r SET
	status = 'cancelled',
	error_code = 'agent_terminated',
	error = coalesce(r.error, 'agent terminated'),
	finished_at = now()
WHERE r.agent_id = @agent::text AND r.status IN ('queued', 'running')
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at

-- name: AgentUnassignIssues
-- L6, agent terminated: every issue assigned to agent @agent that is not
-- done or cancelled loses its assignee and, as at every change of
-- assignee, both locks (its runs' ends released theirs just before; left
-- are those of runs that ended earlier and were not swept yet);
-- in_progress becomes todo (as a release, L4); checkout_epoch stays. The
-- issues are then free for any agent's checkout and claim. They are
-- locked in id order, as the sweeper and ReleaseRunLocks lock issues, and
-- re-checked on their latest version (FOR UPDATE). Per issue, issue.released {previousCheckoutRunId,
-- previousExecutionRunId, unassigned, cause} when a lock was cleared, then
-- issue.updated {changes, cause, and locksCleared, previousCheckoutRunId,
-- previousExecutionRunId when a lock was cleared}; the number of issues
-- unassigned.
WITH old AS MATERIALIZED (
	SELECT id, status, assignee_agent_id, checkout_run_id, execution_run_id FROM issues
	WHERE assignee_agent_id = @agent::text AND status NOT IN ('done', 'cancelled')
	ORDER BY id FOR UPDATE
), upd AS (
	UPDATE issues i SET
		assignee_agent_id = NULL,
		status = CASE WHEN i.status = 'in_progress' THEN 'todo' ELSE i.status END,
		checkout_run_id = NULL,
		execution_run_id = NULL,
		execution_agent_name_key = NULL,
		execution_locked_at = NULL,
		updated_at = now()
	FROM old o WHERE i.id = o.id
	RETURNING i.id, i.company_id, i.status, o.status AS old_status, o.assignee_agent_id AS old_assignee,
		o.checkout_run_id AS old_checkout, o.execution_run_id AS old_execution,
		(o.checkout_run_id IS NOT NULL OR o.execution_run_id IS NOT NULL) AS cleared
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT company_id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, action, 'issue', id, details FROM (
		SELECT u.id, 1 AS ord, u.company_id, 'issue.released' AS action,
			jsonb_build_object('previousCheckoutRunId', u.old_checkout, 'previousExecutionRunId', u.old_execution,
				'unassigned', true, 'cause', 'agent_terminated') AS details
		FROM upd u WHERE u.cleared
		UNION ALL
		SELECT u.id, 2, u.company_id, 'issue.updated',
			jsonb_build_object('changes', jsonb_build_object('assigneeAgentId', jsonb_build_object('from', u.old_assignee, 'to', NULL))
				|| CASE WHEN u.status <> u.old_status
					THEN jsonb_build_object('status', jsonb_build_object('from', u.old_status, 'to', u.status)) ELSE '{}' END,
				'cause', 'agent_terminated')
			|| CASE WHEN u.cleared THEN jsonb_build_object('locksCleared', true,
				'previousCheckoutRunId', u.old_checkout, 'previousExecutionRunId', u.old_execution) ELSE '{}' END
		FROM upd u
	) x ORDER BY id, ord
)
SELECT count(*) FROM upd

-- name: AgentHeartbeat
UPDATE agents SET last_heartbeat_at = now() WHERE id = @agent::text

-- name: KeyCreate
-- A key hash of an existing agent and its agent.key_created row, and the
-- agent's company; no row when the agent is missing.
WITH a AS (
	SELECT id, company_id FROM agents WHERE id = @agent::text
), k AS (
	INSERT INTO agent_api_keys (id, agent_id, prefix, token_hash, created_at, name)
	SELECT @id::text, a.id, @prefix::text, @hash::text, now(), @name::text FROM a
	RETURNING id, agent_id, prefix, created_at, last_used_at, revoked_at, name
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT a.company_id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, 'agent.key_created', 'agent', a.id,
		jsonb_build_object('keyId', k.id, 'prefix', k.prefix) FROM k, a
)
SELECT k.id, k.agent_id, k.prefix, k.created_at, k.last_used_at, k.revoked_at, k.name, a.company_id FROM k, a

-- name: KeyEndRuns
-- The queued and running runs opened with key @id of agent @agent, while
-- the key is unrevoked, end as cancelled (key_revoked), guarded like a
-- finish; their locks are released next, then the key is revoked
-- (KeyRevoke): whoever held the key loses every run it opened.
UPDATE runs r SET
	status = 'cancelled',
	error_code = 'key_revoked',
	error = coalesce(r.error, 'the API key it was opened with was revoked'),
	finished_at = now()
WHERE r.key_hash = (SELECT token_hash FROM agent_api_keys WHERE id = @id::text AND agent_id = @agent::text AND revoked_at IS NULL)
	AND r.status IN ('queued', 'running')
RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at

-- name: KeyRevoke
-- Revokes an unrevoked key of an agent and writes its agent.key_revoked
-- row; the key and its agent's company, no row when there is no such
-- unrevoked key.
WITH k AS (
	UPDATE agent_api_keys SET revoked_at = now() WHERE id = @id::text AND agent_id = @agent::text AND revoked_at IS NULL
	RETURNING id, agent_id, prefix, created_at, last_used_at, revoked_at, name
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT a.company_id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, 'agent.key_revoked', 'agent', a.id,
		jsonb_build_object('keyId', k.id, 'prefix', k.prefix) FROM k JOIN agents a ON a.id = k.agent_id
)
SELECT k.id, k.agent_id, k.prefix, k.created_at, k.last_used_at, k.revoked_at, k.name, a.company_id
FROM k JOIN agents a ON a.id = k.agent_id

-- name: KeyGet
SELECT id, agent_id, prefix, created_at, last_used_at, revoked_at, name FROM agent_api_keys
WHERE id = @id::text AND agent_id = @agent::text

-- name: KeyList
SELECT id, agent_id, prefix, created_at, last_used_at, revoked_at, name FROM agent_api_keys
WHERE agent_id = @agent::text ORDER BY created_at, id

-- name: KeyAuth
-- A pure read (no data-modifying CTE, so no write lock on the hot path):
-- the unrevoked key with hash @hash, whether its use is due to be
-- recorded (last recorded a minute ago or more; the caller then runs
-- KeyUsed), and its agent.
SELECT k.id, k.last_used_at IS NULL OR k.last_used_at <= now() - interval '1 minute',
	a.id, a.company_id, a.name, a.name_key, a.role, a.status, a.created_at, a.last_heartbeat_at
FROM agent_api_keys k JOIN agents a ON a.id = k.agent_id
WHERE k.token_hash = @hash::text AND k.revoked_at IS NULL

-- name: KeyAuthRun
-- KeyAuth plus run @run when it is the key's agent's, live and renewed
-- less than @min_us microseconds ago: found, then its columns (coalesced
-- to zero values when there is no such run).
SELECT k.id, k.last_used_at IS NULL OR k.last_used_at <= now() - interval '1 minute',
	a.id, a.company_id, a.name, a.name_key, a.role, a.status, a.created_at, a.last_heartbeat_at, r.id IS NOT NULL,
	coalesce(r.id, ''), coalesce(r.company_id, ''), coalesce(r.agent_id, ''), coalesce(r.status, ''),
	coalesce(r.invocation_source, ''), r.issue_id, r.retry_of_run_id, coalesce(r.attempt, 0), r.pid, r.host_id,
	r.lease_expires_at, r.last_sign_of_life_at, r.started_at, r.finished_at, r.exit_code, r.error_code, r.error,
	coalesce(r.created_at, 'epoch'::timestamptz)
FROM agent_api_keys k JOIN agents a ON a.id = k.agent_id
	LEFT JOIN runs r ON r.id = @run::text AND r.agent_id = a.id
		AND ({{run_live r}})
		AND @min_us::bigint > 0 AND r.last_sign_of_life_at > now() - @min_us::bigint * interval '1 microsecond'
WHERE k.token_hash = @hash::text AND k.revoked_at IS NULL

-- name: KeyUsed
-- Records the use of key @id at most once a minute (writes nothing when
-- the last use is recent).
UPDATE agent_api_keys SET last_used_at = now()
WHERE id = @id::text AND (last_used_at IS NULL OR last_used_at <= now() - interval '1 minute')
