UPDATE agent_api_keys SET last_used_at = :now
WHERE id = :id AND (last_used_at IS NULL OR last_used_at <= :now - 60000000)
