-- $1 = @at
-- $2 = @hash
UPDATE board_sessions SET last_seen_at = $1::timestamptz
WHERE id_hash = $2::text AND last_seen_at <= $1::timestamptz - interval '1 minute'
