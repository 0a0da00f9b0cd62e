SELECT request_hash, resource_type, resource_id FROM idempotency_keys
WHERE actor_id = :actor AND key = :key AND created_at > :now - :window
