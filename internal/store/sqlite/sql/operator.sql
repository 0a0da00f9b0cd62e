-- Operator tokens and board sessions. Times are unix microseconds; :at is
-- the server's clock, given by the caller.

-- name: OperatorTokenInsert
INSERT INTO operator_tokens (id, name, prefix, role, company_id, token_hash, created_at, expires_at)
VALUES (:id, :name, :prefix, :role, :company, :hash, :at, :expires)
RETURNING id, name, prefix, role, company_id, created_at, expires_at, last_used_at, revoked_at

-- name: OperatorTokenGet
SELECT id, name, prefix, role, company_id, created_at, expires_at, last_used_at, revoked_at
FROM operator_tokens WHERE id = :id

-- name: OperatorTokenByHash
SELECT id, name, prefix, role, company_id, created_at, expires_at, last_used_at, revoked_at
FROM operator_tokens WHERE token_hash = :hash

-- name: OperatorTokenList
-- Every token (:company '') or those scoped to company :company, oldest first.
SELECT id, name, prefix, role, company_id, created_at, expires_at, last_used_at, revoked_at
FROM operator_tokens WHERE :company = '' OR company_id = :company
ORDER BY created_at, id

-- name: OperatorTokenRevoke
-- Revokes an unrevoked token; no row when it is revoked already or missing.
UPDATE operator_tokens SET revoked_at = :at WHERE id = :id AND revoked_at IS NULL
RETURNING id, name, prefix, role, company_id, created_at, expires_at, last_used_at, revoked_at

-- name: OperatorTokenUsed
-- Records a token's use at most once a minute.
UPDATE operator_tokens SET last_used_at = :at
WHERE id = :id AND (last_used_at IS NULL OR last_used_at <= :at - 60000000)

-- name: BoardSessionInsert
INSERT INTO board_sessions (id_hash, token_id, created_at, last_seen_at, expires_at)
VALUES (:hash, :token, :at, :at, :expires)

-- name: BoardSessionGet
-- The session whose secret has hash :hash, with its token.
SELECT s.created_at, s.last_seen_at, s.expires_at,
	t.id, t.name, t.prefix, t.role, t.company_id, t.created_at, t.expires_at, t.last_used_at, t.revoked_at
FROM board_sessions s JOIN operator_tokens t ON t.id = s.token_id
WHERE s.id_hash = :hash

-- name: BoardSessionSeen
-- Records a session's use at most once a minute.
UPDATE board_sessions SET last_seen_at = :at
WHERE id_hash = :hash AND last_seen_at <= :at - 60000000

-- name: BoardSessionDelete
DELETE FROM board_sessions WHERE id_hash = :hash

-- name: BoardSessionDeleteToken
-- Ends every session of token :token (it was revoked).
DELETE FROM board_sessions WHERE token_id = :token
