-- $1 = @hash
SELECT id, name, prefix, role, company_id, created_at, expires_at, last_used_at, revoked_at
FROM operator_tokens WHERE token_hash = $1::text
