UPDATE gate_tokens SET last_used_at = :at
WHERE id = :id AND (last_used_at IS NULL OR last_used_at <= :at - 60000000)
