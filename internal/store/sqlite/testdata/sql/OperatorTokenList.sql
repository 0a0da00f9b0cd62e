SELECT id, name, prefix, role, company_id, created_at, expires_at, last_used_at, revoked_at
FROM operator_tokens WHERE :company = '' OR company_id = :company
ORDER BY created_at, id
