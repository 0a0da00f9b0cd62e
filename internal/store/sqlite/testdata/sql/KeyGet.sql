SELECT id, agent_id, prefix, created_at, last_used_at, revoked_at, name FROM agent_api_keys WHERE id = :id AND agent_id = :agent
