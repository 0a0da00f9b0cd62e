SELECT id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures FROM companies WHERE id = :id
