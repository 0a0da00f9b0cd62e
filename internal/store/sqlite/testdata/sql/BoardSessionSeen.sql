UPDATE board_sessions SET last_seen_at = :at
WHERE id_hash = :hash AND last_seen_at <= :at - 60000000
