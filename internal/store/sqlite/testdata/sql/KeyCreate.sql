INSERT INTO agent_api_keys (id, agent_id, prefix, token_hash, created_at, name)
SELECT :id, a.id, :prefix, :hash, :now, :name FROM agents a WHERE a.id = :agent
RETURNING id, agent_id, prefix, created_at, last_used_at, revoked_at, name,
	(SELECT company_id FROM agents WHERE agents.id = agent_api_keys.agent_id)
