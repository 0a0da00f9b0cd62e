SELECT id, agent_id, prefix, created_at, last_used_at, revoked_at, name FROM agent_api_keys
WHERE agent_id = :agent ORDER BY created_at, id
