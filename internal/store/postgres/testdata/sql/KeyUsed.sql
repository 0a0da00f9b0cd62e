-- $1 = @id
UPDATE agent_api_keys SET last_used_at = now()
WHERE id = $1::text AND (last_used_at IS NULL OR last_used_at <= now() - interval '1 minute')
