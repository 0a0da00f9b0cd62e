-- $1 = @id
-- $2 = @name
-- $3 = @prefix
-- $4 = @role
-- $5 = @company
-- $6 = @hash
-- $7 = @at
-- $8 = @expires
INSERT INTO operator_tokens (id, name, prefix, role, company_id, token_hash, created_at, expires_at)
VALUES ($1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::timestamptz, $8::timestamptz)
RETURNING id, name, prefix, role, company_id, created_at, expires_at, last_used_at, revoked_at
