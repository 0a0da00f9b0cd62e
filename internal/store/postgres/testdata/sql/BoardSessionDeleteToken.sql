-- $1 = @token
DELETE FROM board_sessions WHERE token_id = $1::text
