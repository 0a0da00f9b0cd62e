-- $1 = @hash
SELECT s.created_at, s.last_seen_at, s.expires_at,
	t.id, t.name, t.prefix, t.role, t.company_id, t.created_at, t.expires_at, t.last_used_at, t.revoked_at
FROM board_sessions s JOIN operator_tokens t ON t.id = s.token_id
WHERE s.id_hash = $1::text
