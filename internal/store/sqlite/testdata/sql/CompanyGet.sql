SELECT id, name, issue_prefix, created_at, escalate_after_failures FROM companies WHERE id = :id
