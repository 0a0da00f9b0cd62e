-- $1 = @agent
-- $2 = @id
-- $3 = @prefix
-- $4 = @hash
-- $5 = @name
-- $6 = @actor_type
-- $7 = @actor_id
-- $8 = @actor_run
-- $9 = @actor_request
WITH a AS (
	SELECT id, company_id FROM agents WHERE id = $1::text
), k AS (
	INSERT INTO agent_api_keys (id, agent_id, prefix, token_hash, created_at, name)
	SELECT $2::text, a.id, $3::text, $4::text, now(), $5::text FROM a
	RETURNING id, agent_id, prefix, created_at, last_used_at, revoked_at, name
), act AS (
	INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details)
	SELECT a.company_id, $6::text, $7::text, $8::text, $9::text, 'agent.key_created', 'agent', a.id,
		jsonb_build_object('keyId', k.id, 'prefix', k.prefix) FROM k, a
)
SELECT k.id, k.agent_id, k.prefix, k.created_at, k.last_used_at, k.revoked_at, k.name, a.company_id FROM k, a
