DELETE FROM board_sessions WHERE id_hash = :hash
