-- Self-reported runs: opening one, its signs of life, and the
-- authentication of a run token. now() is the transaction's start, the
-- database's clock; @ttl_us is a lease in microseconds. A run is live when
-- it is queued, or running with a lease that has not expired; its state is
-- 'live', 'lost' (running, lease expired) or 'terminal'.

-- name: RunOpen
-- A running run of an active agent with a lease of @ttl_us from now, its
-- issue (a reference in the agent's company) when @issue_ref is set, the
-- agent's heartbeat, run.started, and the Idempotency-Key's record if any
-- (CTE rec). The run records @key_hash, the hash of the API key it is
-- opened with (NULL for none), so that revoking the key ends it
-- (KeyEndRuns). When @max_live is positive, the agent must have fewer
-- live runs than that; the caller holds the agent's row lock
-- (RunOpenLockAgent) since before this statement's snapshot, so the count
-- sees every run a concurrent open committed. No row when the agent is
-- missing or terminated, the issue is not found, or the agent is at its
-- live-run limit (the caller then explains).
WITH a AS (
	SELECT id, company_id FROM agents WHERE id = @agent::text AND status <> 'terminated'
		AND (@max_live::int <= 0 OR (SELECT count(*) FROM runs r WHERE r.agent_id = @agent::text
			AND ({{run_live r}})) < @max_live::int)
), iss AS (
	SELECT i.id FROM issues i JOIN a ON i.company_id = a.company_id
	WHERE @issue_ref::text <> '' AND (i.id = @rid::text OR i.identifier = @rident::text)
), made AS (
	INSERT INTO runs (id, company_id, agent_id, status, invocation_source, issue_id, attempt,
		lease_expires_at, last_sign_of_life_at, started_at, token_hash, key_hash, created_at)
	SELECT @id::text, a.company_id, a.id, 'running', @source::text, (SELECT id FROM iss), 1,
		now() + @ttl_us::bigint * interval '1 microsecond', now(), now(), @token_hash::text, @key_hash::text, now()
	FROM a WHERE @issue_ref::text = '' OR EXISTS (SELECT 1 FROM iss)
	RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
		lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
), rec AS (
	INSERT INTO idempotency_keys (actor_id, key, request_hash, resource_type, resource_id, created_at)
	SELECT @idem_actor::text, @idem_key::text, @idem_hash::text, @idem_type::text, made.id, now()
	FROM made WHERE @idem_key::text IS NOT NULL
), hb AS (
	UPDATE agents SET last_heartbeat_at = now() WHERE id IN (SELECT agent_id FROM made)
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT made.company_id, @actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text, 'run.started', 'run', made.id,
		jsonb_build_object('agentId', made.agent_id, 'issueId', made.issue_id, 'invocationSource', made.invocation_source) FROM made
)
SELECT id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at FROM made

-- name: RunOpenLockAgent
-- The row lock that serializes the opens of one agent's runs under a
-- live-run limit, taken in the open's transaction before RunOpen: a
-- second open waits here until the first commits, then counts its run.
SELECT 1 FROM agents WHERE id = @agent::text FOR UPDATE

-- name: RunReplayOpen
-- The replay of an open with an Idempotency-Key: the recorded run @id,
-- while live and holding the replay's token hash (the token given out
-- stays valid and is answered again), gets a lease renewed as by a sign of
-- life, with the agent's heartbeat. No row when it is terminal or lost, or
-- has another token hash.
WITH upd AS (
	UPDATE runs r SET
		lease_expires_at = now() + @ttl_us::bigint * interval '1 microsecond',
		last_sign_of_life_at = now()
	WHERE r.id = @id::text AND r.token_hash IS NOT DISTINCT FROM @token_hash::text
		AND ({{run_live r}})
	RETURNING r.id, r.company_id, r.agent_id, r.status, r.invocation_source, r.issue_id, r.retry_of_run_id, r.attempt, r.pid,
		r.host_id, r.lease_expires_at, r.last_sign_of_life_at, r.started_at, r.finished_at, r.exit_code, r.error_code, r.error,
		r.created_at
), hb AS (
	UPDATE agents SET last_heartbeat_at = now() WHERE id IN (SELECT agent_id FROM upd)
)
SELECT * FROM upd

-- name: RunGet
SELECT id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
FROM runs WHERE id = @id::text

-- name: RunAuth
-- The run whose token has hash @hash, whether it is live, and its agent.
SELECT r.id, r.company_id, r.agent_id, r.status, r.invocation_source, r.issue_id, r.retry_of_run_id, r.attempt, r.pid,
	r.host_id, r.lease_expires_at, r.last_sign_of_life_at, r.started_at, r.finished_at, r.exit_code, r.error_code, r.error,
	r.created_at,
	({{run_live r}}),
	a.id, a.company_id, a.name, a.name_key, a.role, a.status, a.created_at, a.last_heartbeat_at
FROM runs r JOIN agents a ON a.id = r.agent_id WHERE r.token_hash = @hash::text

-- name: RunTouch
-- A live run's sign of life renews its lease to @ttl_us from now and
-- records the agent's heartbeat, one conditional write (a run that is
-- terminal or lost is not revived). No row when run @run is not @agent's
-- or not live.
WITH upd AS (
	UPDATE runs r SET
		lease_expires_at = now() + @ttl_us::bigint * interval '1 microsecond',
		last_sign_of_life_at = now()
	WHERE r.id = @run::text AND r.agent_id = @agent::text
		AND ({{run_live r}})
	RETURNING r.id, r.company_id, r.agent_id, r.status, r.invocation_source, r.issue_id, r.retry_of_run_id, r.attempt, r.pid,
		r.host_id, r.lease_expires_at, r.last_sign_of_life_at, r.started_at, r.finished_at, r.exit_code, r.error_code, r.error,
		r.created_at
), hb AS (
	UPDATE agents SET last_heartbeat_at = now() WHERE id IN (SELECT agent_id FROM upd)
)
SELECT * FROM upd

-- name: RunRecent
-- Run @run of agent @agent while it is live and its last sign of life is
-- less than @min_us microseconds old: a sign of life may skip renewing
-- its lease. No row otherwise.
SELECT id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
FROM runs WHERE id = @run::text AND agent_id = @agent::text AND ({{run_live -}})
	AND last_sign_of_life_at > now() - @min_us::bigint * interval '1 microsecond'
