SELECT k.id, k.last_used_at IS NULL OR k.last_used_at <= :now - 60000000,
	a.id, a.company_id, a.name, a.name_key, a.role, a.status, a.created_at, a.last_heartbeat_at
FROM agent_api_keys k JOIN agents a ON a.id = k.agent_id
WHERE k.token_hash = :hash AND k.revoked_at IS NULL
