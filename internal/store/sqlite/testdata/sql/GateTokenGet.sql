SELECT id, company_id, name, prefix, created_at, last_used_at, revoked_at
FROM gate_tokens WHERE id = :id AND company_id = :company
