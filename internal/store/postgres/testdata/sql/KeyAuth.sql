-- $1 = @hash
WITH k AS (
	SELECT k.id AS key_id, a.id, a.company_id, a.name, a.name_key, a.role, a.status, a.created_at, a.last_heartbeat_at
	FROM agent_api_keys k JOIN agents a ON a.id = k.agent_id
	WHERE k.token_hash = $1::text AND k.revoked_at IS NULL
), used AS (
	UPDATE agent_api_keys SET last_used_at = now()
	WHERE id IN (SELECT key_id FROM k WHERE status <> 'terminated')
		AND (last_used_at IS NULL OR last_used_at <= now() - interval '1 minute')
)
SELECT id, company_id, name, name_key, role, status, created_at, last_heartbeat_at FROM k
