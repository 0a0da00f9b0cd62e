INSERT INTO idempotency_keys (actor_id, key, request_hash, resource_type, resource_id, created_at)
VALUES (:actor, :key, :hash, :type, :id, :now)
ON CONFLICT (actor_id, key) DO UPDATE SET
	request_hash = excluded.request_hash, resource_type = excluded.resource_type,
	resource_id = excluded.resource_id, created_at = excluded.created_at
WHERE idempotency_keys.created_at <= :now - :window
RETURNING 1
