-- $1 = @id
SELECT id, name, issue_prefix, created_at, escalate_after_failures FROM companies WHERE id = $1::text
