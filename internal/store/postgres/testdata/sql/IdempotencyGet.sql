-- $1 = @actor
-- $2 = @key
-- $3 = @window
WITH expired AS (
	DELETE FROM idempotency_keys
	WHERE actor_id = $1::text AND key = $2::text AND created_at <= now() - $3::bigint * interval '1 microsecond'
)
SELECT request_hash, resource_type, resource_id FROM idempotency_keys
WHERE actor_id = $1::text AND key = $2::text AND created_at > now() - $3::bigint * interval '1 microsecond'
