UPDATE agent_api_keys SET revoked_at = :now WHERE id = :id AND agent_id = :agent AND revoked_at IS NULL
RETURNING id, agent_id, prefix, created_at, last_used_at, revoked_at, name,
	(SELECT company_id FROM agents WHERE agents.id = agent_api_keys.agent_id)
