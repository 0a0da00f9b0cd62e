-- $1 = @id
-- $2 = @company
-- $3 = @name
-- $4 = @prefix
-- $5 = @hash
-- $6 = @at
INSERT INTO gate_tokens (id, company_id, name, prefix, token_hash, created_at)
VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::timestamptz)
RETURNING id, company_id, name, prefix, created_at, last_used_at, revoked_at
