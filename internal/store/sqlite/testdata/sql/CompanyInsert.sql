INSERT INTO companies (id, name, issue_prefix, branch_template, created_at) VALUES (:id, :name, :prefix, :branch_template, :now)
RETURNING id, name, issue_prefix, branch_template, created_at, archived_at
