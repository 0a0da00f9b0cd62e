-- $1 = @at
-- $2 = @id
-- $3 = @company
UPDATE gate_tokens SET revoked_at = $1::timestamptz
WHERE id = $2::text AND company_id = $3::text AND revoked_at IS NULL
RETURNING id, company_id, name, prefix, created_at, last_used_at, revoked_at
