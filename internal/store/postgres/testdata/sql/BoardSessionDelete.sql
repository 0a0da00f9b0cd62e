-- $1 = @hash
DELETE FROM board_sessions WHERE id_hash = $1::text
