-- $1 = @hash
-- $2 = @token
-- $3 = @at
-- $4 = @expires
INSERT INTO board_sessions (id_hash, token_id, created_at, last_seen_at, expires_at)
VALUES ($1::text, $2::text, $3::timestamptz, $3::timestamptz, $4::timestamptz)
