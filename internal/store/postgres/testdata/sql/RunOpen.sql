-- $1 = @agent
-- $2 = @issue_ref
-- $3 = @rid
-- $4 = @rident
-- $5 = @id
-- $6 = @source
-- $7 = @ttl_us
-- $8 = @token_hash
-- $9 = @idem_actor
-- $10 = @idem_key
-- $11 = @idem_hash
-- $12 = @idem_type
-- $13 = @actor_type
-- $14 = @actor_id
-- $15 = @actor_run
-- $16 = @actor_request
WITH a AS (
	SELECT id, company_id FROM agents WHERE id = $1::text AND status <> 'terminated'
), iss AS (
	SELECT i.id FROM issues i JOIN a ON i.company_id = a.company_id
	WHERE $2::text <> '' AND (i.id = $3::text OR i.identifier = $4::text)
), made AS (
	INSERT INTO runs (id, company_id, agent_id, status, invocation_source, issue_id, attempt,
		lease_expires_at, last_sign_of_life_at, started_at, token_hash, created_at)
	SELECT $5::text, a.company_id, a.id, 'running', $6::text, (SELECT id FROM iss), 1,
		now() + $7::bigint * interval '1 microsecond', now(), now(), $8::text, now()
	FROM a WHERE $2::text = '' OR EXISTS (SELECT 1 FROM iss)
	RETURNING id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
		lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at
), rec AS (
	INSERT INTO idempotency_keys (actor_id, key, request_hash, resource_type, resource_id, created_at)
	SELECT $9::text, $10::text, $11::text, $12::text, made.id, now()
	FROM made WHERE $10::text IS NOT NULL
), hb AS (
	UPDATE agents SET last_heartbeat_at = now() WHERE id IN (SELECT agent_id FROM made)
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT made.company_id, $13::text, $14::text, $15::text, $16::text, 'run.started', 'run', made.id,
		jsonb_build_object('agentId', made.agent_id, 'issueId', made.issue_id, 'invocationSource', made.invocation_source) FROM made
)
SELECT id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
	lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at FROM made
