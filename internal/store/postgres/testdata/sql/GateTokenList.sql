-- $1 = @company
SELECT id, company_id, name, prefix, created_at, last_used_at, revoked_at
FROM gate_tokens WHERE company_id = $1::text ORDER BY created_at, id
