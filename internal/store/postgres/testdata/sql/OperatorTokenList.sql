-- $1 = @company
SELECT id, name, prefix, role, company_id, created_at, expires_at, last_used_at, revoked_at
FROM operator_tokens WHERE $1::text = '' OR company_id = $1::text
ORDER BY created_at, id
