-- Idempotency-Key records (actor, key) -> the resource a request created.
-- :window is how long a record is in force, in microseconds.

-- name: IdempotencyGet
-- The record of (:actor, :key) still in force: one written less than the
-- window ago.
SELECT request_hash, resource_type, resource_id FROM idempotency_keys
WHERE actor_id = :actor AND key = :key AND created_at > :now - :window

-- name: IdempotencyInsert
-- Records a creation in its own transaction. An expired record of the same
-- (actor, key) is replaced; a record in force makes it return no row
-- (impossible here: the single writer read it as absent in this
-- transaction).
INSERT INTO idempotency_keys (actor_id, key, request_hash, resource_type, resource_id, created_at)
VALUES (:actor, :key, :hash, :type, :id, :now)
ON CONFLICT (actor_id, key) DO UPDATE SET
	request_hash = excluded.request_hash, resource_type = excluded.resource_type,
	resource_id = excluded.resource_id, created_at = excluded.created_at
WHERE idempotency_keys.created_at <= :now - :window
RETURNING 1

-- name: IdempotencyPurge
-- Deletes the records of every actor that are no longer in force.
DELETE FROM idempotency_keys WHERE created_at <= :now - :window
