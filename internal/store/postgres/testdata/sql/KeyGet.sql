-- $1 = @id
-- $2 = @agent
SELECT id, agent_id, prefix, created_at, last_used_at, revoked_at, name FROM agent_api_keys
WHERE id = $1::text AND agent_id = $2::text
