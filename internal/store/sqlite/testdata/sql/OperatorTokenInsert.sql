INSERT INTO operator_tokens (id, name, prefix, role, company_id, token_hash, created_at, expires_at)
VALUES (:id, :name, :prefix, :role, :company, :hash, :at, :expires)
RETURNING id, name, prefix, role, company_id, created_at, expires_at, last_used_at, revoked_at
