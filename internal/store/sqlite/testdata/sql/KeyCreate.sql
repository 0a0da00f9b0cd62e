INSERT INTO agent_api_keys (id, agent_id, prefix, token_hash, created_at, name)
VALUES (:id, :agent, :prefix, :hash, :now, :name)
RETURNING id, agent_id, prefix, created_at, last_used_at, revoked_at, name
