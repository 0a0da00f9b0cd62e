DELETE FROM board_sessions WHERE token_id = :token
