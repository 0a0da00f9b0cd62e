-- $1 = @at
-- $2 = @id
UPDATE gate_tokens SET last_used_at = $1::timestamptz
WHERE id = $2::text AND (last_used_at IS NULL OR last_used_at <= $1::timestamptz - interval '1 minute')
