SELECT id, company_id, name, prefix, created_at, last_used_at, revoked_at
FROM gate_tokens WHERE token_hash = :hash
