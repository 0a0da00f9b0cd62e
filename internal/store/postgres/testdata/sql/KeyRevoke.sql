-- $1 = @id
-- $2 = @agent
-- $3 = @actor_type
-- $4 = @actor_id
-- $5 = @actor_run
-- $6 = @actor_request
WITH k AS (
	UPDATE agent_api_keys SET revoked_at = now() WHERE id = $1::text AND agent_id = $2::text AND revoked_at IS NULL
	RETURNING id, agent_id, prefix, created_at, last_used_at, revoked_at, name
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT a.company_id, $3::text, $4::text, $5::text, $6::text, 'agent.key_revoked', 'agent', a.id,
		jsonb_build_object('keyId', k.id, 'prefix', k.prefix) FROM k JOIN agents a ON a.id = k.agent_id
)
SELECT k.id, k.agent_id, k.prefix, k.created_at, k.last_used_at, k.revoked_at, k.name, a.company_id
FROM k JOIN agents a ON a.id = k.agent_id
