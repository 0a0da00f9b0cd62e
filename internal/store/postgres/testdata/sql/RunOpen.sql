-- $1 = @agent
-- $2 = @max_live
-- $3 = @issue_ref
-- $4 = @rid
-- $5 = @rident
-- $6 = @id
-- $7 = @source
-- $8 = @ttl_us
-- $9 = @token_hash
-- $10 = @key_hash
-- $11 = @idem_actor
-- $12 = @idem_key
-- $13 = @idem_hash
-- $14 = @idem_type
-- $15 = @actor_type
-- $16 = @actor_id
-- $17 = @actor_run
-- $18 = @actor_request
WITH a AS (
	SELECT id, company_id FROM agents WHERE id = $1::text AND status <> 'terminated'
		AND ($2::int <= 0 OR (SELECT count(*) FROM runs r WHERE r.agent_id = $1::text
			AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()))) < $2::int)
), iss AS (
	SELECT i.id FROM issues i JOIN a ON i.company_id = a.company_id
	WHERE $3::text <> '' AND (i.id = $4::text OR i.identifier = $5::text)
), made AS (
	INSERT INTO runs (id, company_id, agent_id, status, invocation_source, issue_id, attempt,
		lease_expires_at, last_sign_of_life_at, started_at, token_hash, key_hash, created_at)
	SELECT $6::text, a.company_id, a.id, 'running', $7::text, (SELECT id FROM iss), 1,
		now() + $8::bigint * interval '1 microsecond', now(), now(), $9::text, $10::text, now()
	FROM a WHERE $3::text = '' OR EXISTS (SELECT 1 FROM iss)
	RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
		lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
), rec AS (
	INSERT INTO idempotency_keys (actor_id, key, request_hash, resource_type, resource_id, created_at)
	SELECT $11::text, $12::text, $13::text, $14::text, made.id, now()
	FROM made WHERE $12::text IS NOT NULL
), hb AS (
	UPDATE agents SET last_heartbeat_at = now() WHERE id IN (SELECT agent_id FROM made)
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT made.company_id, $15::text, $16::text, $17::text, $18::text, 'run.started', 'run', made.id,
		jsonb_build_object('agentId', made.agent_id, 'issueId', made.issue_id, 'invocationSource', made.invocation_source) FROM made
)
SELECT id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at FROM made
