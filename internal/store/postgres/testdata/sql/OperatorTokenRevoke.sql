-- $1 = @at
-- $2 = @id
UPDATE operator_tokens SET revoked_at = $1::timestamptz WHERE id = $2::text AND revoked_at IS NULL
RETURNING id, name, prefix, role, company_id, created_at, expires_at, last_used_at, revoked_at
