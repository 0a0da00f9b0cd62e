SELECT id, name, issue_prefix, branch_template, created_at, archived_at FROM companies WHERE id = :id
