SELECT id, name, issue_prefix, created_at, archived_at FROM companies WHERE id = :id
