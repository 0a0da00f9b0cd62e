UPDATE agent_api_keys SET revoked_at = :now WHERE agent_id = :agent AND revoked_at IS NULL
