-- Idempotency-Key records (actor, key) -> the resource a request created.
-- @window is how long a record is in force, in microseconds.

-- name: IdempotencyGet
-- Drops the expired record of (@actor, @key), if any, and reads the one in
-- force (written less than @window ago, by the database clock).
WITH expired AS (
	DELETE FROM idempotency_keys
	WHERE actor_id = @actor::text AND key = @key::text AND created_at <= now() - @window::bigint * interval '1 microsecond'
)
SELECT request_hash, resource_type, resource_id FROM idempotency_keys
WHERE actor_id = @actor::text AND key = @key::text AND created_at > now() - @window::bigint * interval '1 microsecond'

-- name: IdempotencyPurge
-- Deletes the records of every actor that are no longer in force.
DELETE FROM idempotency_keys WHERE created_at <= now() - @window::bigint * interval '1 microsecond'
