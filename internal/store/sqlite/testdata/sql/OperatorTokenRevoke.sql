UPDATE operator_tokens SET revoked_at = :at WHERE id = :id AND revoked_at IS NULL
RETURNING id, name, prefix, role, company_id, created_at, expires_at, last_used_at, revoked_at
