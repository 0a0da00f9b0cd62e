UPDATE gate_tokens SET revoked_at = :at WHERE id = :id AND company_id = :company AND revoked_at IS NULL
RETURNING id, company_id, name, prefix, created_at, last_used_at, revoked_at
