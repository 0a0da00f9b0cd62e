-- $1 = @agent
UPDATE agent_api_keys SET revoked_at = now() WHERE agent_id = $1::text AND revoked_at IS NULL
