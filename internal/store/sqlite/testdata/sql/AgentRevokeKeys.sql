UPDATE agent_api_keys SET revoked_at = ? WHERE agent_id = ? AND revoked_at IS NULL
