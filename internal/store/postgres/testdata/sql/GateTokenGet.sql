-- $1 = @id
-- $2 = @company
SELECT id, company_id, name, prefix, created_at, last_used_at, revoked_at
FROM gate_tokens WHERE id = $1::text AND company_id = $2::text
