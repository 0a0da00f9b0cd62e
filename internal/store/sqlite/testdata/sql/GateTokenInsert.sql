INSERT INTO gate_tokens (id, company_id, name, prefix, token_hash, created_at)
VALUES (:id, :company, :name, :prefix, :hash, :at)
RETURNING id, company_id, name, prefix, created_at, last_used_at, revoked_at
