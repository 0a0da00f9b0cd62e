INSERT INTO board_sessions (id_hash, token_id, created_at, last_seen_at, expires_at)
VALUES (:hash, :token, :at, :at, :expires)
