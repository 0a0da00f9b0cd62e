INSERT INTO companies (id, name, issue_prefix, created_at) VALUES (:id, :name, :prefix, :now)
RETURNING id, name, issue_prefix, created_at, archived_at
